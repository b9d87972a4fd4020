"""Slurm's commands run by real accounts against a root server: each is who the kernel says it is (`as_user`:
tests/cli/slurm/conftest.py)."""

from __future__ import annotations

import os


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
