"""Durable file writes and content hashes, shared by the spool and the checkpoints."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from corral import atomic
from corral.atomic import fsync_dir, write_json_atomic

__all__ = ["directory_size", "fsync_dir", "read_json", "sha256_file", "write_json_atomic", "HashingWriter"]

CHUNK = 1 << 20


def read_json(path: str) -> Any | None:
    """The file's JSON, or None when it is missing or not JSON (a spool record cut short by a crash)."""
    try:
        return atomic.read_json(path)
    except ValueError:
        return None


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
