"""The artifact store: content-addressed blobs on disk, and the resumable uploads that become them.

    <root>/blobs/ab/abcdef...      one file per distinct content, named by its sha256 (one copy
                                   however many runs link it)
    <root>/uploads/<id>.part       the bytes of an upload so far (its length is the offset to resume at)
    <root>/uploads/<id>.json       what the upload will be: {"sha256", "size", ...the caller's meta}
    <root>/tmp/                    `writer`'s blobs while they are written

Nothing here knows runs or users: the tracking service decides who may upload what and links a
blob to a run (`corral.tracking.artifacts`). Blobs are written whole (a temporary file, fsync,
rename), so a blob that exists is complete and its name is its content's hash. Every method does
blocking file I/O: call it off the event loop.

The interface other parts use (the MLflow routes included):
    writer(max_bytes) -> BlobWriter              bytes into a blob a piece at a time: write(chunk)...,
                                                 finish() -> (sha256, size)
    open(sha256) -> file                         read it (seek for ranges)
    has(sha256), size(sha256), remove(sha256)
    begin(id, sha256, size, meta) -> offset      a resumable upload: where to continue
    append(id, offset, chunks) -> offset         bytes at `offset` (anything else is a Conflict)
    upload_meta(id)                              what `begin` recorded
    sweep(now)                                   drop uploads untouched for UPLOAD_TTL_S (done by `begin`)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

from corral.atomic import fsync_dir, write_json_atomic
from corral.errors import Conflict, InvalidRequest, NotFound

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")
_READ = 1 << 20
UPLOAD_TTL_S = 7 * 86400.0  # an upload nobody continued for a week is abandoned: its bytes go
SWEEP_EVERY_S = 3600.0


class ArtifactStore:
    def __init__(self, root: str, clock: Callable[[], float] = time.time) -> None:
        self.root = os.path.abspath(root)
        self.clock = clock
        self._swept = 0.0
        for sub in ("blobs", "uploads", "tmp"):
            os.makedirs(os.path.join(self.root, sub), mode=0o700, exist_ok=True)
        os.chmod(self.root, 0o700)  # blobs are read through the API, with its checks, never directly
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    # -- blobs ------------------------------------------------------------------------------------

    def blob_path(self, sha256: str) -> str:
        if not _SHA256.match(sha256):
            raise InvalidRequest("sha256", f"{sha256!r} is not a SHA-256", "give 64 lowercase hex digits")
        return os.path.join(self.root, "blobs", sha256[:2], sha256)

    def has(self, sha256: str) -> bool:
        return os.path.isfile(self.blob_path(sha256))

    def size(self, sha256: str) -> int | None:
        try:
            return os.stat(self.blob_path(sha256)).st_size
        except FileNotFoundError:
            return None

    def open(self, sha256: str) -> BinaryIO:
        """The blob for reading (seek to serve a range).

        Raises:
            NotFound: no such blob.
        """
        try:
            return open(self.blob_path(sha256), "rb")
        except FileNotFoundError:
            raise NotFound(f"the artifact store has no blob {sha256[:12]}…") from None

    def writer(self, max_bytes: int | None = None) -> BlobWriter:
        """A blob written a piece at a time (what an async caller feeds from its request stream,
        each `write` off the event loop), installed by `finish`; `discard` drops what is unfinished."""
        return BlobWriter(self, max_bytes)

    def remove(self, sha256: str) -> bool:
        """Delete a blob (the caller knows no run links it any more); False if it was not there."""
        try:
            os.unlink(self.blob_path(sha256))
            return True
        except FileNotFoundError:
            return False

    def _install(self, tmp: str, sha256: str) -> None:
        final = self.blob_path(sha256)
        if os.path.exists(final):
            return  # the same bytes are stored: one copy
        os.makedirs(os.path.dirname(final), mode=0o700, exist_ok=True)
        os.replace(tmp, final)
        fsync_dir(os.path.dirname(final))

    # -- resumable uploads ------------------------------------------------------------------------

    def begin(self, upload_id: str, sha256: str, size: int, meta: dict[str, Any]) -> int:
        """Start the upload `upload_id`, or find it again: the offset to send from.

        An id names one (content, destination): a client that lost its connection asks again and
        continues where the bytes stopped. Beginning it with another size or hash starts it afresh.
        """
        if self.clock() - self._swept > SWEEP_EVERY_S:
            self.sweep()
        with self._lock(upload_id):
            part, info = self._upload_paths(upload_id)
            known = _read_json(info)
            if known is not None and known.get("sha256") == sha256 and known.get("size") == size and os.path.exists(part):
                return min(os.path.getsize(part), size)
            with open(part, "wb"):
                pass
            write_json_atomic(info, {**meta, "sha256": sha256, "size": size})
            return 0

    def sweep(self) -> int:
        """Drop the uploads (and `writer`'s leftovers) untouched for UPLOAD_TTL_S; how many files went."""
        now = self.clock()
        self._swept = now
        gone = 0
        for sub in ("uploads", "tmp"):
            directory = os.path.join(self.root, sub)
            for name in os.listdir(directory):
                path = os.path.join(directory, name)
                try:
                    if now - os.stat(path).st_mtime > UPLOAD_TTL_S:
                        os.unlink(path)
                        gone += 1
                except FileNotFoundError:
                    pass
        return gone

    def upload_meta(self, upload_id: str) -> dict[str, Any]:
        """What `begin` recorded for the upload.

        Raises:
            NotFound: no such upload (finished, abandoned, or never begun).
        """
        known = _read_json(self._upload_paths(upload_id)[1])
        if known is None:
            raise NotFound(f"no upload {upload_id}; begin it again (the bytes already stored are kept)")
        return known

    def append(self, upload_id: str, offset: int, chunks: Iterable[bytes]) -> tuple[int, str | None]:
        """Write `chunks` at `offset`: (the new offset, the blob's sha256 once the upload is whole).

        The last byte in, the content is checked against the hash `begin` was given and becomes a
        blob; the upload is gone then. Bytes past the declared size are refused.

        Raises:
            Conflict: `offset` is not where the upload stands (the message says where it does).
            InvalidRequest: more bytes than declared, or content whose hash is not the one declared
            (the upload starts again from 0).
        """
        with self._lock(upload_id):
            meta = self.upload_meta(upload_id)
            part, info = self._upload_paths(upload_id)
            size, sha = int(meta["size"]), str(meta["sha256"])
            current = os.path.getsize(part)
            if offset != current:
                raise Conflict(f"upload {upload_id} stands at byte {current}, not {offset}; send from {current}")
            written = current
            with open(part, "r+b") as f:
                f.seek(current)
                for chunk in chunks:
                    if written + len(chunk) > size:
                        f.truncate(current)
                        raise InvalidRequest("body", f"the upload is {size:,} bytes; these go past its end",
                                             f"send at most {size - current:,} bytes from {current}")
                    f.write(chunk)
                    written += len(chunk)
                f.flush()
                os.fsync(f.fileno())
            if written < size:
                return written, None
            if hash_file(part) != sha:
                _unlink(part)
                _unlink(info)
                raise InvalidRequest("sha256", f"the bytes received do not hash to {sha}",
                                     "the file changed while it was sent; hash it again and upload it again")
            self._install(part, sha)
            _unlink(part)
            _unlink(info)
            return written, sha

    def _upload_paths(self, upload_id: str) -> tuple[str, str]:
        if not _UPLOAD_ID.match(upload_id):
            raise InvalidRequest("upload", f"{upload_id!r} is not an upload id", "use the id `begin` answered")
        base = os.path.join(self.root, "uploads", upload_id)
        return base + ".part", base + ".json"

    def _lock(self, upload_id: str) -> threading.Lock:
        with self._guard:
            if len(self._locks) > 10_000:
                self._locks = {k: v for k, v in self._locks.items() if v.locked()}
            return self._locks.setdefault(upload_id, threading.Lock())


class BlobWriter:
    def __init__(self, store: ArtifactStore, max_bytes: int | None) -> None:
        self._store = store
        self._max = max_bytes
        self._tmp = os.path.join(store.root, "tmp", secrets.token_hex(16))
        self._file: BinaryIO | None = open(self._tmp, "wb")
        self._digest = hashlib.sha256()
        self._sealed = False
        self.size = 0

    def write(self, chunk: bytes) -> None:
        """Append bytes.

        Raises:
            InvalidRequest: past the size limit (the blob is dropped).
        """
        assert self._file is not None, "written after finish or discard"
        self.size += len(chunk)
        if self._max is not None and self.size > self._max:
            self.discard()
            raise InvalidRequest("size", f"the artifact is over the limit of {self._max:,} bytes",
                                 "ask the server's admin to raise [tracking] max_artifact_mb")
        self._digest.update(chunk)
        self._file.write(chunk)

    def seal(self) -> None:
        """Put the bytes written on disk for good (the slow part of `finish`, which a caller may do first,
        outside any lock it holds while the blob is installed)."""
        if self._sealed:
            return
        assert self._file is not None, "sealed after discard"
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        self._sealed = True

    def finish(self) -> tuple[str, int]:
        """Make the bytes written a blob (one copy, whoever wrote it first); (sha256, size)."""
        assert self._file is not None or self._sealed, "finished twice, or after discard"
        self.seal()
        self._sealed = False  # finished: the temporary file goes below
        sha = self._digest.hexdigest()
        try:
            self._store._install(self._tmp, sha)
        finally:
            _unlink(self._tmp)
        return sha, self.size

    def discard(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._sealed = False
        _unlink(self._tmp)


def hash_file(path: str) -> str:
    """The sha256 (hex) of the file's content."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_READ):
            digest.update(chunk)
    return digest.hexdigest()


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            value = json.loads(f.read())
    except (FileNotFoundError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
