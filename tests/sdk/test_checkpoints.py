"""Checkpoints: atomic files, a manifest every rank reads, retention, and when the next one is due."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import corral
from corral.sdk.checkpoints import MANIFEST, CheckpointStore, RetentionPolicy

pytestmark = pytest.mark.usefixtures("sdk_env")
FAST = {"flush_interval_s": 0.05, "retry_interval_s": 0.1}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def manifest(directory) -> list[dict]:
    with open(os.path.join(directory, MANIFEST)) as f:
        return json.load(f)["checkpoints"]


def test_a_checkpoint_is_written_whole_hashed_and_entered_in_the_manifest(fake, tmp_path):
    torch = pytest.importorskip("torch")
    run = corral.init(project="p", client=fake, checkpoint_dir=str(tmp_path / "ck"), **FAST)
    path = run.save_checkpoint({"w": torch.arange(4)}, step=100, metric=0.5)
    assert path == str(tmp_path / "ck" / "ckpt-00000100.pt")
    assert torch.equal(torch.load(path)["w"], torch.arange(4))
    (entry,) = manifest(tmp_path / "ck")
    assert (entry["file"], entry["step"], entry["metric"]) == ("ckpt-00000100.pt", 100, 0.5)
    assert entry["sha256"] == sha256(path) and entry["size"] == os.path.getsize(path)
    assert sorted(os.listdir(tmp_path / "ck")) == [MANIFEST, "ckpt-00000100.pt"]  # no tmp file left
    run.finish()
    (artifact,) = fake.artifacts(run.id).values()
    assert artifact == {"path": path, "type": "checkpoint", "size": entry["size"], "sha256": entry["sha256"],
                        "step": 100, "metric": "metric", "metric_value": 0.5, "goal": "min", "deleted": False}


class Unpicklable:
    def __reduce__(self):
        raise OSError("disk full, say")


def test_a_failed_save_raises_and_leaves_the_previous_checkpoint_the_latest(fake, tmp_path):
    directory = tmp_path / "ck"
    run = corral.init(project="p", client=fake, checkpoint_dir=str(directory), **FAST)
    good = run.save_checkpoint({"w": 1}, step=1)
    with pytest.raises(OSError, match="disk full"):
        run.save_checkpoint({"w": Unpicklable()}, step=2)
    assert run.latest_checkpoint() == good
    assert sorted(os.listdir(directory)) == [MANIFEST, "ckpt-00000001.pt"]  # the torn tmp file is gone
    assert [e["step"] for e in manifest(directory)] == [1]
    run.finish()


def test_an_existing_file_is_copied_or_moved_into_place(fake, tmp_path):
    run = corral.init(project="p", client=fake, checkpoint_dir=str(tmp_path / "ck"), **FAST)
    source = tmp_path / "trainer-output.bin"
    source.write_bytes(b"weights" * 1000)
    copied = run.save_checkpoint(str(source), step=10)
    assert source.exists() and sha256(copied) == sha256(str(source))
    moved = run.save_checkpoint(source, step=20, move=True)
    assert not source.exists() and open(moved, "rb").read() == b"weights" * 1000
    with pytest.raises(FileNotFoundError):
        run.save_checkpoint(str(tmp_path / "missing.bin"), step=30)
    run.finish()


def test_a_saved_file_keeps_its_own_name_and_extension_and_a_new_process_resumes_from_it(fake, tmp_path, monkeypatch):
    directory = tmp_path / "ck"
    monkeypatch.setenv("CORRAL_CHECKPOINT_DIR", str(directory))
    run = corral.init(project="p", client=fake, keep_last=2, **FAST)
    written = tmp_path / "out"
    written.mkdir()
    (written / "state-19.json").write_text('{"step": 19}')
    path = run.save_checkpoint(str(written / "state-19.json"), step=19)
    assert path == str(directory / "state-19.json") and open(path).read() == '{"step": 19}'
    # a name every epoch reuses keeps its extension, the step telling the copies apart
    for step in (20, 21):
        (written / "model.safetensors").write_bytes(b"w%d" % step)
        run.save_checkpoint(str(written / "model.safetensors"), step=step)
    assert [e["file"] for e in manifest(directory)] == ["model-00000020.safetensors", "model-00000021.safetensors"]
    assert sorted(os.listdir(directory)) == [MANIFEST, "model-00000020.safetensors", "model-00000021.safetensors"]
    assert run.latest_checkpoint() == str(directory / "model-00000021.safetensors")
    run.finish()
    registered = {a["path"] for a in fake.artifacts(run.id).values() if not a["deleted"]}
    assert str(directory / "model-00000021.safetensors") in registered and path not in registered  # retention
    again = corral.init(project="p", mode="offline", **FAST)  # the job requeued: a new process
    assert open(again.latest_checkpoint(), "rb").read() == b"w21"
    again.finish()


def test_checkpoints_stored_the_old_way_are_still_found_and_retained_beside_own_named_ones(fake, tmp_path):
    old = CheckpointStore(str(tmp_path))
    old.save({"w": 1}, 5)
    assert manifest(tmp_path)[0]["file"] == "ckpt-00000005.pt"
    run = corral.init(project="p", client=fake, checkpoint_dir=str(tmp_path), keep_last=1, **FAST)
    source = tmp_path.parent / "epoch-6.ckpt"
    source.write_bytes(b"six")
    run.save_checkpoint(str(source), step=6)
    assert run.latest_checkpoint() == str(tmp_path / "epoch-6.ckpt")
    assert sorted(os.listdir(tmp_path)) == [MANIFEST, "epoch-6.ckpt"]  # the old one went by retention
    run.save_checkpoint({"w": 6}, step=6)  # the same step saved again, as an object: the file's copy goes
    assert sorted(os.listdir(tmp_path)) == [MANIFEST, "ckpt-00000006.pt"]
    run.finish()


def test_retention_keeps_the_last_and_the_best_and_reports_the_rest_deleted(fake, tmp_path):
    run = corral.init(project="p", client=fake, checkpoint_dir=str(tmp_path), keep_last=2, keep_best=1,
                      best_metric="val_loss", best_mode="min", **FAST)
    losses = {100: 0.9, 200: 0.3, 300: 0.5, 400: 0.6, 500: 0.7}
    for step, loss in losses.items():
        run.save_checkpoint({"step": step}, step=step, metric=loss)
    assert [e["step"] for e in manifest(tmp_path)] == [200, 400, 500]
    assert sorted(n for n in os.listdir(tmp_path) if n.endswith(".pt")) == \
        ["ckpt-00000200.pt", "ckpt-00000400.pt", "ckpt-00000500.pt"]
    assert run.latest_checkpoint().endswith("ckpt-00000500.pt")
    assert run.best_checkpoint().endswith("ckpt-00000200.pt")
    run.finish()
    posted = fake.artifacts(run.id)
    deleted = sorted(a["step"] for a in posted.values() if a["deleted"])
    assert deleted == [100, 300]
    assert {a["metric"] for a in posted.values()} == {"val_loss"}


def test_after_a_restart_latest_and_best_come_from_the_manifest(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_CHECKPOINT_DIR", str(tmp_path / "job-ck"))
    run = corral.init(project="p", client=fake, best_mode="max", **FAST)
    for step, acc in ((1, 0.5), (2, 0.9), (3, 0.7)):
        run.save_checkpoint({"acc": acc}, step=step, metric=acc)
    run.finish()
    offline = corral.init(project="p", mode="offline", best_mode="max", **FAST)  # a new process, say
    assert offline.latest_checkpoint() == str(tmp_path / "job-ck" / "ckpt-00000003.pt")
    assert offline.best_checkpoint() == str(tmp_path / "job-ck" / "ckpt-00000002.pt")
    monkeypatch.setenv("RANK", "3")
    other_rank = corral.init(project="p", best_mode="max")
    assert other_rank.disabled and other_rank.latest_checkpoint() == offline.latest_checkpoint()
    offline.finish()


def test_a_metric_that_is_not_finite_is_recorded_as_none_and_never_best(fake, tmp_path):
    run = corral.init(project="p", client=fake, checkpoint_dir=str(tmp_path), keep_best=1, keep_last=1, **FAST)
    run.save_checkpoint({"w": 1}, step=1, metric=0.5)
    run.save_checkpoint({"w": 2}, step=2, metric=float("nan"))
    run.save_checkpoint({"w": 3}, step=3, metric=float("-inf"))
    assert [(e["step"], e["metric"]) for e in manifest(tmp_path)] == [(1, 0.5), (3, None)]
    assert run.best_checkpoint().endswith("ckpt-00000001.pt")
    run.finish()
    metrics = {a["step"]: (a["metric"], a["metric_value"]) for a in fake.artifacts(run.id).values()}
    assert metrics == {1: ("metric", 0.5), 2: (None, None), 3: (None, None)}


def test_without_a_manifest_the_checkpoint_files_are_found(tmp_path):
    for step in (5, 50):
        (tmp_path / f"ckpt-{step:08d}.pt").write_bytes(b"x")
    store = CheckpointStore(str(tmp_path))
    assert store.latest() == str(tmp_path / "ckpt-00000050.pt") and store.best() is None
    assert CheckpointStore(str(tmp_path / "none")).latest() is None


def test_checkpoint_due_after_the_interval_and_once_before_the_job_ends(fake, monkeypatch):
    now = [1_000_000.0]
    monkeypatch.setenv("CORRAL_TIME_LIMIT_S", "3000")  # under an hour: every 10 minutes
    monkeypatch.setenv("CORRAL_JOB_END_TIME", str(1_000_000 + 3000))
    run = corral.init(project="p", client=fake, clock=lambda: now[0], **FAST)
    assert run.checkpoint_interval_s == 600
    assert not run.checkpoint_due()
    now[0] += 599
    assert not run.checkpoint_due()
    now[0] += 1
    assert run.checkpoint_due()
    run.save_checkpoint({"w": 1}, step=1)
    assert not run.checkpoint_due()
    now[0] = 1_000_000 + 3000 - 140  # 2 min 20 s left: a last one, though the interval is not up
    assert run.checkpoint_due()
    run.save_checkpoint({"w": 1}, step=2)
    assert not run.checkpoint_due()
    run.finish()


def test_without_a_time_limit_checkpoints_every_two_hours(fake):
    run = corral.init(project="p", client=fake, **FAST)
    assert run.checkpoint_interval_s == 7200 and not run.checkpoint_due()
    run.finish()


entries = st.lists(st.tuples(st.integers(0, 1000), st.one_of(st.none(), st.floats(-10, 10))), max_size=30,
                   unique_by=lambda e: e[0])


@settings(max_examples=200, deadline=None)
@given(entries=entries, keep_last=st.one_of(st.none(), st.integers(0, 5)),
       keep_best=st.one_of(st.none(), st.integers(0, 5)), mode=st.sampled_from(["min", "max"]))
def test_retention_keeps_exactly_the_newest_and_the_best(entries, keep_last, keep_best, mode):
    manifest_entries = [{"file": f"ckpt-{s:08d}.pt", "step": s, "metric": m} for s, m in entries]
    kept = {e["step"] for e in RetentionPolicy(keep_last, keep_best, mode).retained(manifest_entries)}
    steps = sorted(s for s, _ in entries)
    if keep_last is None and keep_best is None:
        assert kept == set(steps)
        return
    expected = set(steps[-max(keep_last or 0, 1):]) if steps else set()
    scored = sorted(((m if mode == "min" else -m), -s) for s, m in entries if m is not None)
    expected |= {-neg_step for _, neg_step in scored[:keep_best or 0]}
    assert kept == expected
