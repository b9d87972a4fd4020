"""GPUs in use outside corral (issue 22, point 1) on a live server whose GPU figures are recorded frames
($CORRAL_GPU_REPLAY) listing a real process started here, outside corral: the GPU shows it in the API, `corral
nodes`, `scontrol show node` and `sinfo -R`; a 1-GPU job waits with a reason naming the GPU, the pid and the user, and runs
once the process is gone; with `[node] outside_processes = "ignore"` the job is placed anyway."""

from __future__ import annotations

import getpass
import json
import os
import subprocess

import pytest

from tests.cli.test_drain_cli import corral, running, waiting
from tests.helpers import wait_for

ROOMY = ["--cpus", "16", "--mem", "64G", "--sample-interval", "0.3"]
GIB = 1 << 30


@pytest.fixture
def notebook():
    """A process outside corral (someone's notebook), killed and reaped at the end."""
    process = subprocess.Popen(["sleep", "300"])
    yield process
    process.kill()
    process.wait()


def replaying(monkeypatch, tmp_path, pid: int) -> None:
    """The server started next reads one GPU, on which NVML lists `pid` with 2 GiB."""
    frame = [{"index": 0, "uuid": "GPU-0", "utilization": {"gpu": 35, "memory": 5},
              "memory": {"total": 80 * GIB, "used": 3 * GIB, "free": 77 * GIB}, "power_mw": 120000,
              "temperature_c": 40, "processes": [{"pid": pid, "usedGpuMemory": 2 * GIB}]}]
    frames = tmp_path / "frames.jsonl"
    frames.write_text(json.dumps(frame) + "\n")
    monkeypatch.setenv("CORRAL_GPU_REPLAY", str(frames))


def outside(client) -> list[dict]:
    return client.nodes()[0]["gpus"][0]["outside"]


def test_a_gpu_used_outside_corral_is_shown_and_avoided_and_a_job_runs_once_the_process_is_gone(
        server_factory, monkeypatch, tmp_path, notebook, slurm_shell):
    replaying(monkeypatch, tmp_path, notebook.pid)
    server = server_factory(gpus=1, extra=ROOMY)
    client = server.client()
    node = client.nodes()[0]["name"]
    user = getpass.getuser()
    seen = wait_for(lambda: outside(client), timeout=30)
    assert [(p["pid"], p["user"], p["mem_mb"]) for p in seen] == [(notebook.pid, user, 2048)]
    assert seen[0]["since"].endswith("Z")
    held = f"in use outside corral by {user} (pid {notebook.pid}, 2048 MB)"
    row = next(line for line in corral(server, "nodes").output.splitlines() if line.split()[:2] == [node, "0"])
    assert held in row
    shell = slurm_shell(server.home)
    show = shell(f"scontrol show node {node}")
    assert f"   Comment=GPU 0 {held}\n" in show.stdout, show.stdout + show.stderr
    assert shell("sinfo -R -h -o '%100E|%N'").stdout.split("|")[0].strip() == f"GPU 0 {held}"

    # the admin hears of it once (no more while it stays), among the alerts about no job
    alerted = wait_for(lambda: [f for f in client.alerts() if f["rule"] == "gpu-outside"], timeout=15)
    assert [(f["severity"], f["job_id"], f["value"]) for f in alerted] == [("warning", None, f"pid {notebook.pid}")]
    assert alerted[0]["message"].startswith(f"GPU 0 {held}; jobs are kept off it")

    job = client.submit(["sleep", "300"], gpus=1, name="train")
    assert waiting(client, job["id"])["reason"] == f"ReqNodeNotAvail, {node} GPU 0 {held}"
    assert len([f for f in client.alerts() if f["rule"] == "gpu-outside"]) == 1
    assert outside(client)[0]["since"] == seen[0]["since"]  # still the same process, seen since then

    notebook.kill()
    notebook.wait()
    assert running(client, job["id"])["gpu_ids"] == [0]
    assert outside(client) == []
    client.cancel(job["id"])


def test_ignore_shows_the_outside_process_and_places_jobs_anyway(server_factory, monkeypatch, tmp_path, notebook,
                                                                 short_tmp):
    replaying(monkeypatch, tmp_path, notebook.pid)
    home = os.path.join(short_tmp, "ignoring")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write('[node]\noutside_processes = "ignore"\n')
    server = server_factory(gpus=1, extra=ROOMY, home=home)
    client = server.client()
    assert [p["pid"] for p in wait_for(lambda: outside(client), timeout=30)] == [notebook.pid]
    job = client.submit(["sleep", "300"], gpus=1)
    assert running(client, job["id"])["gpu_ids"] == [0]
    client.cancel(job["id"])

