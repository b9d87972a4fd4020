"""A run against the in-memory server: log only enqueues, the thread batches and sends, failures
spool in order and drain, and nothing the server does reaches the training loop."""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import subprocess
import sys
import threading
import time

import pytest

import corral
from corral.errors import InvalidRequest
from corral.sdk.context import resume_key
from corral.sdk.spool import RunSpool
from tests.helpers import wait_for
from tests.sdk.conftest import spooled_files

pytestmark = pytest.mark.usefixtures("sdk_env")
FAST = {"flush_interval_s": 0.05, "retry_interval_s": 0.1}


def transport_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "cannot reach the corral server" in r.getMessage()]


def test_log_only_enqueues_while_the_server_is_stuck(fake):
    run = corral.init(project="p", client=fake, **FAST)
    fake.hang = threading.Event()  # every call blocks from now on
    started = time.perf_counter()
    for i in range(10_000):
        run.log({"loss": 0.5}, step=i)
    assert time.perf_counter() - started < 2.0
    fake.hang.set()
    run.finish()
    assert fake.steps(run.id, "loss") == list(range(10_000))


def test_a_value_changed_in_place_after_log_is_recorded_as_it_was_logged(fake):
    import numpy as np
    import torch

    run = corral.init(project="p", client=fake, flush_interval_s=3600, retry_interval_s=0.1)
    total, seen = np.zeros(()), torch.zeros((), requires_grad=False)
    for i in range(3):
        total += 1.0
        seen.add_(2.0)
        run.log({"total": total, "seen": seen, "half": np.float32(0.5)}, step=i)
    total[...] = 0.0  # an accumulator reset before the background thread ran
    seen.zero_()
    run.finish()
    assert fake.values(run.id, "total") == [1.0, 2.0, 3.0]
    assert fake.values(run.id, "seen") == [2.0, 4.0, 6.0]
    assert fake.values(run.id, "half") == [0.5, 0.5, 0.5]


def test_steps_count_on_from_the_last_one_given(fake):
    run = corral.init(project="p", client=fake, **FAST)
    run.log({"a": 1.0})
    run.log({"a": 2.0})
    run.log({"a": 3.0}, step=10)
    run.log({"a": 4.0})
    assert run.step == 12
    run.finish()
    assert [(s, v) for s, v, _ in fake.series(run.id, "a")] == [(0, 1.0), (1, 2.0), (10, 3.0), (11, 4.0)]


def test_a_reused_dict_is_logged_as_it_was_at_the_call(fake):
    run = corral.init(project="p", client=fake, **FAST)
    metrics = {}
    for i in range(5):
        metrics["loss"] = float(i)
        run.log(metrics, step=i)
    run.finish()
    assert [v for _, v, _ in fake.series(run.id, "loss")] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_points_go_in_batches_of_at_most_100k_with_fresh_ids(fake):
    run = corral.init(project="p", client=fake, flush_interval_s=5.0)
    for i in range(130_000):
        run.log({"loss": float(i), "acc": 0.5}, step=i)
    run.finish()
    batches = [body for name, body in fake.calls if name == "log_metrics"]
    assert len(batches) >= 3 and fake.max_batch_points <= 100_000
    assert len({b["batch_id"] for b in batches}) == len(batches)
    assert fake.steps(run.id, "loss") == list(range(130_000)) == fake.steps(run.id, "acc")


def test_an_unreachable_server_warns_once_spools_in_order_then_drains(fake, sdk_env, caplog):
    caplog.set_level(logging.WARNING, logger="corral.sdk")
    run = corral.init(project="p", client=fake, flush_interval_s=0.05, retry_interval_s=0.1)
    run.log({"loss": 0.0}, step=0)
    run.flush()
    fake.down = True
    for i in range(1, 4):
        run.log({"loss": float(i)}, step=i)
        run.flush()
    run.log_params({"lr": 0.1})
    run.flush()
    files = [f for f in spooled_files(sdk_env) if "/batches/" in f]
    assert len(files) == 4 and files == sorted(files)  # three metric batches and the params, in order
    assert len(transport_warnings(caplog)) == 1

    fake.down = False
    wait_for(lambda: not [f for f in spooled_files(sdk_env) if "/batches/" in f], timeout=10)
    for i in range(4, 6):  # live again: nothing more goes to the spool
        run.log({"loss": float(i)}, step=i)
    run.flush()
    assert not [f for f in spooled_files(sdk_env) if "/batches/" in f]
    run.finish()
    assert fake.steps(run.id, "loss") == [0, 1, 2, 3, 4, 5]
    assert fake.get_run(run.id)["config"] == {"lr": 0.1} and fake.get_run(run.id)["state"] == "finished"
    assert len(transport_warnings(caplog)) == 1
    assert not os.listdir(sdk_env)  # a drained, finished run leaves no spool behind


def test_a_server_down_at_init_gets_the_run_created_when_it_is_back(fake, sdk_env):
    fake.down = True
    run = corral.init(project="p", name="late", client=fake, **FAST)
    assert run.id is None
    for i in range(20):
        run.log({"loss": float(i)}, step=i)
    run.flush()
    assert "/run.json" in "".join("/" + f for f in spooled_files(sdk_env))
    fake.down = False
    wait_for(lambda: run.id is not None, timeout=10)
    run.finish()
    server_run = fake.get_run(run.id)
    assert (server_run["uid"], server_run["name"], server_run["state"]) == (run.uid, "late", "finished")
    assert fake.steps(run.id, "loss") == list(range(20))


def test_an_error_of_any_kind_from_the_transport_is_spooled_not_raised(fake, monkeypatch):
    run = corral.init(project="p", client=fake, **FAST)

    def broken(*args, **kwargs):
        raise RuntimeError("something unexpected")

    monkeypatch.setattr(fake, "log_metrics", broken)
    run.log({"loss": 1.0}, step=0)
    run.flush()
    assert run._sender.spooling
    monkeypatch.undo()
    run.finish()
    assert fake.steps(run.id, "loss") == [0]


def test_a_batch_the_server_refuses_is_dropped_not_retried_forever(fake, monkeypatch, caplog):
    run = corral.init(project="p", client=fake, **FAST)
    original = fake.log_metrics
    refused = []

    def refuse_once(ref, batch):
        if not refused:
            refused.append(batch)
            raise InvalidRequest("metrics", "refused")
        return original(ref, batch)

    monkeypatch.setattr(fake, "log_metrics", refuse_once)
    run.log({"loss": 1.0}, step=0)
    run.flush()
    run.log({"loss": 2.0}, step=1)
    run.finish()
    assert fake.steps(run.id, "loss") == [1] and not run._sender.spooling
    assert any("refused" in r.getMessage() for r in caplog.records)


def test_finish_waits_a_bounded_time_for_a_hung_server(fake, capsys):
    run = corral.init(project="p", client=fake, **FAST)
    fake.hang = threading.Event()
    run.log({"loss": 1.0}, step=0)
    started = time.monotonic()
    run.finish(timeout=0.5)
    assert time.monotonic() - started < 2.0
    assert "still uploading" in capsys.readouterr().err
    fake.hang.set()


def test_params_tags_and_artifacts_reach_the_run(fake, tmp_path):
    run = corral.init(project="p", config=argparse.Namespace(lr=0.1, layers=[4, 4], nan=float("nan")),
                      tags=["base"], client=fake, **FAST)
    run.log_params({"batch_size": 32})
    run.add_tags("sweep", "a100")
    artifact = tmp_path / "preds.csv"
    artifact.write_bytes(b"a,b\n1,2\n")
    run.log_artifact(artifact, type="predictions", step=3)
    run.finish()
    server_run = fake.get_run(run.id)
    assert server_run["config"] == {"lr": 0.1, "layers": [4, 4], "nan": "nan", "batch_size": 32}
    assert server_run["tags"] == ["base", "sweep", "a100"]
    (posted,) = fake.artifacts(run.id).values()
    assert posted == {"path": "preds.csv", "type": "predictions", "size": 8, "stored": True, "data": b"a,b\n1,2\n",
                      "sha256": hashlib.sha256(b"a,b\n1,2\n").hexdigest()}


def test_an_exception_in_the_with_block_marks_the_run_failed(fake):
    with pytest.raises(ZeroDivisionError):
        with corral.init(project="p", client=fake, **FAST) as run:
            run.log({"loss": 1.0})
            1 / 0
    assert fake.get_run(run.id)["state"] == "failed" and fake.steps(run.id, "loss") == [0]


def test_a_corral_job_links_its_run_and_a_requeue_continues_it(fake, monkeypatch):
    monkeypatch.setenv("CORRAL_JOB_ID", "12")
    first = corral.init(project="mnist", name="lr-0.1", client=fake, **FAST)
    request = next(body for name, body in fake.calls if name == "create_run")
    assert (request["job_id"], request["resume_key"]) == (12, resume_key("12", "mnist", "lr-0.1", 0))
    for i in range(50):
        first.log({"loss": float(i)}, step=i)
    first.flush()

    monkeypatch.setattr("corral.sdk.start._init_count", 0)  # the requeued job is a new process
    second = corral.init(project="mnist", name="lr-0.1", client=fake, **FAST)
    assert (second.id, second.uid, second.resumed, second.step) == (first.id, first.uid, True, 50)
    assert second.summary["loss"]["last_step"] == 49
    for i in range(40, 60):  # resumed from an older checkpoint: steps 40-49 come again
        second.log({"loss": float(i)})  # no step given: continues after the last one...
    for i in range(40, 60):
        second.log({"loss": float(i)}, step=i)  # ...or given: the server skips what it has
    second.finish()
    assert fake.steps(first.id, "loss") == list(range(70))


def test_a_rank_other_than_zero_tracks_nothing(fake, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    run = corral.init(project="p", client=fake, **FAST)
    assert run.disabled and run.id is None
    run.log({"loss": 1.0})
    run.log_params({"a": 1})
    path = run.save_checkpoint({"w": 1}, step=5)
    run.finish()
    assert fake.calls == [] and not os.path.exists(path) and not os.path.exists("checkpoints")


def test_every_rank_can_keep_its_own_run(fake, monkeypatch):
    monkeypatch.setenv("CORRAL_JOB_ID", "7")
    monkeypatch.setenv("RANK", "2")
    run = corral.init(project="p", client=fake, rank_zero_only=False, **FAST)
    run.finish()
    server_run = fake.get_run(run.id)
    assert server_run["tags"] == ["rank:2"] and server_run["resume_key"] == resume_key("7", "p", None, 0, rank=2)


def test_disabled_mode_sends_and_writes_nothing(fake, monkeypatch, sdk_env):
    monkeypatch.setenv("CORRAL_MODE", "disabled")
    run = corral.init(project="p", client=fake)
    run.log({"loss": 1.0})
    run.finish()
    assert fake.calls == [] and not os.path.exists(sdk_env)


def test_offline_mode_spools_and_never_calls_the_server(fake, sdk_env, capsys):
    run = corral.init(project="p", mode="offline", client=fake, **FAST)
    for i in range(10):
        run.log({"loss": float(i)})
    run.add_tags("x")
    run.finish()
    assert fake.calls == []
    names = spooled_files(sdk_env)
    uid = run.uid
    assert names == [f"{uid}/batches/00000001.json", f"{uid}/batches/00000002.json", f"{uid}/finish.json",
                     f"{uid}/lock", f"{uid}/run.json"]
    assert "corral sync" in capsys.readouterr().err


def test_offline_a_requeued_job_continues_its_spooled_run(sdk_env, monkeypatch):
    monkeypatch.setenv("CORRAL_JOB_ID", "3")
    first = corral.init(project="p", mode="offline", **FAST)
    for i in range(10):
        first.log({"loss": float(i)})
    first.finish()
    monkeypatch.setattr("corral.sdk.start._init_count", 0)
    second = corral.init(project="p", mode="offline", **FAST)
    assert (second.uid, second.resumed, second.step) == (first.uid, True, 10)
    second.log({"loss": 10.0})
    assert not os.path.exists(os.path.join(sdk_env, first.uid, "finish.json"))  # the run goes on
    second.finish()
    assert len(os.listdir(sdk_env)) == 1


def test_corral_log_and_finish_act_on_the_current_run(fake):
    run = corral.init(project="p", client=fake, **FAST)
    corral.log({"loss": 1.0})
    corral.log({"loss": 2.0})
    corral.finish()
    assert fake.steps(run.id, "loss") == [0, 1] and fake.get_run(run.id)["state"] == "finished"
    with pytest.raises(RuntimeError, match="corral.init"):
        corral.log({"loss": 3.0})


def test_log_costs_microseconds(sdk_env):
    run = corral.init(project="p", mode="offline", **FAST)
    log = run.log
    # the CPU time this process spent (the loop and the run's background thread), not the wall clock: on a
    # loaded machine the wall clock counts the other programs' turns on the CPU too
    started = time.process_time()
    for i in range(200_000):
        log({"loss": 0.1, "acc": 0.2}, step=i)
    per_call_us = (time.process_time() - started) / 200_000 * 1e6
    run.finish()
    assert per_call_us < 25  # the benchmark (bench/sdk_log.py) holds the real figure


SCRIPT = """
import corral, sys
run = corral.init(project="p", mode="offline", flush_interval_s=60)
for i in range(1000):
    run.log({"loss": float(i)})
if sys.argv[1] == "raise":
    raise SystemError("boom")
"""


@pytest.mark.parametrize(("how", "state"), [("exit", "finished"), ("raise", "failed")])
def test_exit_without_finish_flushes_and_records_how_the_script_ended(sdk_env, how, state):
    done = subprocess.run([sys.executable, "-c", SCRIPT, how], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert (done.returncode != 0) == (how == "raise")
    (uid,) = os.listdir(sdk_env)
    spool = RunSpool.open(os.path.join(sdk_env, uid))
    assert spool is not None
    assert spool.finish_record()["state"] == state
    assert spool.last_step() == 999
    spool.release()


def test_every_rank_agrees_when_a_checkpoint_is_due(fake, monkeypatch, tmp_path):
    now = [1000.0]
    ranks = []
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        ranks.append(corral.init(project="p", client=fake, checkpoint_dir=str(tmp_path), clock=lambda: now[0], **FAST))
    now[0] += ranks[0].checkpoint_interval_s
    assert [r.checkpoint_due() for r in ranks] == [True, True]
    for run in ranks:
        run.save_checkpoint({"w": 1}, step=10)
    assert [r.checkpoint_due() for r in ranks] == [False, False]  # rank 1 wrote nothing, but saved "with" rank 0
    for run in ranks:
        run.finish()


def test_a_forked_child_does_not_pile_up_what_it_logs(fake):
    run = corral.init(project="p", client=fake, **FAST)
    run.log({"loss": 1.0}, step=0)
    pid = os.fork()
    if pid == 0:  # the child: logging is ignored (with a warning), never queued
        try:
            queued = len(run._queue)
            run.log({"loss": 2.0}, step=1)
            os._exit(0 if len(run._queue) == queued else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    run.log({"loss": 3.0}, step=2)
    run.finish()
    assert fake.steps(run.id, "loss") == [0, 2]


def test_outside_a_job_each_run_keeps_its_checkpoints_apart(fake):
    first = corral.init(project="p", client=fake, **FAST)
    first.save_checkpoint({"w": 1}, step=100)
    first.finish()
    second = corral.init(project="p", client=fake, **FAST)
    # the second run starts from scratch: the first one's checkpoint is not its latest
    assert second.latest_checkpoint() is None
    assert second.checkpoint_dir != first.checkpoint_dir
    assert os.path.dirname(second.checkpoint_dir) == os.path.dirname(first.checkpoint_dir) == os.path.abspath("checkpoints")
    second.finish()


def test_outside_a_job_a_run_restarted_with_its_resume_key_finds_its_checkpoint(fake, monkeypatch):
    first = corral.init(project="p", client=fake, resume_key="my-experiment", **FAST)
    saved = first.save_checkpoint({"w": 1}, step=100)
    first.finish()
    monkeypatch.setattr(corral.sdk.start, "_init_count", 0)
    again = corral.init(project="p", client=fake, resume_key="my-experiment", **FAST)
    assert again.latest_checkpoint() == saved
    again.finish()


def test_a_plain_slurm_job_requeued_finds_its_checkpoints(fake, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # Slurm without corral: no $CORRAL_CHECKPOINT_DIR
    first = corral.init(project="p", client=fake, **FAST)
    saved = first.save_checkpoint({"w": 1}, step=7)
    first.finish()
    monkeypatch.setattr(corral.sdk.start, "_init_count", 0)  # the requeued job's new process
    assert corral.init(project="p", client=fake, **FAST).latest_checkpoint() == saved


def test_torchrun_ranks_outside_a_job_share_rank_zeros_checkpoints(fake, monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "launch-1")
    rank0 = corral.init(project="p", client=fake, **FAST)
    saved = rank0.save_checkpoint({"w": 1}, step=3)
    rank0.finish()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setattr(corral.sdk.start, "_init_count", 0)
    assert corral.init(project="p", client=fake, **FAST).latest_checkpoint() == saved
