"""Reading TensorBoard event files without TensorFlow, and importing them into a live server."""

from __future__ import annotations

import os
import shutil
import struct

import numpy as np
import pytest

tensorboardX = pytest.importorskip("tensorboardX")
from tensorboardX.proto.summary_pb2 import Summary  # noqa: E402
from tensorboardX.proto.tensor_pb2 import TensorProto  # noqa: E402
from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto  # noqa: E402

from corral.sdk.tensorboard import event_files, import_tensorboard, read_scalars  # noqa: E402

T0 = 1_700_000_000.0


def f32(value: float) -> float:
    """What a float becomes in a simple_value (a protobuf float)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def write_scalars(directory: str, tags: dict[str, list[float]], first_step: int = 0) -> None:
    with tensorboardX.SummaryWriter(directory) as writer:
        for i in range(max(len(v) for v in tags.values())):
            for tag, values in tags.items():
                if i < len(values):
                    writer.add_scalar(tag, values[i], first_step + i, walltime=T0 + i)


def tensor_summary(tag: str, tensor: TensorProto) -> Summary:
    return Summary(value=[Summary.Value(tag=tag, tensor=tensor)])


def only_file(directory: str) -> str:
    (path,) = event_files(directory)
    return path


def test_scalars_written_by_tensorboardx_read_back_exactly(tmp_path):
    tags = {"loss": [2.5, 1.25, 0.1, float("nan"), float("inf")], "acc/train": [0.1, 0.2, 0.3], "lr": [1e-3] * 4}
    write_scalars(str(tmp_path), tags)
    scalars = read_scalars(only_file(str(tmp_path)))
    assert set(scalars) == set(tags)
    for tag, values in tags.items():
        got = scalars[tag]
        assert [s for s, _, _ in got] == list(range(len(values)))
        assert [t for _, t, _ in got] == [T0 + i for i in range(len(values))]
        np.testing.assert_array_equal([v for _, _, v in got], [f32(v) for v in values])
    # a directory reads as all its event files together (repr: NaN is not equal to itself)
    assert repr(read_scalars(str(tmp_path))) == repr(scalars)


def test_tf2_style_tensor_scalars_are_read_and_other_tensors_ignored(tmp_path):
    scalar_shape = TensorShapeProto()
    with tensorboardX.SummaryWriter(str(tmp_path)) as writer:
        events = writer._get_file_writer()  # tensorboardX has no public way to write raw tensor summaries
        events.add_summary(tensor_summary("tf2/float_val", TensorProto(dtype=1, tensor_shape=scalar_shape, float_val=[0.25])), 3, T0)
        events.add_summary(tensor_summary("tf2/double_val", TensorProto(dtype=2, tensor_shape=scalar_shape, double_val=[1 / 3])), 4, T0)
        events.add_summary(tensor_summary("tf2/content", TensorProto(dtype=2, tensor_shape=scalar_shape,
                                                                     tensor_content=np.float64(2 / 3).tobytes())), 5, T0)
        events.add_summary(tensor_summary("tf2/content32", TensorProto(dtype=1, tensor_content=np.float32(0.75).tobytes())), 6, T0)
        events.add_summary(tensor_summary("tf2/half", TensorProto(dtype=19, half_val=[int(np.float16(1.5).view(np.uint16))])), 7, T0)
        events.add_summary(tensor_summary("tf2/int64", TensorProto(dtype=9, int64_val=[-42])), 8, T0)
        vector = TensorShapeProto(dim=[TensorShapeProto.Dim(size=3)])
        events.add_summary(tensor_summary("tf2/vector", TensorProto(dtype=1, tensor_shape=vector, float_val=[1.0])), 9, T0)
        events.add_summary(tensor_summary("tf2/text", TensorProto(dtype=7, string_val=[b"hello"])), 9, T0)
        writer.add_histogram("weights", np.arange(10.0), 1, walltime=T0)
        writer.add_text("notes", "not a scalar", 1, walltime=T0)
    scalars = read_scalars(only_file(str(tmp_path)))
    assert scalars == {
        "tf2/float_val": [(3, T0, 0.25)], "tf2/double_val": [(4, T0, 1 / 3)], "tf2/content": [(5, T0, 2 / 3)],
        "tf2/content32": [(6, T0, 0.75)], "tf2/half": [(7, T0, 1.5)], "tf2/int64": [(8, T0, -42.0)],
    }


def test_a_truncated_file_yields_its_whole_records_with_a_warning(tmp_path):
    write_scalars(str(tmp_path / "full"), {"loss": [float(i) for i in range(50)]})
    full = only_file(str(tmp_path / "full"))
    cut = str(tmp_path / "cut.tfevents")
    with open(full, "rb") as src, open(cut, "wb") as dst:
        data = src.read()
        dst.write(data[: len(data) - 7])  # mid-way through the last record
    with pytest.warns(UserWarning, match="truncated record"):
        scalars = read_scalars(cut)
    assert [v for _, _, v in scalars["loss"]] == [float(i) for i in range(49)]


def test_a_record_failing_its_checksum_is_skipped_and_the_rest_read(tmp_path):
    write_scalars(str(tmp_path), {"loss": [float(i) for i in range(10)]})
    path = only_file(str(tmp_path))
    data = bytearray(open(path, "rb").read())
    data[-6] ^= 0xFF  # inside the last record's data: its length still frames the file
    open(path, "wb").write(bytes(data))
    with pytest.warns(UserWarning, match="checksum"):
        scalars = read_scalars(path)
    assert [v for _, _, v in scalars["loss"]] == [float(i) for i in range(9)]


def test_importing_twice_into_a_live_server_adds_nothing_the_second_time(server_factory, tmp_path):
    client = server_factory().client()
    root = tmp_path / "tb"
    write_scalars(str(root / "baseline"), {"loss": [1.0, 0.5, 0.25], "acc": [0.5, 0.75, 1.0]})
    write_scalars(str(root / "sweep" / "lr-0.1"), {"loss": [3.0, 2.0]}, first_step=10)
    shutil.copy(only_file(str(root / "baseline")), str(root / "not-events.txt"))  # ignored: no tfevents in its name

    first = import_tensorboard(str(root), client=client, project="imported")
    assert sorted(r["name"] for r in first) == ["baseline", os.path.join("sweep", "lr-0.1")]
    assert all(r["state"] == "finished" and "tensorboard" in r["tags"] for r in first)
    again = import_tensorboard(str(root), client=client, project="imported")
    assert sorted(r["id"] for r in again) == sorted(r["id"] for r in first)
    assert len(client.runs(project="imported")) == 2

    by_name = {r["name"]: r for r in again}
    loss = client.series(by_name["baseline"]["id"], "loss")
    assert (loss["count"], loss["steps"], loss["values"], loss["times"]) == (3, [0, 1, 2], [1.0, 0.5, 0.25], [T0, T0 + 1, T0 + 2])
    assert client.series(by_name["baseline"]["id"], "acc")["count"] == 3
    swept = client.series(by_name[os.path.join("sweep", "lr-0.1")]["id"], "loss")
    assert (swept["steps"], swept["values"]) == ([10, 11], [3.0, 2.0])
    # the run spans its events (written at T0..T0+2), not from when the writer opened the file (now)
    assert (by_name["baseline"]["start_time"], by_name["baseline"]["end_time"]) == (T0, T0 + 2)


def test_add_scalars_series_are_keys_of_the_writers_run_not_runs_of_their_own(server_factory, tmp_path):
    client = server_factory().client()
    root = tmp_path / "tb"
    with tensorboardX.SummaryWriter(str(root / "exp")) as writer:
        for step in range(3):
            writer.add_scalar("lr", 0.1, step, walltime=T0 + step)
            writer.add_scalars("loss", {"train": 1.0 / (step + 1), "val": 2.0 / (step + 1)}, step, walltime=T0 + step)
            writer.add_scalars("eval/acc", {"top1": 0.5 + step / 10}, step, walltime=T0 + step)
    assert {p.name for p in (root / "exp").iterdir() if p.is_dir()} == {"loss", "eval"}  # exp/loss/train/...
    # torch.utils.tensorboard's layout: <writer>/<main tag, / as _>_<series>/, each holding the main tag
    with tensorboardX.SummaryWriter(str(root / "torch-style")) as writer:
        writer.add_scalar("lr", 0.1, 0, walltime=T0)
    for series, value in (("train", 1.0), ("val", 2.0)):
        with tensorboardX.SummaryWriter(str(root / "torch-style" / f"loss_{series}")) as writer:
            writer.add_scalar("loss", value, 0, walltime=T0)

    run, torch_style = import_tensorboard(str(root), client=client, project="scalars")
    assert run["name"] == "exp"
    assert set(run["metrics"]) == {"lr", "loss/train", "loss/val", "eval/acc/top1"}
    assert client.series(run["id"], "loss/val")["values"] == [2.0, 1.0, f32(2.0 / 3)]
    assert torch_style["name"] == "torch-style" and set(torch_style["metrics"]) == {"lr", "loss/train", "loss/val"}
    again = import_tensorboard(str(root), client=client, project="scalars")
    assert [r["id"] for r in again] == [run["id"], torch_style["id"]]
    assert len(client.runs(project="scalars")) == 2
    assert client.series(run["id"], "loss/train")["count"] == 3


def test_a_resumed_writers_steps_replace_the_earlier_ones_and_are_counted(server_factory, tmp_path):
    client = server_factory().client()
    root = tmp_path / "tb" / "requeued"
    write_scalars(str(root), {"loss": [float(s) for s in range(10)]})  # steps 0-9, then the job was requeued
    os.utime(only_file(str(root)), (T0, T0))
    with tensorboardX.SummaryWriter(str(root), filename_suffix=".second") as writer:  # resumed from step 5's checkpoint
        for step in range(5, 15):
            writer.add_scalar("loss", 100.0 + step, step, walltime=T0 + 100 + step)
    assert len(event_files(str(root))) == 2

    [run] = import_tensorboard(str(tmp_path / "tb"), client=client, project="requeued")
    assert run["replaced_points"] == {"loss": 5}
    loss = client.series(run["id"], "loss")
    assert loss["steps"] == list(range(15))
    assert loss["values"] == [0.0, 1.0, 2.0, 3.0, 4.0] + [100.0 + s for s in range(5, 15)]  # the resumed values
    again = import_tensorboard(str(tmp_path / "tb"), client=client, project="requeued")
    assert again[0]["id"] == run["id"] and client.series(run["id"], "loss")["count"] == 15


def test_the_import_command_reports_what_the_resumed_values_replaced(server_factory, tmp_path):
    from click.testing import CliRunner

    from corral.cli.main import cli

    server = server_factory()
    root = tmp_path / "tb" / "again"
    with tensorboardX.SummaryWriter(str(root)) as writer:
        for step in (0, 1, 2, 1, 2, 3):  # a repeat of steps 1 and 2
            writer.add_scalar("loss", float(step), step, walltime=T0 + step)
    result = CliRunner().invoke(cli, ["--home", server.home, "import-tensorboard", str(tmp_path / "tb")])
    assert result.exit_code == 0, result.output
    assert "2 points at steps logged again (loss: 2) gave way to the values logged later" in result.output


def test_a_look_at_a_files_first_events_reads_little_more_than_them(monkeypatch, tmp_path):
    """Telling a file's kind (an hparams session?) or when it started reads its first events, not the whole file
    (a run's event file holds every image it logged)."""
    import io

    from corral.sdk import tensorboard_records
    from corral.sdk.tensorboard import _first_wall_time
    from corral.sdk.tensorboard_media import starts_hparams_session
    from corral.sdk.tensorboard_records import read_records

    with tensorboardX.SummaryWriter(str(tmp_path)) as writer:
        for step in range(200):
            writer.add_text("notes", f"{step} " + "x" * 20_000, step, walltime=T0 + step)
    path = only_file(str(tmp_path))
    size = os.path.getsize(path)
    every = list(read_records(path))
    read = [0]

    class CountingFile(io.FileIO):
        def readinto(self, buffer):
            count = super().readinto(buffer)
            read[0] += count or 0
            return count

        def read(self, size=-1):
            data = super().read(size)
            read[0] += len(data or b"")
            return data

        def readall(self):
            data = super().readall()
            read[0] += len(data)
            return data

    def counting_open(file, mode="rb", buffering=-1):
        assert mode == "rb"
        raw = CountingFile(file)
        return raw if buffering == 0 else io.BufferedReader(raw, buffering if buffering > 0 else io.DEFAULT_BUFFER_SIZE)

    monkeypatch.setattr(tensorboard_records, "open", counting_open, raising=False)
    first = []
    for record in read_records(path):
        first.append(record)
        if len(first) == 3:
            break
    assert first == every[:3]
    assert not starts_hparams_session(path)  # its first 8 events
    assert _first_wall_time(path) is not None
    assert read[0] < size / 10
    # read to its end, it is read once
    read[0] = 0
    assert list(read_records(path)) == every and read[0] == size
