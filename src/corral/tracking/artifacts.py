"""Artifacts of runs: uploads into the store (resumable, deduplicated, within limits), downloads,
and what a run's deletion frees.

The routes check that the caller owns the run (or is an admin) and pass its id here. Two kinds
of artifact are served:

- uploaded (`stored`): the bytes are a blob of the `ArtifactStore`, named by sha256;
- registered (checkpoints): the file stays where the job wrote it, and is read from there when
  asked for, as its owner's regular file only (a run's owner chooses the path; the server may be
  root, so a link to /etc/shadow, a FIFO or a device is never opened).

Deduplication: an upload whose content the store holds already costs no bytes when a run of the
same owner links it; another owner's upload of the same content sends its bytes (knowing a hash
must not be enough to read someone's file), and the store still keeps one copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from corral.core.tracking.artifact_names import ListedEntry, check_artifact_name, check_sha256, directory_level
from corral.core.dialects.byte_ranges import ByteRange
from corral.errors import InvalidRequest, NotFound
from corral.executor.files import open_log
from corral.tracking.artifact_store import ArtifactStore, BlobWriter
from corral.tracking.service import TrackingService

MB = 1 << 20
STREAM_CHUNK = 1 << 20


@dataclass(frozen=True)
class ArtifactLimits:
    """`[tracking] max_artifact_mb` and `user_artifact_quota_mb`; None: no limit."""

    max_file_bytes: int | None = 10 * 1024 * MB
    user_quota_bytes: int | None = 100 * 1024 * MB


@dataclass
class Download:
    """An open artifact: its file (at the range's start), size and what to call it."""

    file: BinaryIO
    size: int
    name: str
    sha256: str | None

    def chunks(self, byte_range: ByteRange | None) -> Iterator[bytes]:
        """The bytes of the range (all of them without one), then the file is closed."""
        try:
            left = byte_range.length if byte_range is not None else self.size
            self.file.seek(byte_range.start if byte_range is not None else 0)
            while left > 0:
                data = self.file.read(min(STREAM_CHUNK, left))
                if not data:
                    break
                left -= len(data)
                yield data
        finally:
            self.file.close()


class ArtifactService:
    def __init__(self, store: ArtifactStore, tracking: TrackingService, *, limits: ArtifactLimits = ArtifactLimits(),
                 uid_of: Callable[[str], int | None] = lambda user: None) -> None:
        self.store = store
        self.tracking = tracking
        self.limits = limits
        self.uid_of = uid_of  # a registered file is served only if this uid owns it
        self._gc = asyncio.Lock()  # a blob is not dropped while a link to it is being made

    # -- uploads ----------------------------------------------------------------------------------

    async def begin_upload(self, run_id: int, owner: str, body: dict[str, Any]) -> dict[str, Any]:
        """Start (or find again) the upload of one file to the run: where to send from, or, when
        the owner's runs hold this content already, the artifact linked at once.

        Raises:
            InvalidRequest: a bad field, a file over the size limit, or the owner's quota full.
        """
        unknown = set(body) - {"path", "size", "sha256", "type", "step", "caption"}
        if unknown:
            raise InvalidRequest(sorted(unknown)[0], "unknown field", "an upload takes path, size, sha256, type, step "
                                                                      "and caption")
        path = check_artifact_name(body.get("path"))
        sha = check_sha256(body.get("sha256"))
        size = body.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise InvalidRequest("size", f"{size!r} is not a size", "give the file's length in bytes")
        type_ = body.get("type") or "file"
        if not isinstance(type_, str) or not 0 < len(type_) <= 32 or not type_.isprintable():
            raise InvalidRequest("type", f"{type_!r} is not an artifact type", 'e.g. "model", "dataset", "file"')
        step = body.get("step")
        if step is not None and (not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < 2**62):
            raise InvalidRequest("step", f"{step!r} is not a step", "a whole number from 0")
        caption = body.get("caption")
        if caption is not None and (not isinstance(caption, str) or len(caption) > 1000):
            raise InvalidRequest("caption", "must be text of at most 1,000 characters")
        await self._check_limits(owner, size, await self._replacing(run_id, path))
        async with self._gc:
            if await self.tracking.blob_linked(sha, user=owner) and await asyncio.to_thread(self.store.size, sha) == size:
                return {"complete": True, "offset": size, "size": size,
                        "artifact": await self._link(run_id, path, type_, size, sha, await self._existing(run_id, path),
                                                     step=step, caption=caption)}
        upload_id = hashlib.sha256(f"{run_id}\0{path}\0{sha}".encode()).hexdigest()[:32]
        meta = {"run_id": run_id, "path": path, "type": type_, "step": step, "caption": caption}
        offset = await asyncio.to_thread(self.store.begin, upload_id, sha, size, meta)
        if size == 0:  # nothing to send: the empty file is whole already
            return await self.append(run_id, owner, upload_id, 0, b"")
        return {"complete": False, "upload_id": upload_id, "offset": offset, "size": size}

    async def append(self, run_id: int, owner: str, upload_id: str, offset: int, data: bytes) -> dict[str, Any]:
        """Bytes of an upload at `offset`; the artifact once the last byte is in, held to the owner's quota
        then (under the lock, as other uploads ending: `begin_upload`'s check reserved nothing).

        Raises:
            NotFound: no such upload of this run's. Conflict: `offset` is not where it stands.
            InvalidRequest: bytes past its end, content that does not hash as declared, or over the quota.
        """
        meta = await asyncio.to_thread(self.store.upload_meta, upload_id)
        if meta.get("run_id") != run_id:
            raise NotFound(f"run {run_id} has no upload {upload_id}")
        last = offset + len(data) >= int(meta["size"])  # the chunk that makes (or finds) the blob, then links it
        async with self._gc if last else contextlib.nullcontext():
            replaced = await self._existing(run_id, meta["path"]) if last else None
            if last:
                await self._check_limits(owner, int(meta["size"]), _stored_size(replaced))
            offset, sha = await asyncio.to_thread(self.store.append, upload_id, offset, [data] if data else [])
            if sha is None:
                return {"complete": False, "upload_id": upload_id, "offset": offset, "size": meta["size"]}
            artifact = await self._link_or_drop(run_id, meta["path"], meta["type"], offset, sha, replaced,
                                                step=meta.get("step"), caption=meta.get("caption"))
        return {"complete": True, "offset": offset, "size": offset, "artifact": artifact}

    async def take_in(self, run_id: int, owner: str, path: str, chunks: Iterator[bytes],
                      type_: str = "file") -> dict[str, Any]:
        """Store a whole stream (read off the event loop) as the run's artifact `path`, held to no
        limit: an older corral's files (its MLflow uploads), which the owner has already and which a
        quota lowered since must not lose; the artifact.

        Raises:
            InvalidRequest: a bad name.
        """
        path = check_artifact_name(path)
        writer = await asyncio.to_thread(self.store.writer, None)
        try:
            await asyncio.to_thread(_write_all, writer, chunks)
            await asyncio.to_thread(writer.seal)
            async with self._gc:
                return await self._install(run_id, path, type_, writer, await self._existing(run_id, path))
        finally:
            await asyncio.to_thread(writer.discard)

    async def put_stream(self, run_id: int, owner: str, path: str, stream: AsyncIterator[bytes],
                         type_: str = "file", declared: int | None = None) -> dict[str, Any]:
        """Store a request's body as it arrives (`request.stream()`, as MLflow's artifact routes take
        it) as the run's artifact `path`: each piece is written off the event loop, and nothing of a
        refused or broken stream is kept; the artifact. `declared`: the body's Content-Length, checked
        against the limits before any of it is read.

        Raises:
            InvalidRequest: a bad name, over the size limit or the owner's quota.
        """
        path = check_artifact_name(path)
        await self._check_limits(owner, declared or 0, await self._replacing(run_id, path))
        writer = await asyncio.to_thread(self.store.writer, self.limits.max_file_bytes)
        try:
            async for chunk in stream:
                if chunk:
                    await asyncio.to_thread(writer.write, chunk)
            return await self._finish(run_id, owner, path, type_, writer)
        finally:
            await asyncio.to_thread(writer.discard)

    async def _finish(self, run_id: int, owner: str, path: str, type_: str, writer: BlobWriter) -> dict[str, Any]:
        await asyncio.to_thread(writer.seal)  # its fsync outside the lock: a large file's must not hold up the rest
        async with self._gc:
            replaced = await self._existing(run_id, path)
            # the quota, now that the size is known (under the lock: uploads ending together count in turn)
            await self._check_limits(owner, writer.size, _stored_size(replaced))
            return await self._install(run_id, path, type_, writer, replaced)

    async def _install(self, run_id: int, path: str, type_: str, writer: BlobWriter,
                       replaced: dict[str, Any] | None) -> dict[str, Any]:
        """The written blob installed and linked under `path` (the caller holds `_gc`); the artifact."""
        sha, size = await asyncio.to_thread(writer.finish)
        return await self._link_or_drop(run_id, path, type_, size, sha, replaced)

    async def _link_or_drop(self, run_id: int, path: str, type_: str, size: int, sha: str,
                            replaced: dict[str, Any] | None, step: int | None = None,
                            caption: str | None = None) -> dict[str, Any]:
        """`_link`, and where the link fails (the run was deleted meanwhile), the blob made for it goes again if
        nothing else links it: no quota counts a blob no run links, so it must not stay on disk."""
        try:
            return await self._link(run_id, path, type_, size, sha, replaced, step=step, caption=caption)
        except BaseException:
            await self._remove_unlinked(sha)
            raise

    async def _link(self, run_id: int, path: str, type_: str, size: int, sha: str, replaced: dict[str, Any] | None,
                    step: int | None = None, caption: str | None = None) -> dict[str, Any]:
        """Link the blob under `path` (the caller holds `_gc`, and read `replaced`, the artifact there
        now, under it); the blob it replaces goes if nothing links it any more (a file logged again each
        epoch must not keep every version)."""
        artifact = await self.tracking.link_blob(run_id, path=path, type_=type_, size=size, sha256=sha, step=step,
                                                 caption=caption)
        if replaced is not None and replaced["stored"] and replaced["sha256"] != sha:
            await self._remove_unlinked(replaced["sha256"])
        return artifact

    async def _existing(self, run_id: int, path: str) -> dict[str, Any] | None:
        """The run's artifact `path` (None: there is none), which a new one there replaces."""
        try:
            return await self.tracking.artifact(run_id, path)
        except NotFound:
            return None

    async def _replacing(self, run_id: int, path: str) -> int:
        """For a check before the lock: the bytes of the uploaded artifact a new one under `path` replaces, read
        only where there is a quota to count them against."""
        return _stored_size(await self._existing(run_id, path)) if self.limits.user_quota_bytes is not None else 0

    async def _check_limits(self, owner: str, size: int, replacing: int = 0) -> None:
        """Refuse `size` bytes over the size limit or the owner's quota; the quota counts the change: less the
        `replacing` bytes of the uploaded artifact they replace."""
        limit = self.limits.max_file_bytes
        if limit is not None and size > limit:
            raise InvalidRequest("size", f"{size:,} bytes is over the server's limit of {limit:,} bytes per artifact",
                                 "split the file, or ask the server's admin to raise [tracking] max_artifact_mb")
        quota = self.limits.user_quota_bytes
        if quota is not None:
            used = await self.tracking.stored_bytes(owner)
            if used - replacing + size > quota:
                raise InvalidRequest("size", f"{owner}'s artifacts hold {used:,} of their {quota:,} bytes; "
                                             f"{size:,} more do not fit",
                                     "delete runs you no longer need (`corral run delete`), or ask the admin to raise "
                                     "[tracking] user_artifact_quota_mb")

    # -- reads ------------------------------------------------------------------------------------

    async def listing(self, run_id: int, path: str) -> list[ListedEntry]:
        """The run's uploaded artifacts one directory level under `path` ("" its root), as a file
        system would list them (`corral.core.tracking.artifact_names.directory_level`); nothing where there
        are none.

        Raises:
            InvalidRequest: `path` is no artifact name.
        """
        if path:
            path = check_artifact_name(path)
        return directory_level(await self.tracking.uploaded(run_id, path), path)


    async def open(self, run_id: int, owner: str, path: str) -> Download:
        """The artifact `path` of the run, open for reading.

        Raises:
            NotFound: no such artifact; or a registered one whose file is gone or is not the owner's
            regular file (a directory is not served whole).
        """
        artifact = await self.tracking.artifact(run_id, path)
        if artifact["stored"]:
            sha = artifact["sha256"]
            file = await asyncio.to_thread(self.store.open, sha)
            return Download(file, int(artifact["size"] or 0), os.path.basename(path), sha)
        return await asyncio.to_thread(self._open_registered, artifact, owner)

    def _open_registered(self, artifact: dict[str, Any], owner: str) -> Download:
        path = artifact["path"]
        uid = self.uid_of(owner)
        try:
            if not os.path.isabs(path) or uid is None:
                raise PermissionError(path)
            file = open_log(path, uid)  # a regular file of the owner's, or nothing
        except OSError:
            # one answer whatever the reason (gone, a directory, a link to a file not theirs): what
            # the server may see must not tell the owner what lies in places they cannot reach
            raise NotFound(f"{path} cannot be served: it is gone from where the job wrote it, or it is not a regular "
                           "file of the run's owner's (a directory's files are downloaded where they are)") from None
        size = os.fstat(file.fileno()).st_size
        return Download(file, size, os.path.basename(path), artifact["sha256"])

    # -- deletion ---------------------------------------------------------------------------------

    async def delete_run(self, run_id: int) -> dict[str, Any]:
        """Delete the run and the blobs no other run links; what was freed. Registered files (a job's
        checkpoints) are its owner's files where the job wrote them, and stay."""
        return {"deleted": run_id, "blobs_removed_bytes": await self._drop_unlinked(await self.tracking.delete_run(run_id))}

    async def delete(self, run_id: int, path: str) -> int:
        """Delete the run's uploaded artifact `path`, or all under the directory `path` (as MLflow's
        clients delete), and the blobs no run links any more; the bytes freed. Nothing there: nothing done.

        Raises:
            InvalidRequest: `path` is no artifact name (the run's root is not deleted whole here).
        """
        return await self._drop_unlinked(await self.tracking.unlink_uploaded(run_id, check_artifact_name(path)))

    async def _drop_unlinked(self, shas: list[str]) -> int:
        freed = 0
        async with self._gc:
            for sha in shas:
                freed += await self._remove_unlinked(sha)
        return freed

    async def _remove_unlinked(self, sha: str) -> int:
        """Remove the blob if no run links it (the caller holds `_gc`); the bytes freed."""
        if await self.tracking.blob_linked(sha):
            return 0
        size = await asyncio.to_thread(self.store.size, sha) or 0
        return size if await asyncio.to_thread(self.store.remove, sha) else 0


def _write_all(writer: BlobWriter, chunks: Iterator[bytes]) -> None:
    for chunk in chunks:
        writer.write(chunk)


def _stored_size(artifact: dict[str, Any] | None) -> int:
    """The bytes an artifact holds in the store (a registered file holds none there)."""
    return int(artifact["size"] or 0) if artifact is not None and artifact["stored"] else 0
