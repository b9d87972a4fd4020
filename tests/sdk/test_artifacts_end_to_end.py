"""`run.log_artifact` against a real server: files and directories uploaded to the store and
downloaded back; an offline run's artifacts travel with `corral sync`, even when the original
file is gone by then; checkpoints stay registered where they were written."""

from __future__ import annotations

import io
import os

import pytest

import corral
from corral.sdk.sync import sync_spool

pytestmark = pytest.mark.usefixtures("sdk_env")
FAST = {"flush_interval_s": 0.05, "retry_interval_s": 0.2}


def fetch(client, run_id: int, path: str) -> bytes:
    out = io.BytesIO()
    client.download_artifact(run_id, path, out)
    return out.getvalue()


def test_files_and_directories_go_to_the_store_and_come_back(server, monkeypatch, tmp_path):
    monkeypatch.setenv("CORRAL_HOME", server.home)
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text('{"layers": 4}')
    (model / "sub" / "weights.bin").write_bytes(os.urandom(300_000))
    report = tmp_path / "report.txt"
    report.write_text("accuracy 0.93\n")
    run = corral.init(project="art", **FAST)
    run.log_artifact(model, type="model")
    run.log_artifact(report, name="eval/report.txt")
    run.finish()
    client = server.client()
    listed = {a["path"]: a for a in client.artifacts(run.id)}
    assert set(listed) == {"model/config.json", "model/sub/weights.bin", "eval/report.txt"}
    assert all(a["stored"] for a in listed.values()) and listed["model/config.json"]["type"] == "model"
    assert fetch(client, run.id, "model/sub/weights.bin") == (model / "sub" / "weights.bin").read_bytes()
    assert fetch(client, run.id, "eval/report.txt") == b"accuracy 0.93\n"


def test_an_offline_runs_artifacts_travel_with_sync(server, monkeypatch, tmp_path, sdk_env):
    monkeypatch.setenv("CORRAL_HOME", server.home)
    data = tmp_path / "preds.csv"
    data.write_bytes(b"id,label\n1,cat\n")
    run = corral.init(project="art", mode="offline", **FAST)
    run.log({"loss": 1.0}, step=0)
    run.log_artifact(data, type="predictions")
    run.finish()
    data.unlink()  # the job's scratch is gone by the time the node syncs: the spool kept a copy
    (report,) = sync_spool(client=server.client())
    assert report.error is None, report
    client = server.client()
    (artifact,) = client.artifacts(report.run_id)
    assert (artifact["path"], artifact["type"], artifact["stored"]) == ("preds.csv", "predictions", True)
    assert fetch(client, report.run_id, "preds.csv") == b"id,label\n1,cat\n"
    assert os.listdir(sdk_env) == []


def test_checkpoints_stay_where_they_were_written_and_download_on_demand(server, monkeypatch, tmp_path):
    monkeypatch.setenv("CORRAL_HOME", server.home)
    run = corral.init(project="art", checkpoint_dir=str(tmp_path / "ckpts"), **FAST)
    saved = run.save_checkpoint(b"weights-at-10" * 100, step=10)
    run.finish()
    client = server.client()
    (checkpoint,) = client.artifacts(run.id)
    assert (checkpoint["path"], checkpoint["stored"], checkpoint["type"]) == (saved, False, "checkpoint")
    assert os.listdir(os.path.join(server.home, "artifacts", "blobs")) == []  # not copied
    with open(saved, "rb") as f:
        assert fetch(client, run.id, saved) == f.read()


def decode_png(data: bytes):
    """The pixels of an 8-bit, filter-0 PNG as corral writes it (H×W×C uint8)."""
    import struct
    import zlib

    import numpy as np

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, color = struct.unpack(">IIBB", data[16:26])
    channels = {0: 1, 2: 3, 6: 4}[color]
    raw = zlib.decompress(data[data.index(b"IDAT") + 4:data.index(b"IEND") - 8])
    rows = np.frombuffer(raw, np.uint8).reshape(height, 1 + width * channels)
    assert depth == 8 and (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(height, width, channels)


def test_images_and_histograms_logged_by_step_become_media_artifacts(server, monkeypatch, tmp_path):
    import json

    import numpy as np

    monkeypatch.setenv("CORRAL_HOME", server.home)
    run = corral.init(project="media", **FAST)
    rgb = np.random.default_rng(0).integers(0, 256, size=(8, 5, 3), dtype=np.uint8)
    grey = np.linspace(0.0, 1.0, 12).reshape(3, 4)
    for step in (0, 10):
        run.log({"loss": 1.0 / (step + 1), "samples": corral.Image(rgb if step == 0 else grey, caption=f"at {step}"),
                 "weights": corral.Histogram(np.arange(100) * (step + 1), bins=10)}, step=step)
    png_file = tmp_path / "plot.png"
    png_file.write_bytes(fetch_png(rgb))
    run.log({"plot": corral.Image(str(png_file))}, step=3)
    run.finish()
    client = server.client()
    media = {a["path"]: a for a in client.artifacts(run.id)}
    assert set(media) == {"media/samples/00000000.png", "media/samples/00000010.png", "media/plot/00000003.png",
                          "media/weights/00000000.hist.json", "media/weights/00000010.hist.json"}
    first = media["media/samples/00000000.png"]
    assert (first["type"], first["step"], first["caption"]) == ("image", 0, "at 0")
    assert (decode_png(fetch(client, run.id, first["path"])) == rgb).all()
    assert decode_png(fetch(client, run.id, "media/samples/00000010.png"))[:, :, 0].tolist() == \
        (np.round(grey * 255)).astype(int).tolist()
    assert fetch(client, run.id, "media/plot/00000003.png") == png_file.read_bytes()
    hist = json.loads(fetch(client, run.id, "media/weights/00000010.hist.json"))
    assert sum(hist["counts"]) == 100 and hist["edges"][0] == 0 and hist["edges"][-1] == 99 * 11
    assert client.get_run(run.id)["metrics"]["loss"]["count"] == 2  # the numbers went on as metrics


def fetch_png(pixels) -> bytes:
    from corral.sdk.media import png

    return png(pixels)
