"""`corral import-tensorboard` brings a run's images, histograms, text and hparams along with its scalars:
the media as the run's artifacts at their steps (the paths and formats corral.Image, corral.Histogram and
corral.Text upload), the hparams as its config. Written by the real tensorboardX, imported into a live server."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import tensorboardX
from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData, SessionStartInfo
from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboardX.proto.tensor_pb2 import TensorProto
from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto

from corral.cli.main import cli
from corral.sdk.media import png
from corral.sdk.tensorboard import import_tensorboard

T0 = 1_700_000_000.0
WEIGHTS = 500  # values in each histogram


def fetch(client, run_id: int, path: str) -> bytes:
    out = io.BytesIO()
    client.download_artifact(run_id, path, out)
    return out.getvalue()


def pixels(step: int) -> np.ndarray:
    """A 3×6×10 (C×H×W, as torch keeps images) uint8 image of its own for each step."""
    return np.random.default_rng(step).integers(0, 256, size=(3, 6, 10), dtype=np.uint8)


def weights(step: int) -> np.ndarray:
    return np.random.default_rng(100 + step).normal(step, 1.0, WEIGHTS)


def write_training(directory: str) -> None:
    """What a training script writes: scalars, an image, a histogram and a note per step, then add_hparams."""
    with tensorboardX.SummaryWriter(directory) as writer:
        for step in range(3):
            writer.add_scalar("loss", 1.0 / (step + 1), step, walltime=T0 + step)
            writer.add_image("samples", pixels(step), step, walltime=T0 + step)
            writer.add_histogram("fc/weight", weights(step), step, walltime=T0 + step)
            writer.add_text("notes", f"step **{step}**: é ✓", step, walltime=T0 + step)
        writer.add_hparams({"lr": 0.01, "batch_size": 32, "optimizer": "adam", "nesterov": True},
                           {"hparam/final_acc": 0.9, "loss": 123.0})


def import_command(server, directory: str) -> str:
    result = CliRunner().invoke(cli, ["--home", server.home, "import-tensorboard", "-p", "tb", directory])
    assert result.exit_code == 0, result.output
    return result.output


def test_images_histograms_text_and_hparams_from_tensorboardx_become_media_and_config(server_factory, tmp_path):
    server = server_factory()
    client = server.client()
    root = tmp_path / "tb"
    write_training(str(root / "exp"))
    assert len([p for p in (root / "exp").iterdir() if p.is_dir()]) == 1  # add_hparams's own directory

    output = import_command(server, str(root))
    assert "media: 3 histograms, 3 images, 3 texts (9 uploaded now)" in output
    (run,) = client.runs(project="tb")  # add_hparams's directory is not a run of its own
    run = client.get_run(run["id"])
    assert run["name"] == "exp"
    config = run["config"]
    assert {k: config[k] for k in ("lr", "batch_size", "optimizer", "nesterov")} == \
        {"lr": 0.01, "batch_size": 32, "optimizer": "adam", "nesterov": True}
    assert config["tensorboard_dir"] == str(root / "exp")
    # add_hparams's metrics join the writer's, but the writer's own "loss" series is not overwritten
    assert client.series(run["id"], "hparam/final_acc")["values"] == [pytest.approx(0.9)]
    assert client.series(run["id"], "loss")["values"] == [1.0, 0.5, pytest.approx(1 / 3)]

    artifacts = client.artifacts(run["id"])
    media = {a["path"]: a for a in artifacts}
    for step in range(3):
        image = media[f"media/samples/{step:08d}.png"]
        assert (image["type"], image["step"], image["stored"]) == ("image", step, True)
        decoded = Image.open(io.BytesIO(fetch(client, run["id"], image["path"])))
        assert decoded.format == "PNG" and decoded.size == (10, 6)  # width × height
        assert (np.asarray(decoded) == pixels(step).transpose(1, 2, 0)).all()

        histogram = media[f"media/fc/weight/{step:08d}.hist.json"]
        assert (histogram["type"], histogram["step"]) == ("histogram", step)
        hist = json.loads(fetch(client, run["id"], histogram["path"]))
        assert sum(hist["counts"]) == WEIGHTS and len(hist["edges"]) == len(hist["counts"]) + 1
        assert hist["edges"] == sorted(hist["edges"])
        assert hist["edges"][0] <= weights(step).min() and hist["edges"][-1] >= weights(step).max()

        text = media[f"media/notes/{step:08d}.txt"]  # add_text's "/text_summary" is not part of the key
        assert (text["type"], text["step"]) == ("text", step)
        assert fetch(client, run["id"], text["path"]).decode("utf-8") == f"step **{step}**: é ✓"
    assert len(media) == 9

    # importing again adds nothing: the same run, the same artifacts, nothing uploaded
    again = import_command(server, str(root))
    assert "(0 uploaded now)" in again
    assert [r["id"] for r in client.runs(project="tb")] == [run["id"]]
    assert client.artifacts(run["id"]) == artifacts
    assert client.series(run["id"], "loss")["count"] == 3
    assert client.get_run(run["id"])["config"] == config

    shown = CliRunner().invoke(cli, ["--home", server.home, "run", "show", str(run["id"])])
    assert shown.exit_code == 0, shown.output
    media_lines = shown.output.split("Media:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split()[:4] for line in media_lines] == [
        ["KEY", "TYPE", "COUNT", "STEPS"], ["fc/weight", "histogram", "3", "0-2"], ["notes", "text", "3", "0-2"],
        ["samples", "image", "3", "0-2"]]
    assert "Artifacts: (none)" in shown.output  # the media are not listed again one by one


def plugin(name: str, content: bytes = b"") -> SummaryMetadata:
    return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=name, content=content))


def strings(*values: bytes) -> TensorProto:
    return TensorProto(dtype=7, string_val=list(values), tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=len(values))]))


def test_tf2_tensor_summaries_and_hparams_in_the_writers_own_directory(server_factory, tmp_path):
    """TF2 writes images, histograms and text as tensors that its plugin names, with the first value of
    a tag only; its hparams API writes the session into the run's own directory, with a 0.0 placeholder."""
    client = server_factory().client()
    root = tmp_path / "tb" / "tf2"
    first, second = pixels(0).transpose(1, 2, 0), pixels(1).transpose(1, 2, 0)
    ssi = HParamsPluginData(version=0, session_start_info=SessionStartInfo())
    ssi.session_start_info.hparams["dropout"].number_value = 0.1
    ssi.session_start_info.hparams["layers"].number_value = 4
    ssi.session_start_info.hparams["activation"].string_value = "gelu"
    with tensorboardX.SummaryWriter(str(root)) as writer:
        events = writer._get_file_writer()  # tensorboardX has no public way to write raw tensor summaries
        placeholder = TensorProto(dtype=1, tensor_shape=TensorShapeProto(), float_val=[0.0])
        events.add_summary(Summary(value=[Summary.Value(tag="_hparams_/session_start_info", tensor=placeholder,
                                                        metadata=plugin("hparams", ssi.SerializeToString()))]), 0, T0)
        for step in range(2):
            rows = [[-1.0, 0.0, 3.0], [0.0, 1.0, 4.0 + step]]  # (left, right, count)
            histogram = TensorProto(dtype=2, tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=2),
                                                                                TensorShapeProto.Dim(size=3)]),
                                    tensor_content=np.array(rows, np.float64).tobytes())
            values = [
                Summary.Value(tag="activations", tensor=histogram, metadata=plugin("histograms") if step == 0 else None),
                Summary.Value(tag="batch", tensor=strings(b"10", b"6", png(first), png(second)),
                              metadata=plugin("images") if step == 0 else None),
                Summary.Value(tag="generated", tensor=strings(f"line one at {step}".encode(), b"line two"),
                              metadata=plugin("text") if step == 0 else None),
                Summary.Value(tag="speech", audio=Summary.Audio(encoded_audio_string=b"RIFF....WAVE")),
                Summary.Value(tag="clip", image=Summary.Image(encoded_image_string=b"GIF89a....")),
            ]
            events.add_summary(Summary(value=values), step + 10, T0 + step)
        writer.add_scalar("loss", 0.5, 10, walltime=T0)

    (run,) = import_tensorboard(str(tmp_path / "tb"), client=client, project="tf2")
    assert (run["media"], run["media_sent"], run["skipped_media"]) == ({"histogram": 2, "image": 4, "text": 2}, 8, 4)
    assert set(run["metrics"]) == {"loss"}  # not the hparams placeholder
    assert {k: run["config"].get(k) for k in ("dropout", "layers", "activation")} == \
        {"dropout": 0.1, "layers": 4, "activation": "gelu"}
    media = {a["path"]: a for a in client.artifacts(run["id"])}
    assert set(media) == {f"media/{key}/{step:08d}{suffix}" for step in (10, 11) for key, suffix in
                          (("activations", ".hist.json"), ("batch/0", ".png"), ("batch/1", ".png"), ("generated", ".txt"))}
    assert json.loads(fetch(client, run["id"], "media/activations/00000011.hist.json")) == \
        {"edges": [-1.0, 0.0, 1.0], "counts": [3, 5]}
    assert fetch(client, run["id"], "media/batch/1/00000010.png") == png(second)
    assert fetch(client, run["id"], "media/generated/00000011.txt") == b"line one at 1\nline two"


def test_several_add_hparams_in_one_writer_are_runs_of_their_own(server_factory, tmp_path):
    client = server_factory().client()
    root = tmp_path / "tb"
    with tensorboardX.SummaryWriter(str(root / "sweep")) as writer:
        for lr in (0.1, 0.01):  # tensorboardX's own example: one trial per call
            writer.add_hparams({"lr": lr}, {"hparam/acc": 1 - lr}, name=f"lr-{lr}")
    runs = {r["name"]: r for r in import_tensorboard(str(root), client=client, project="sweep")}
    trials = {name: run for name, run in runs.items() if name != "sweep"}
    assert sorted(trials) == [os.path.join("sweep", "lr-0.01"), os.path.join("sweep", "lr-0.1")]
    for name, run in trials.items():
        lr = float(name.rsplit("-", 1)[1])
        assert run["config"]["lr"] == lr
        assert client.series(run["id"], "hparam/acc")["values"] == [pytest.approx(1 - lr)]


def test_a_resumed_writers_media_replace_what_it_wrote_from_the_resumed_step_on(server_factory, tmp_path):
    client = server_factory().client()
    root = tmp_path / "tb" / "requeued"
    with tensorboardX.SummaryWriter(str(root)) as writer:  # steps 0-3, then the job was requeued
        for step in range(4):
            writer.add_text("status", f"first try {step}", step, walltime=T0 + step)
    os.utime(next(root.iterdir()), (T0, T0))
    with tensorboardX.SummaryWriter(str(root), filename_suffix=".second") as writer:  # resumed from step 2
        writer.add_text("status", "second try 2", 2, walltime=T0 + 100)

    (run,) = import_tensorboard(str(tmp_path / "tb"), client=client, project="requeued")
    media = sorted(a["path"] for a in client.artifacts(run["id"]))
    assert media == ["media/status/00000000.txt", "media/status/00000001.txt", "media/status/00000002.txt"]
    assert fetch(client, run["id"], "media/status/00000002.txt") == b"second try 2"


def test_tensorflows_own_buckets_out_to_dbl_max_become_even_ones_within_the_values():
    """TF1's histogram op writes exponentially growing buckets, the outermost ending at ±DBL_MAX."""
    from corral.sdk.tensorboard_media import histogram_json

    dbl_max = np.finfo(np.float64).max
    hist = json.loads(histogram_json(-1.0, 2.0, [-dbl_max, -0.5, 0.5, 1.0, dbl_max], [0, 3, 0, 4, 2]))
    assert hist["edges"][0] == -1.0 and hist["edges"][-1] == 2.0 and len(hist["edges"]) == 65
    assert hist["edges"] == sorted(hist["edges"]) and sum(hist["counts"]) == 9
    # each bucket's values stay within its span: 3 from -1 to -0.5, 4 from 0.5 to 1, 2 from 1 to 2
    centre = [(a + b) / 2 for a, b in zip(hist["edges"], hist["edges"][1:])]
    within = {(lo, hi): sum(c for x, c in zip(centre, hist["counts"]) if lo < x < hi)
              for lo, hi in ((-1.0, -0.5), (-0.5, 0.5), (0.5, 1.0), (1.0, 2.0))}
    assert within == {(-1.0, -0.5): 3, (-0.5, 0.5): 0, (0.5, 1.0): 4, (1.0, 2.0): 2}


@pytest.mark.parametrize("below", [False, True], ids=["the-run-imported", "a-run-below-it"])
def test_an_import_decodes_each_tensor_once_for_both_its_scalar_and_its_media(server_factory, monkeypatch, tmp_path,
                                                                              below):
    """A TF2 summary's tensors are read for scalars and for media from one decoding (images and histograms are the
    large ones). A run below the directory imported is looked at first, to tell whether it is one series of
    add_scalars: that look stops at its first scalar, here in its first summary."""
    from collections import Counter

    from corral.sdk import tensorboard, tensorboard_media, tensorboard_records

    client = server_factory().client()
    root = tmp_path / "tb" / "tf2" if below else tmp_path / "tf2"
    written = []
    with tensorboardX.SummaryWriter(str(root)) as writer:
        events = writer._get_file_writer()  # tensorboardX has no public way to write raw tensor summaries
        for step in range(3):
            loss = TensorProto(dtype=1, tensor_shape=TensorShapeProto(), float_val=[1.0 / (step + 1)])
            histogram = TensorProto(dtype=2, tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1),
                                                                                TensorShapeProto.Dim(size=3)]),
                                    tensor_content=np.array([[0.0, 1.0, 5.0 + step]], np.float64).tobytes())
            image = strings(b"10", b"6", png(pixels(step).transpose(1, 2, 0)))
            note = strings(f"step {step}".encode())
            tensors = {"loss": (loss, "scalars"), "weights": (histogram, "histograms"), "samples": (image, "images"),
                       "notes": (note, "text")}
            values = [Summary.Value(tag=tag, tensor=proto, metadata=plugin(kind) if step == 0 else None)
                      for tag, (proto, kind) in tensors.items()]
            events.add_summary(Summary(value=values), step, T0 + step)
            written += [proto.SerializeToString() for proto, _ in tensors.values()]

    decoded: Counter[bytes] = Counter()
    real = tensorboard_records.tensor

    def counting(buf: bytes):
        decoded[bytes(buf)] += 1
        return real(buf)

    for module in (tensorboard, tensorboard_media, tensorboard_records):
        if hasattr(module, "tensor"):
            monkeypatch.setattr(module, "tensor", counting)
    (run,) = import_tensorboard(str(root.parent if below else root), client=client, project="tf2")

    looked_at = Counter(written[:4]) if below else Counter()
    assert decoded == Counter(written) + looked_at  # each one, once
    assert (run["media"], run["media_sent"]) == ({"histogram": 3, "image": 3, "text": 3}, 9)
    assert client.series(run["id"], "loss")["values"] == [1.0, 0.5, pytest.approx(1 / 3)]
    assert json.loads(fetch(client, run["id"], "media/weights/00000002.hist.json")) == \
        {"edges": [0.0, 1.0], "counts": [7]}
    assert fetch(client, run["id"], "media/samples/00000001.png") == png(pixels(1).transpose(1, 2, 0))
    assert fetch(client, run["id"], "media/notes/00000002.txt") == b"step 2"
