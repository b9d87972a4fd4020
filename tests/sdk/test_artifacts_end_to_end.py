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
