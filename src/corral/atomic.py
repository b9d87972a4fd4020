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
