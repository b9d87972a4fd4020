"""The artifact service's interface for other routes (MLflow's artifact routes use it): a request's
stream into the store as a run's artifact, read back with a range; refused over the limit with
nothing kept."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from corral.core.byte_ranges import ByteRange
from corral.errors import InvalidRequest
from corral.store import migrate
from corral.store.db import database_url, open_engine
from corral.store.runs import RunStore
from corral.tracking.artifact_store import ArtifactStore
from corral.tracking.artifacts import ArtifactLimits, ArtifactService
from corral.tracking.service import TrackingService


async def pieces(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        await asyncio.sleep(0)
        yield chunk


def test_a_stream_becomes_a_runs_artifact_and_reads_back_by_range(tmp_path):
    engine = open_engine(database_url(None, str(tmp_path)))
    migrate.upgrade(engine)
    tracking = TrackingService(RunStore(engine), user="alice")
    store = ArtifactStore(str(tmp_path / "artifacts"))
    service = ArtifactService(store, tracking, limits=ArtifactLimits(max_file_bytes=100, user_quota_bytes=150))

    async def scenario() -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})
        artifact = await service.put_stream(run["id"], "alice", "model/MLmodel", pieces(b"flavors:", b" {}\n"))
        assert (artifact["path"], artifact["size"], artifact["stored"]) == ("model/MLmodel", 12, True)
        found = await service.open(run["id"], "alice", "model/MLmodel")
        assert b"".join(found.chunks(ByteRange(0, 6))) == b"flavors"
        with pytest.raises(InvalidRequest, match="limit of 100 bytes"):
            await service.put_stream(run["id"], "alice", "big.bin", pieces(b"x" * 60, b"x" * 60))
        await service.put_stream(run["id"], "alice", "a.bin", pieces(os.urandom(100)))
        with pytest.raises(InvalidRequest, match="user_artifact_quota_mb"):
            await service.put_stream(run["id"], "alice", "b.bin", pieces(os.urandom(50)))
        assert [a["path"] for a in await tracking.artifacts(str(run["id"]), type_=None, deleted=False)] == [
            "model/MLmodel", "a.bin"]
        assert os.listdir(tmp_path / "artifacts" / "tmp") == []

    try:
        # a thread of its own: a browser test's Playwright may leave an event loop running in this one
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, scenario()).result()
    finally:
        tracking.close()
        engine.dispose()
