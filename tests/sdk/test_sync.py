"""`sync_spool` uploads spooled runs exactly once: twice, after a crash mid-sync, or beside a live run."""

from __future__ import annotations

import os
import shutil

import pytest

import corral
from corral.sdk.sync import LOCKED, SyncReport, sync_spool

pytestmark = pytest.mark.usefixtures("sdk_env")
FAST = {"flush_interval_s": 0.05, "retry_interval_s": 0.1}


def offline_run(steps: range, *, finish: bool = True, **kwargs) -> corral.Run:
    run = corral.init(project="p", mode="offline", **FAST, **kwargs)
    for i in steps:
        run.log({"loss": float(i), "acc": 0.5}, step=i)
        if i % 100 == 99:
            run.flush()  # several batch files
    run.add_tags("offline")
    if finish:
        run.finish()
    return run


def test_sync_uploads_a_spooled_run_once_and_removes_it(fake, sdk_env):
    run = offline_run(range(300))
    (report,) = sync_spool(client=fake)
    assert report == SyncReport(uid=run.uid, run_id=1, batches=3, points=600, stored=600, state="finished", error=None)
    assert fake.steps(1, "loss") == list(range(300)) == fake.steps(1, "acc")
    assert fake.get_run(1)["tags"] == ["offline"] and fake.get_run(1)["uid"] == run.uid
    assert os.listdir(sdk_env) == []
    calls = len(fake.calls)
    assert sync_spool(client=fake) == []
    assert len(fake.calls) == calls


def test_a_crash_mid_sync_then_a_second_sync_duplicates_nothing(fake, sdk_env, tmp_path):
    run = offline_run(range(300))
    saved = tmp_path / "before-sync"
    shutil.copytree(os.path.join(sdk_env, run.uid), saved)
    sync_spool(client=fake)
    # the crash: every file still there, as if none of the acknowledgements had been recorded
    shutil.copytree(saved, os.path.join(sdk_env, run.uid))
    (again,) = sync_spool(client=fake)
    assert again.error is None and (again.batches, again.points, again.stored) == (3, 600, 0)  # nothing new
    assert fake.steps(1, "loss") == list(range(300))
    assert [name for name, body in fake.calls if name == "create_run"] == ["create_run", "create_run"]
    assert len(fake.runs) == 1


def test_sync_leaves_a_run_that_a_live_process_holds(fake, sdk_env):
    live = offline_run(range(10), finish=False)
    live.flush()
    (report,) = sync_spool(client=fake)
    assert (report.uid, report.error, report.run_id) == (live.uid, LOCKED, None)
    assert fake.calls == []
    live.finish()
    (report,) = sync_spool(client=fake)
    assert report.error is None and fake.steps(1, "loss") == list(range(10))


def test_what_a_failed_sync_could_not_send_stays_for_the_next(fake, sdk_env):
    run = offline_run(range(200))
    fake.down = True
    (failed,) = sync_spool(client=fake)
    assert failed.error and "cannot reach" in failed.error and os.path.isdir(os.path.join(sdk_env, run.uid))
    fake.down = False
    (report,) = sync_spool(client=fake)
    assert report.error is None and fake.steps(1, "loss") == list(range(200))


def test_two_spools_of_a_requeued_job_become_one_run_in_order(fake, sdk_env, monkeypatch):
    monkeypatch.setenv("CORRAL_JOB_ID", "4")
    first = offline_run(range(100))
    # the requeued process did not find the first spool (say, on another node's disk): a new uid
    away = sdk_env + "-elsewhere"
    os.rename(os.path.join(sdk_env, first.uid), away)
    monkeypatch.setattr("corral.sdk.start._init_count", 0)
    second = offline_run(range(50, 150))
    os.rename(away, os.path.join(sdk_env, first.uid))
    assert second.uid != first.uid and not second.resumed
    reports = sync_spool(client=fake)
    assert [r.uid for r in reports] == [first.uid, second.uid] and {r.run_id for r in reports} == {1}
    assert fake.steps(1, "loss") == list(range(150))
