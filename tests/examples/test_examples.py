"""The training examples, run as real corral jobs on CPU and tracked by a real server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import needs

pytestmark = needs("torch", "sklearn")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples")
STEPS_PER_EPOCH = 23  # ceil(1437 training digits / batch of 64)


def run_job(client, command: list[str], cpus: int = 1, timeout: float = 180) -> dict:
    job = client.submit(command, workdir=REPO, cpus=cpus)
    done = client.wait(job["id"], timeout=timeout, poll=1)
    if done["state"] != "COMPLETED":
        out = client.logs(job["id"])[0].decode(errors="replace")
        err = client.logs(job["id"], stream="stderr")[0].decode(errors="replace")
        pytest.fail(f"job {job['id']} ended {done['state']}\n--- stdout\n{out[-3000:]}\n--- stderr\n{err[-3000:]}")
    return done


def test_mnist_trains_as_a_job_logs_metrics_and_a_checkpoint_then_resumes_its_run(server_factory):
    server = server_factory()
    client = server.client()
    job = run_job(client, [sys.executable, os.path.join(EXAMPLES, "mnist_cnn.py"), "--epochs", "1"])

    (run,) = client.runs(job=job["id"])
    assert (run["project"], run["state"], run["name"]) == ("mnist", "finished", "cnn-lr0.002-bs64-seed0")
    assert run["config"]["epochs"] == 1
    loss = client.series(run["id"], "train/loss")
    assert loss["steps"] == list(range(STEPS_PER_EPOCH))
    assert client.series(run["id"], "val/acc")["values"][0] > 0.5  # ten classes: chance is 0.1
    (checkpoint,) = client.artifacts(run["id"], type="checkpoint")
    assert checkpoint["step"] == STEPS_PER_EPOCH and checkpoint["metric"] == "val/loss"
    assert checkpoint["metric_value"] == pytest.approx(run["metrics"]["val/loss"]["last"])
    assert os.path.isfile(checkpoint["path"])

    # a requeued job starts again with the same job id and checkpoint directory
    env = {**os.environ, "CORRAL_URL": server.url, "CORRAL_JOB_ID": str(job["id"]),
           "CORRAL_CHECKPOINT_DIR": os.path.dirname(checkpoint["path"])}
    resumed = subprocess.run([sys.executable, os.path.join(EXAMPLES, "mnist_cnn.py"), "--epochs", "2"],
                             env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from {checkpoint['path']}: epoch 1, step {STEPS_PER_EPOCH}" in resumed.stdout
    (again,) = client.runs(job=job["id"])
    assert again["id"] == run["id"] and again["state"] == "finished"
    assert client.series(run["id"], "train/loss")["steps"] == list(range(2 * STEPS_PER_EPOCH))
    # retention keeps the newest and the best: here, the same file
    assert [a["step"] for a in client.artifacts(run["id"], type="checkpoint")] == [2 * STEPS_PER_EPOCH]


def test_mnist_profile_prints_the_op_table_the_time_split_and_kernprof_lines(tmp_path):
    kernprof = shutil.which("kernprof", path=os.path.dirname(sys.executable))
    launcher = [kernprof, "-l", "-v"] if kernprof else [sys.executable]
    done = subprocess.run([*launcher, os.path.join(EXAMPLES, "mnist_cnn.py"), "--profile", "--profile-steps", "5"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "Self CPU" in out and "aten::convolution_backward" in out
    assert "where the time goes: 5 steps" in out
    for phase in ("data", "forward", "backward", "optimizer"):
        assert f"{phase:>10}  " in out
    if kernprof:
        assert "Function: train_step" in out and "loss.backward()" in out


def test_ddp_speedup_driver_runs_one_and_two_processes_each_as_a_run(server_factory):
    client = server_factory().client()
    command = [sys.executable, os.path.join(EXAMPLES, "ddp_speedup.py"), "--procs", "1,2",
               "--", "--epochs", "1", "--samples", "512", "--batch-size", "64"]
    job = run_job(client, command, cpus=2, timeout=240)

    out = client.logs(job["id"])[0].decode()
    assert "RESULT world_size=1 " in out and "RESULT world_size=2 " in out and "backend=gloo" in out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("procs"))
    assert header.split() == ["procs", "train", "time", "(s)", "samples/s", "speedup", "efficiency", "val", "acc"]
    rows = {line.split()[0]: line.split() for line in out.splitlines()[out.splitlines().index(header) + 1:]
            if line.split() and line.split()[0].isdigit()}
    assert set(rows) == {"1", "2"} and rows["1"][3] == "1.00x" and rows["1"][4] == "100%"

    runs = {r["name"]: r for r in client.runs(job=job["id"])}
    assert set(runs) == {"ddp-np1", "ddp-np2"}
    for world, name in ((1, "ddp-np1"), (2, "ddp-np2")):
        run = runs[name]
        assert run["state"] == "finished" and run["config"]["world_size"] == world
        assert run["metrics"]["train_time_s"]["count"] == 1 and run["metrics"]["samples_per_s"]["last"] > 0
        assert len(client.artifacts(run["id"], type="checkpoint")) == 1
