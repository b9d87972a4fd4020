"""Container jobs on a live root server with Podman: the `corral` command, the SDK inside the image,
a server killed with SIGKILL meanwhile, and the monitor's samples of the container's processes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import corral
from corral.errors import InvalidRequest
from tests.helpers import wait_for

SOURCE = os.path.dirname(os.path.dirname(corral.__file__))  # corral's source, mounted into the Python image
TRAIN = """
import os, corral
run = corral.init(project="in-a-container", config={"lr": 0.1})
for step in range(3):
    run.log({"loss": 1.0 / (step + 1)}, step=step)
run.finish()
print("gpus", os.environ["CUDA_VISIBLE_DEVICES"], "job", os.environ["CORRAL_JOB_ID"])
"""


def corral_cli(server, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def test_corral_submit_runs_a_script_in_an_image_on_two_gpus_and_it_reports_to_the_server(
        server_factory, podman, python_image):
    server = server_factory()
    submitted = corral_cli(server, "submit", "--container-image", python_image, "-G", "2",
                           "--container-mounts", f"{SOURCE}:/opt/corral-src:ro", "--parsable",
                           "--", "python3", "-c", TRAIN, env={"PYTHONPATH": "/opt/corral-src"})
    assert submitted.returncode == 0, submitted.stderr
    job_id = int(submitted.stdout.strip())
    with server.client() as client:
        job = client.wait(job_id, timeout=120)
        out, _, _ = client.logs(job_id)
        err, _, _ = client.logs(job_id, stream="stderr")
        assert job["state"] == "COMPLETED", err.decode()
        assert job["image"] == python_image and len(job["gpu_ids"]) == 2
        assert out.decode().split() == ["gpus", "0,1", "job", str(job_id)]
        runs = client.runs(project="in-a-container")
        assert [r["job_id"] for r in runs] == [job_id]
        series = client.series(runs[0]["id"], "loss")
        assert (series["steps"], series["values"]) == ([0, 1, 2], [1.0, 0.5, 1 / 3])
    shown = corral_cli(server, "show", str(job_id))
    assert f"Image: {python_image}" in shown.stdout


def test_a_container_job_outlives_a_killed_server_and_the_next_one_adopts_it(server_factory, podman, busybox_image):
    server = server_factory()
    with server.client() as client:
        job = client.submit(["sh", "-c", "echo started; sleep 4; echo finished"], image=busybox_image)
        wait_for(lambda: client.get(job["id"])["state"] == "RUNNING", timeout=30)
        wait_for(lambda: b"started" in client.logs(job["id"])[0], timeout=30)
    server.kill9()
    server.start()
    with server.client() as client:
        ended = client.wait(job["id"], timeout=60)
        assert ended["state"] == "COMPLETED" and ended["exit_code"] == 0
        assert client.logs(job["id"])[0] == b"started\nfinished\n"


def test_the_monitor_samples_the_containers_processes_as_the_jobs(server_factory, podman, busybox_image):
    server = server_factory(extra=["--sample-interval", "0.2"])
    with server.client() as client:
        job = client.submit(["sh", "-c", "while :; do :; done"], image=busybox_image, time="2")

        def busy_sample():
            row = next((r for r in client.top() if r["id"] == job["id"]), None)
            sample = row and row["sample"]
            return sample if sample and sample["cpu_utilization"] and sample["cpu_utilization"] > 50 else None

        sample = wait_for(busy_sample, timeout=30)
        # the container's busy shell (not a child of the supervisor: of Podman's conmon) counted as the job's
        assert sample["processes"] >= 2
        client.cancel(job["id"])
        assert client.wait(job["id"], timeout=30)["state"] == "CANCELLED"


def test_an_image_the_server_cannot_pull_fails_the_job_and_diagnose_names_it(server_factory, podman):
    server = server_factory()
    with server.client() as client:
        job = client.submit(["true"], image="registry.invalid/team/trainer:1")
        ended = client.wait(job["id"], timeout=120)
        assert ended["state"] == "FAILED"
        assert ended["reason"].startswith("cannot bring in the image registry.invalid/team/trainer:1 with podman: ")
        findings = client.diagnose(job["id"])["findings"]
        assert findings[0]["cause"] == "image_unavailable"
        assert "registry.invalid/team/trainer:1" in findings[0]["title"]
        assert any("cannot bring in the image" in line for line in findings[0]["evidence"])


def test_what_the_runtime_cannot_run_is_refused_at_submit_by_field_and_nothing_is_queued(
        server_factory, podman, monkeypatch, tmp_path):
    server = server_factory()
    with server.client() as client:
        with pytest.raises(InvalidRequest) as refused:
            client.submit(["true"], image="/shared/images/pytorch.sif")
        assert refused.value.field == "image" and "SIF file, which podman cannot run" in str(refused.value)
        with pytest.raises(InvalidRequest) as refused:
            client.submit(["true"], container_mounts="/data:/data")
        assert refused.value.field == "container_mounts" and "--container-image" in str(refused.value)
        assert client.queue() == [] and client.history() == []
    bare = tmp_path / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", f"{bare}:{os.path.dirname(sys.executable)}")  # no runtime on the server's PATH
    without = server_factory()
    with without.client() as client:
        with pytest.raises(InvalidRequest) as refused:
            client.submit(["true"], image="ubuntu:22.04")
        assert refused.value.field == "image" and "no container runtime" in str(refused.value)
        assert "install Podman" in str(refused.value)
