"""A live server for the integrations, and an environment that looks like no job's."""

from __future__ import annotations

import pytest

from tests.conftest import Server

JOB_VARIABLES = ("CORRAL_JOB_ID", "CORRAL_MODE", "CORRAL_CHECKPOINT_DIR", "CORRAL_PROJECT", "SLURM_JOB_ID",
                 "SLURM_PROCID", "RANK", "LOCAL_RANK", "WORLD_SIZE")


@pytest.fixture
def live_server(server_factory, tmp_path, monkeypatch) -> Server:
    """A server the SDK reaches through $CORRAL_URL; the cwd and the spool are the test's own."""
    server = server_factory()
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CORRAL_URL", server.url)
    monkeypatch.setenv("CORRAL_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.chdir(tmp_path)
    return server
