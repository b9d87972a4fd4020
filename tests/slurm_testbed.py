"""Fixtures for tests against the Slurm testbed (scripts/slurm-testbed.sh); a plugin of tests/conftest.py."""

from __future__ import annotations

import datetime
import os
import subprocess

import pytest

from tests.helpers import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTBED = os.path.join(REPO, "scripts", "slurm-testbed.sh")


# Workers start together; a job submitted before then is a leftover of an earlier run.
SESSION_STARTED = datetime.datetime.now() - datetime.timedelta(seconds=5)


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """The testbed, started if it is not running (idempotent), without an earlier run's leftovers."""
    done = subprocess.run(["bash", TESTBED, "start"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"the Slurm testbed did not start:\n{done.stdout}\n{done.stderr}"
    # only jobs from before this run: other workers' tests share the cluster and run meanwhile
    cancel(leftovers())


def leftovers() -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i %V"], capture_output=True, text=True, check=True).stdout
    old = set()
    for line in out.splitlines():
        job_id, _, submitted = line.partition(" ")
        try:
            if datetime.datetime.fromisoformat(submitted.strip()) < SESSION_STARTED:
                old.add(job_id)
        except ValueError:
            continue
    return old


def cancel(job_ids: set[str]) -> None:
    if job_ids:
        subprocess.run(["scancel", *sorted(job_ids)], check=False)
        wait_for(lambda: not (squeue_ids() & job_ids), timeout=30)


def jobs_of(server) -> set[str]:
    """The Slurm ids of the jobs a corral server submitted or attached, whatever their state."""
    client = server.client()
    try:
        jobs = client.queue() + client.history(limit=1000)
    except Exception:  # a test that stopped its server: its jobs were cancelled with it or are found as leftovers
        return set()
    return {str(job["backend_id"]) for job in jobs if job.get("backend_id")}


@pytest.fixture
def slurm(slurm_cluster, server_factory):
    server = server_factory(extra=["--backend", "slurm"])
    yield server
    # this test's jobs only: scancel --user would end the jobs of tests running on other workers
    cancel(jobs_of(server) & squeue_ids())


def squeue_ids() -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True).stdout
    return set(out.split())


