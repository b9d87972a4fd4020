"""Durable JSON files: what the server, the supervisors and the SDK write must survive a crash.

Standard library only: the supervisor and training processes import it.
"""

from __future__ import annotations

import json
import os
from typing import Any


def write_json_atomic(path: str, data: Any, mode: int = 0o644) -> None:
    """Write a tmp file beside `path`, fsync, rename, fsync the directory: readers see the old
    file or the whole new one, and after a crash the new one is on disk."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.tmp.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, json.dumps(data, separators=(",", ":")).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)


def reserve(path: str, size: int) -> None:
    """Allocate `size` bytes on disk for a file written later, when the disk may be full.

    Raises:
        OSError: there is no room now (ENOSPC): better to know before the work starts.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_reserved(path: str, data: Any, reserved: str) -> None:
    """Write `path` through the space `reserve` set aside at `reserved`: it needs no new block, so it
    succeeds on a full disk; readers still see no file or the whole one. Without a reservation it is
    `write_json_atomic`."""
    body = json.dumps(data, separators=(",", ":")).encode()
    try:
        fd = os.open(reserved, os.O_WRONLY)
    except FileNotFoundError:
        write_json_atomic(path, data)
        return
    try:
        if len(body) > os.fstat(fd).st_size:
            raise OSError(f"{len(body)} bytes do not fit the {os.fstat(fd).st_size} reserved at {reserved}")
        os.pwrite(fd, body, 0)
        os.ftruncate(fd, len(body))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(reserved, path)
    fsync_dir(os.path.dirname(path))


def read_json(path: str) -> Any | None:
    """The file's JSON, or None when there is no such file.

    Raises:
        ValueError: the file is not JSON (only a writer bypassing write_json_atomic leaves one).
    """
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (FileNotFoundError, NotADirectoryError):
        return None


def fsync_dir(directory: str) -> None:
    """Make a rename or unlink in `directory` durable."""
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
