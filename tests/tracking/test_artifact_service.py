"""The artifact service's interface for other routes (MLflow's artifact routes use it): a request's
stream into the store as a run's artifact, read back with a range; refused over the limit with
nothing kept."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from corral.core.dialects.byte_ranges import ByteRange
from corral.errors import Conflict, InvalidRequest, NotFound
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


def run_scenario(tmp_path, scenario, limits: ArtifactLimits = ArtifactLimits()) -> None:
    """`scenario(tracking, service)` on a fresh database and store, in a thread of its own (see above)."""
    engine = open_engine(database_url(None, str(tmp_path)))
    migrate.upgrade(engine)
    tracking = TrackingService(RunStore(engine), user="alice")
    service = ArtifactService(ArtifactStore(str(tmp_path / "artifacts")), tracking, limits=limits)
    try:
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, scenario(tracking, service)).result()
    finally:
        tracking.close()
        engine.dispose()


def blobs(tmp_path) -> list[str]:
    return sorted(name for _, _, names in os.walk(tmp_path / "artifacts" / "blobs") for name in names)


def test_a_directory_level_lists_files_with_sizes_and_directories_once(tmp_path):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})
        for name, data in (("model/MLmodel", b"flavors"), ("model/data/w.bin", b"w" * 10), ("notes.txt", b"hi"),
                           ("model_card.md", b"card")):
            await service.put_stream(run["id"], "alice", name, pieces(data))
        await tracking.put_artifacts(str(run["id"]), {"artifacts": [{"path": "/ckpt/model/last.pt", "type": "checkpoint"}]})
        level = [(e.name, e.is_dir, e.size) for e in await service.listing(run["id"], "")]
        assert level == [("model", True, None), ("model_card.md", False, 4), ("notes.txt", False, 2)]
        level = [(e.name, e.is_dir, e.size) for e in await service.listing(run["id"], "model")]
        assert level == [("MLmodel", False, 7), ("data", True, None)]
        # a file lists as itself (MLflow's way); a name that is a prefix of others' is no directory of theirs
        assert [(e.name, e.size) for e in await service.listing(run["id"], "model/MLmodel")] == [("MLmodel", 7)]
        assert await service.listing(run["id"], "mod") == [] and await service.listing(run["id"], "nothing/here") == []
        with pytest.raises(InvalidRequest):
            await service.listing(run["id"], "../x")

    run_scenario(tmp_path, scenario)


def test_deleting_a_directory_unlinks_all_under_it_and_frees_blobs_nothing_else_links(tmp_path):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})
        shared, own = b"s" * 100, b"o" * 50
        await service.put_stream(run["id"], "alice", "model/shared.bin", pieces(shared))
        await service.put_stream(run["id"], "alice", "model/own.bin", pieces(own))
        await service.put_stream(run["id"], "alice", "copy.bin", pieces(shared))
        await service.put_stream(run["id"], "alice", "model_card.md", pieces(b"card"))
        assert len(blobs(tmp_path)) == 3  # the same content twice is one blob
        assert await service.delete(run["id"], "model") == len(own)  # shared.bin's blob is copy.bin's too
        names = [a["path"] for a in await tracking.artifacts(str(run["id"]), type_=None, deleted=False)]
        assert names == ["copy.bin", "model_card.md"] and len(blobs(tmp_path)) == 2
        assert await tracking.stored_bytes("alice") == len(shared) + 4
        assert await service.delete(run["id"], "copy.bin") == len(shared) and len(blobs(tmp_path)) == 1
        assert await service.delete(run["id"], "nothing/here") == 0
        with pytest.raises(InvalidRequest):
            await service.delete(run["id"], "")

    run_scenario(tmp_path, scenario)


def test_a_stream_is_held_to_the_quota_as_a_whole_but_files_taken_in_are_held_to_no_limit(tmp_path):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})
        with pytest.raises(InvalidRequest, match="user_artifact_quota_mb"):
            await service.put_stream(run["id"], "alice", "a.bin", pieces(b"x" * 60, b"x" * 60))
        assert blobs(tmp_path) == [] and os.listdir(tmp_path / "artifacts" / "tmp") == []
        artifact = await service.take_in(run["id"], "alice", "a.bin", iter([b"x" * 300]))
        assert (artifact["path"], artifact["size"], artifact["stored"]) == ("a.bin", 300, True)

    run_scenario(tmp_path, scenario, ArtifactLimits(max_file_bytes=200, user_quota_bytes=100))


def test_a_file_logged_again_under_its_name_does_not_keep_its_old_content(tmp_path):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})
        for epoch in range(3):  # as `mlflow.log_dict(..., "latest.json")` each epoch
            await service.put_stream(run["id"], "alice", "latest.json", pieces(b'{"epoch": %d}' % epoch))
        await service.put_stream(run["id"], "alice", "other.json", pieces(b'{"epoch": 0}'))
        await service.put_stream(run["id"], "alice", "other.json", pieces(b'{"epoch": 2}'))  # latest.json's content
        latest = await tracking.artifact(run["id"], "latest.json")
        assert blobs(tmp_path) == [latest["sha256"]]  # one copy, linked twice
        await service.put_stream(run["id"], "alice", "other.json", pieces(b"{}"))
        assert len(blobs(tmp_path)) == 2  # latest.json's blob stays: it is still linked
        found = await service.open(run["id"], "alice", "latest.json")
        assert b"".join(found.chunks(None)) == b'{"epoch": 2}'

    run_scenario(tmp_path, scenario)


def test_deleting_a_directory_takes_only_names_under_it_exactly(tmp_path):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})
        for name in ("data/a.bin", "Data/b.bin", "DATA", "data_x/c.bin", "dataXd/e.bin", "a_b/f.bin", "aXb/g.bin",
                     "p%/h.bin", "pq/i.bin"):
            await service.put_stream(run["id"], "alice", name, pieces(name.encode()))
        await service.delete(run["id"], "DATA")  # the file of that name, not data/ nor Data/ (SQLite's LIKE ignores case)
        await service.delete(run["id"], "a_b")  # `_` and `%` are characters, not wildcards
        await service.delete(run["id"], "p%")
        names = sorted(a["path"] for a in await tracking.artifacts(str(run["id"]), type_=None, deleted=False))
        assert names == sorted(["Data/b.bin", "aXb/g.bin", "data/a.bin", "data_x/c.bin", "dataXd/e.bin", "pq/i.bin"])

    run_scenario(tmp_path, scenario)


def test_an_upload_whose_run_is_deleted_meanwhile_leaves_no_blob_behind(tmp_path):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})
        keep, _ = await tracking.create_run({"project": "mlflow"})
        await service.put_stream(keep["id"], "alice", "kept.bin", pieces(b"kept"))

        async def deleted_midway() -> AsyncIterator[bytes]:
            yield b"x" * 1000
            await service.delete_run(run["id"])
            yield b"y" * 1000

        with pytest.raises(NotFound):
            await service.put_stream(run["id"], "alice", "big.bin", deleted_midway())
        assert blobs(tmp_path) == [(await tracking.artifact(keep["id"], "kept.bin"))["sha256"]]
        assert os.listdir(tmp_path / "artifacts" / "tmp") == []

    run_scenario(tmp_path, scenario)


def test_a_declared_length_over_the_limits_is_refused_before_anything_is_read(tmp_path):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})

        async def never() -> AsyncIterator[bytes]:
            raise AssertionError("read a body it should have refused")
            yield b""

        with pytest.raises(InvalidRequest, match="limit of 200 bytes"):
            await service.put_stream(run["id"], "alice", "big.bin", never(), declared=201)
        with pytest.raises(InvalidRequest, match="user_artifact_quota_mb"):
            await service.put_stream(run["id"], "alice", "big.bin", never(), declared=101)

    run_scenario(tmp_path, scenario, ArtifactLimits(max_file_bytes=200, user_quota_bytes=100))


def test_registering_a_file_cannot_repoint_or_resize_an_uploaded_artifact(tmp_path):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})
        uploaded = await service.put_stream(run["id"], "alice", "x.bin", pieces(b"mine"))
        for change in ({"sha256": "0" * 64}, {"size": 0}, {"deleted": True}):
            with pytest.raises(Conflict, match="'x.bin' of run .* was uploaded"):
                await tracking.put_artifacts(str(run["id"]), {"artifacts": [{"path": "x.bin", **change}]})
        assert await tracking.artifact(run["id"], "x.bin") == uploaded
        assert await tracking.stored_bytes("alice") == 4

    run_scenario(tmp_path, scenario)


def test_a_file_logged_again_at_the_quota_counts_only_what_it_adds(tmp_path):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})
        await service.put_stream(run["id"], "alice", "latest.json", pieces(b"a" * 60))
        await service.put_stream(run["id"], "alice", "other.bin", pieces(b"b" * 40))  # 100 of 100 bytes
        # the same name again replaces what it held: 60 go, 60 come (declared up front too, as mlflow's client does)
        await service.put_stream(run["id"], "alice", "latest.json", pieces(b"c" * 60), declared=60)
        begun = await service.begin_upload(run["id"], "alice", {"path": "latest.json", "size": 50,
                                                                 "sha256": hashlib.sha256(b"d" * 50).hexdigest()})
        assert begun["complete"] is False
        with pytest.raises(InvalidRequest, match="user_artifact_quota_mb"):  # more than it replaces does not fit
            await service.put_stream(run["id"], "alice", "latest.json", pieces(b"e" * 61))
        with pytest.raises(InvalidRequest, match="user_artifact_quota_mb"):  # nor does a new name
            await service.put_stream(run["id"], "alice", "new.json", pieces(b"f"))
        assert await tracking.stored_bytes("alice") == 100

    run_scenario(tmp_path, scenario, ArtifactLimits(max_file_bytes=200, user_quota_bytes=100))


def test_resumable_uploads_begun_together_are_held_to_the_quota_as_they_end(tmp_path):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "p"})
        first, second = b"1" * 70, b"2" * 70
        begun = [await service.begin_upload(run["id"], "alice", {"path": name, "size": 70,
                                                                  "sha256": hashlib.sha256(data).hexdigest()})
                 for name, data in (("a.bin", first), ("b.bin", second))]
        assert all(not b["complete"] for b in begun)  # each fits alone, and nothing was reserved by beginning
        done = await service.append(run["id"], "alice", begun[0]["upload_id"], 0, first)
        assert done["complete"] is True
        with pytest.raises(InvalidRequest, match="user_artifact_quota_mb"):
            await service.append(run["id"], "alice", begun[1]["upload_id"], 0, second)
        assert await tracking.stored_bytes("alice") == 70 and len(blobs(tmp_path)) == 1

    run_scenario(tmp_path, scenario, ArtifactLimits(max_file_bytes=200, user_quota_bytes=100))


@pytest.mark.parametrize("quota", [1000, None])
def test_an_upload_reads_the_artifact_it_replaces_once_where_it_links_and_up_front_only_for_a_quota(tmp_path, quota):
    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "p"})
        await service.put_stream(run["id"], "alice", "latest.json", pieces(b"a" * 60))
        reads = []
        artifact = tracking.artifact

        async def counted(run_id, path):
            reads.append(path)
            return await artifact(run_id, path)

        tracking.artifact = counted
        await service.put_stream(run["id"], "alice", "latest.json", pieces(b"b" * 60))
        assert reads == ["latest.json"] * (2 if quota else 1)  # up front (for the quota), then under the lock
        assert blobs(tmp_path) == [hashlib.sha256(b"b" * 60).hexdigest()]  # the one it replaced is gone
        reads.clear()
        data = b"c" * 60
        begun = await service.begin_upload(run["id"], "alice", {"path": "latest.json", "size": len(data),
                                                                 "sha256": hashlib.sha256(data).hexdigest()})
        await service.append(run["id"], "alice", begun["upload_id"], 0, data)
        assert reads == ["latest.json"] * (2 if quota else 1)

    run_scenario(tmp_path, scenario, ArtifactLimits(max_file_bytes=200, user_quota_bytes=quota))
