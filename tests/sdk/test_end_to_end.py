"""The SDK against a real `corral up` server: round trip, offline + sync, kill -9 of the server while a
process logs, a requeued job continuing its run, DDP ranks, checkpoints across a restart."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import corral
from corral.errors import InvalidRequest
from corral.sdk.sync import sync_spool
from tests.helpers import wait_for
from tests.sdk.conftest import spooled_files

pytestmark = pytest.mark.usefixtures("sdk_env")
FAST = {"flush_interval_s": 0.05, "retry_interval_s": 0.2}


@pytest.fixture
def at_server(monkeypatch):
    """Point the SDK at a server's home, as a job of that server would be."""

    def point(server) -> None:
        monkeypatch.setenv("CORRAL_HOME", server.home)

    return point


def child_env(server, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORRAL_", "SLURM_")) and k not in ("RANK", "LOCAL_RANK")}
    env.update(PYTHONPATH=os.pathsep.join(p for p in sys.path if p), CORRAL_HOME=server.home, **extra)
    return env


def held_job(server) -> int:
    """A job of the server's caller that lasts the test: a run names only a job that exists and is its caller's."""
    with server.client() as client:
        job = client.submit(["sleep", "300"], time="5m")
    return job["id"]


def read_all(client, run_id: int, key: str) -> tuple[list[int], list]:
    series = client.series(run_id, key, max_points=100_000)
    assert not series["downsampled"]
    return series["steps"], series["values"]


def test_logged_points_read_back_exactly(server, at_server):
    at_server(server)
    run = corral.init(project="e2e", name="round-trip", config={"lr": 0.1}, tags=["base"], **FAST)
    specials = {3: float("nan"), 4: float("inf"), 5: float("-inf")}
    for i in range(20_000):
        run.log({"loss": specials.get(i, 1.0 / (i + 1)), "acc": i / 20_000}, step=i)
    run.log_params({"batch_size": 64})
    run.add_tags("e2e")
    run.finish()

    client = server.client()
    got = client.get_run(run.id)
    assert (got["uid"], got["state"], got["config"], got["tags"]) == (run.uid, "finished", {"lr": 0.1, "batch_size": 64},
                                                                      ["base", "e2e"])
    assert got["metrics"]["loss"]["count"] == 20_000 and got["last_step"] == 19_999
    steps, values = read_all(client, run.id, "loss")
    assert steps == list(range(20_000))
    assert values[3:6] == ["NaN", "Infinity", "-Infinity"]
    assert values[:3] + values[6:] == [1.0 / (i + 1) for i in range(20_000) if i not in specials]
    assert read_all(client, run.id, "acc")[1] == [i / 20_000 for i in range(20_000)]


def test_offline_run_synced_twice_and_after_a_crash_mid_sync_is_stored_once(server_factory, sdk_env, tmp_path):
    server = server_factory()
    run = corral.init(project="e2e", mode="offline", **FAST)
    for i in range(5_000):
        run.log({"loss": float(i)}, step=i)
        if i % 1000 == 999:
            run.flush()
    run.finish()
    kept = tmp_path / "copy"
    shutil.copytree(os.path.join(sdk_env, run.uid), kept)

    client = server.client()
    (first,) = sync_spool(client=client)
    assert (first.batches, first.points, first.state, first.error) == (5, 5_000, "finished", None)
    assert sync_spool(client=client) == []
    shutil.copytree(kept, os.path.join(sdk_env, run.uid))  # as if the first sync died before deleting anything
    (again,) = sync_spool(client=client)
    assert again.run_id == first.run_id and again.error is None
    assert read_all(client, first.run_id, "loss")[0] == list(range(5_000))
    assert len(client.runs(project="e2e")) == 1


STEADY_LOGGER = """
import corral, os, sys, time
run = corral.init(project="outage", flush_interval_s=0.1, retry_interval_s=0.3)
print(run.id, flush=True)
i = 0
while not os.path.exists(sys.argv[1]):
    run.log({"loss": 1.0 / (i + 1), "sq": float(i * i)}, step=i)
    i += 1
    time.sleep(0.002)
run.finish(timeout=60)
print(i, flush=True)
"""


def test_server_killed_mid_run_loses_and_duplicates_no_point(server_factory, short_tmp):
    server = server_factory()
    stop = os.path.join(short_tmp, "stop")
    spool = os.path.join(short_tmp, "spool")
    child = subprocess.Popen([sys.executable, "-c", STEADY_LOGGER, stop], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=short_tmp, env=child_env(server, CORRAL_SPOOL_DIR=spool))
    try:
        run_id = int(child.stdout.readline())
        client = server.client()
        wait_for(lambda: (client.get_run(run_id)["last_step"] or 0) >= 200, timeout=30)
        server.kill9()
        # the child logs on into its spool: the outage is seen (and warned of) once a batch is there
        wait_for(lambda: any("/batches/" in f for f in spooled_files(spool)), timeout=30)
        server.start()
        client = server.client()
        before = client.get_run(run_id)["last_step"]
        wait_for(lambda: client.get_run(run_id)["last_step"] > before + 100, timeout=30)  # drained, live again
        open(stop, "w").close()
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    total = int(out.split()[-1])
    assert child.returncode == 0, err
    assert err.count("cannot reach the corral server") == 1  # warned once, for the whole outage
    steps, values = read_all(client, run_id, "loss")
    assert steps == list(range(total)) and values == [1.0 / (i + 1) for i in range(total)]
    assert read_all(client, run_id, "sq")[0] == list(range(total))
    assert client.get_run(run_id)["state"] == "finished"
    assert os.listdir(spool) == []  # everything spooled went up


REQUEUED_JOB = """
import corral, json, os, sys
stop_at, preempted = int(sys.argv[1]), sys.argv[2] == "preempted"
run = corral.init(project="requeue", name="r", keep_last=2, flush_interval_s=0.05)
latest = run.latest_checkpoint()
start = json.load(open(latest))["step"] + 1 if latest else 0
print(json.dumps({"id": run.id, "uid": run.uid, "resumed": run.resumed, "step": run.step, "start": start}), flush=True)
for i in range(start, stop_at):
    run.log({"loss": float(i)}, step=i)
    if i % 25 == 24:
        with open("state.json", "w") as f:
            json.dump({"step": i}, f)
        run.save_checkpoint("state.json", step=i, move=True)
if preempted:
    run.flush()
    os._exit(1)  # killed: no finish, no atexit
run.finish()
"""


def test_a_requeued_job_continues_its_run_without_duplicated_steps(server_factory, short_tmp):
    server = server_factory()
    job_id = held_job(server)
    env = child_env(server, CORRAL_JOB_ID=str(job_id), CORRAL_CHECKPOINT_DIR=os.path.join(short_tmp, "ck"),
                    CORRAL_SPOOL_DIR=os.path.join(short_tmp, "spool"))

    def attempt(stop_at: int, how: str) -> dict:
        done = subprocess.run([sys.executable, "-c", REQUEUED_JOB, str(stop_at), how], capture_output=True, text=True,
                              cwd=short_tmp, env=env, timeout=60)
        assert done.returncode == (1 if how == "preempted" else 0), done.stderr
        return json.loads(done.stdout.splitlines()[0])

    first = attempt(110, "preempted")  # checkpoints at 74 and 99 kept; steps up to 109 logged
    second = attempt(150, "completes")
    assert (first["resumed"], first["start"]) == (False, 0)
    assert (second["id"], second["uid"], second["resumed"]) == (first["id"], first["uid"], True)
    assert (second["step"], second["start"]) == (110, 100)  # 100-109 are logged again, and skipped

    client = server.client()
    assert read_all(client, first["id"], "loss")[0] == list(range(150))
    run = client.get_run(first["id"])
    assert (run["state"], run["job_id"], run["resume_key"]) == ("finished", job_id, f"job:{job_id}:-c:requeue:r:0")
    live = sorted(a["step"] for a in client.artifacts(first["id"], type="checkpoint"))
    everything = {a["step"]: a["deleted"] for a in client.artifacts(first["id"], type="checkpoint", deleted=True)}
    assert live == [124, 149]
    assert everything == {24: True, 49: True, 74: True, 99: True, 124: False, 149: False}


def test_under_ddp_only_rank_zero_tracks_and_every_rank_finds_its_checkpoints(server_factory, at_server, monkeypatch,
                                                                              tmp_path):
    server = server_factory()
    at_server(server)
    monkeypatch.setenv("CORRAL_CHECKPOINT_DIR", str(tmp_path / "ck"))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    other = corral.init(project="ddp", **FAST)
    other.log({"loss": 1.0})
    assert not os.path.exists(other.save_checkpoint(str(tmp_path / "nothing-here"), step=1))
    other.finish()
    monkeypatch.setenv("RANK", "0")
    zero = corral.init(project="ddp", **FAST)
    zero.log({"loss": 1.0})
    (tmp_path / "w").write_bytes(b"w")
    saved = zero.save_checkpoint(str(tmp_path / "w"), step=1)
    zero.finish()
    assert [r["id"] for r in server.client().runs(project="ddp")] == [zero.id]
    monkeypatch.setenv("RANK", "1")
    assert corral.init(project="ddp").latest_checkpoint() == saved


def test_checkpoint_retention_and_best_survive_a_restart(server_factory, at_server, monkeypatch, tmp_path):
    server = server_factory()
    at_server(server)
    monkeypatch.setenv("CORRAL_JOB_ID", str(held_job(server)))
    monkeypatch.setenv("CORRAL_CHECKPOINT_DIR", str(tmp_path / "ck"))
    options = dict(project="ck", keep_last=1, keep_best=1, best_metric="val_loss", **FAST)
    run = corral.init(**options)
    for step, loss in ((10, 0.8), (20, 0.2), (30, 0.5), (40, 0.6)):
        (tmp_path / "model").write_bytes(str(step).encode())
        run.save_checkpoint(str(tmp_path / "model"), step=step, metric=loss)
    run.finish("crashed")

    monkeypatch.setattr("corral.sdk.start._init_count", 0)  # the restarted process
    again = corral.init(**options)
    assert again.id == run.id and again.resumed
    assert open(again.latest_checkpoint(), "rb").read() == b"40"
    assert open(again.best_checkpoint(), "rb").read() == b"20"
    again.finish()
    client = server.client()
    artifacts = client.artifacts(run.id, type="checkpoint", deleted=True)
    assert {a["step"]: a["deleted"] for a in artifacts} == {10: True, 20: False, 30: True, 40: False}
    best = next(a for a in artifacts if a["step"] == 20)
    assert (best["metric"], best["metric_value"]) == ("val_loss", 0.2)
    assert best["size"] == 2 and len(best["sha256"]) == 64


def test_a_run_the_server_refuses_fails_at_init_not_later(server_factory, at_server, sdk_env):
    server = server_factory()
    at_server(server)
    with pytest.raises(InvalidRequest, match="tags"):
        corral.init(project="e2e", tags=["two\nlines"], **FAST)
    assert server.client().runs(project="e2e") == [] and not os.path.exists(sdk_env)


CANCELLED_JOB = """
import corral, sys, time
run = corral.init(project="cancel", name="c", flush_interval_s=3600)  # nothing is sent before the signal
for i in range(500):
    run.log({"loss": 1.0 / (i + 1)}, step=i)
print(run.id, flush=True)
time.sleep(600)
"""


def test_a_cancelled_job_sends_what_it_logged_before_it_dies_and_its_run_ends_crashed(server):
    client = server.client()
    job = client.submit([sys.executable, "-c", CANCELLED_JOB], env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    run_id = int(wait_for(lambda: client.logs(job["id"])[0].strip(), timeout=60))
    client.cancel(job["id"])
    ended = client.wait(job["id"], timeout=30)
    assert ended["state"] == "CANCELLED"
    assert read_all(client, run_id, "loss")[0] == list(range(500))  # flushed on SIGTERM, not lost with the process
    assert wait_for(lambda: client.get_run(run_id)["state"] == "crashed", timeout=30)


KILLED_OFFLINE = """
import corral, os
run = corral.init(project="offline", mode="offline", flush_interval_s=0.05)
for i in range(100):
    run.log({"loss": float(i)}, step=i)
run.add_tags("x" * 300)  # nothing checks a tag offline; the server will refuse it
run.flush()
os._exit(1)  # killed: no finish recorded
"""


def test_sync_ends_a_run_whose_process_died_as_crashed_and_leaves_out_what_the_server_refuses(server, short_tmp):
    spool = os.path.join(short_tmp, "spool")
    done = subprocess.run([sys.executable, "-c", KILLED_OFFLINE], capture_output=True, text=True, cwd=short_tmp,
                          env=child_env(server, CORRAL_SPOOL_DIR=spool), timeout=60)
    assert done.returncode == 1, done.stderr
    client = server.client()
    (report,) = sync_spool(spool, client=client)
    assert report.state == "crashed" and report.points == 100
    assert "refused a tags record" in report.error
    assert read_all(client, report.run_id, "loss")[0] == list(range(100))
    assert os.listdir(spool) == []  # nothing is left to block later syncs


def test_a_spool_made_in_a_job_this_server_never_had_is_synced_without_the_link(server_factory, monkeypatch, sdk_env):
    """A run names only an existing job of its caller's; an offline run of another server's job keeps its data."""
    server = server_factory()
    monkeypatch.setenv("CORRAL_JOB_ID", "424242")
    run = corral.init(project="elsewhere", mode="offline", **FAST)
    for step in range(10):
        run.log({"loss": float(step)}, step=step)
    run.finish()
    with server.client() as client:
        (report,) = sync_spool(sdk_env, client=client)
        assert report.error is None and report.state == "finished", report
        synced = client.get_run(report.run_id)
        assert synced["job_id"] is None and synced["resume_key"].startswith("job:424242:")
        assert read_all(client, report.run_id, "loss")[0] == list(range(10))
