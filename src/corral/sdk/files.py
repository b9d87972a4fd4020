"""Durable file writes and content hashes, shared by the spool and the checkpoints."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

CHUNK = 1 << 20


def write_json_atomic(path: str, data: Any) -> None:
    """Write to a hidden tmp file beside `path`, fsync, rename, fsync the directory.

    Readers see the old file or the whole new one, and after a crash the new one is on disk.
    """
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.tmp.{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(json.dumps(data, separators=(",", ":")).encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(directory)


def read_json(path: str) -> Any | None:
    """The file's JSON, or None when it is missing or unreadable as JSON."""
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None


def fsync_dir(directory: str) -> None:
    """Make a rename or unlink in `directory` durable."""
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def directory_size(path: str) -> int:
    """Bytes in the files under a directory (links not followed)."""
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass  # removed while we walked
    return total


def sha256_file(path: str) -> tuple[int, str]:
    """(size in bytes, sha256 hex) of a file, read in chunks (hashlib drops the GIL on big ones)."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


class HashingWriter:
    """A binary file that hashes what goes through it, so a checkpoint is not read back to be hashed."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "wb")
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._digest.update(view)
        self.size += len(view)
        return self._file.write(view)

    def flush(self) -> None:
        self._file.flush()

    def fileno(self) -> int:
        return self._file.fileno()

    def sync_and_close(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()

    def close(self) -> None:
        self._file.close()

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()
