"""Fixtures for tests against the Slurm testbed (scripts/slurm-testbed.sh); a plugin of tests/conftest.py."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTBED = os.path.join(REPO, "scripts", "slurm-testbed.sh")


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """The testbed, started if it is not running (idempotent), with an empty queue."""
    done = subprocess.run(["bash", TESTBED, "start"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"the Slurm testbed did not start:\n{done.stdout}\n{done.stderr}"
    cancel_everything()


def cancel_everything() -> None:
    # the testbed is this machine's own cluster: whatever a test left queued would hold up the next
    subprocess.run(["scancel", f"--user={os.getuid()}"], check=False)
    wait_for(lambda: not squeue_ids(), timeout=30)


@pytest.fixture
def slurm(slurm_cluster, server_factory):
    yield server_factory(extra=["--backend", "slurm"])
    cancel_everything()


def squeue_ids() -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True).stdout
    return set(out.split())


