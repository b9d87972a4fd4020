"""Slurm's commands run by real accounts against a root server: each is who the kernel says it is."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from corral.cli.slurm.install import write_scripts

# the commands need any Python >= 3.11; the test venv's own may sit where other accounts cannot run it
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/usr/local/bin")


@pytest.fixture
def as_user(shared_dir):
    if SYSTEM_PYTHON is None or subprocess.run([SYSTEM_PYTHON, "-c", "import sys; sys.exit(sys.version_info < (3, 11))"]
                                               ).returncode:
        pytest.skip("needs a Python >= 3.11 that every account may run (/usr/bin/python3)")
    bin_dir = os.path.join(shared_dir, "slurm-bin")
    write_scripts(bin_dir, SYSTEM_PYTHON)

    def run(user: str, home: str, script: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CORRAL_HOME": home, "HOME": "/tmp", "USER": user}
        return subprocess.run(["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                               "bash", "-c", script], capture_output=True, text=True, timeout=120, cwd="/tmp")

    return run


def test_a_user_cannot_cancel_hold_or_change_anothers_job_with_slurms_commands(server_factory, os_users, shared_dir,
                                                                              as_user):
    alice, bob = os_users
    server = server_factory(gpus=1, home=os.path.join(shared_dir, "home"))
    submitted = as_user(bob, server.home, "sbatch --parsable --chdir=/tmp --wrap 'sleep 120'")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    client = server.client()
    assert client.get(job_id)["user"] == bob
    for command in (f"scancel {job_id}", f"scontrol hold {job_id}", f"scontrol update JobId={job_id} TimeLimit=1"):
        refused = as_user(alice, server.home, command)
        assert refused.returncode == 1, command
        assert "Access/permission denied" in refused.stderr or "only its owner" in refused.stderr, refused.stderr
    assert client.get(job_id)["state"] in ("PENDING", "RUNNING")
    assert client.get(job_id)["time_limit_s"] is None
    seen = as_user(alice, server.home, "squeue -h -o '%i %u'; echo --; sacct -X -n -o JobID")
    queue, history = seen.stdout.split("--\n")
    assert queue.split() == [job_id, bob]  # everybody sees the queue, as in Slurm
    assert history.strip() == ""  # sacct shows a user her own jobs
    assert as_user(bob, server.home, f"scancel {job_id}").returncode == 0
    assert client.wait(job_id, timeout=60)["state"] == "CANCELLED"
