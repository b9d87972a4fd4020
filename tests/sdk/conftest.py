"""Fixtures for the SDK's tests: a clean environment per test, and the in-memory server."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from corral.sdk import open_runs, start
from tests.sdk.fakes import FakeServer

JOB_VARIABLES = ("CORRAL_JOB_ID", "CORRAL_URL", "CORRAL_MODE", "CORRAL_CHECKPOINT_DIR", "CORRAL_RESTART_COUNT",
                 "CORRAL_TIME_LIMIT_S", "CORRAL_JOB_END_TIME", "CORRAL_NODE", "CORRAL_PROJECT", "CORRAL_HOME",
                 "SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_PROCID", "SLURM_RESTART_COUNT",
                 "SLURM_JOB_END_TIME", "RANK", "LOCAL_RANK", "WORLD_SIZE")


@pytest.fixture
def sdk_env(tmp_path, monkeypatch) -> Iterator[str]:
    """No job, rank 0, spool and checkpoints under tmp_path (the cwd), a fresh init count.

    Yields the spool directory. Runs a test leaves open are finished, so no thread outlives it.
    """
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    spool = tmp_path / "spool"
    monkeypatch.setenv("CORRAL_SPOOL_DIR", str(spool))
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(start, "_init_count", 0)
    monkeypatch.setattr(open_runs, "_current", None)
    yield str(spool)
    for leftover in list(open_runs._open_runs):
        leftover.finish(timeout=5)


@pytest.fixture
def fake() -> FakeServer:
    return FakeServer()


def spooled_files(spool: str) -> list[str]:
    """Every file under the spool, relative to it, sorted."""
    found = []
    for root, _, files in os.walk(spool):
        found += [os.path.relpath(os.path.join(root, f), spool) for f in files]
    return sorted(found)
