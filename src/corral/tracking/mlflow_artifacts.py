"""The files behind MLflow's artifact proxy (`/api/2.0/mlflow-artifacts/artifacts/...`).

A run's `artifact_uri` is `mlflow-artifacts:/<experiment>/<run>/artifacts`, so the mlflow client
sends every artifact through the server: `PUT` a file, `GET` it back, `GET ?path=` a listing. The
routes (`api.mlflow_routes`) check the run's owner; this module only keeps the files, behind a small
interface (`ArtifactFiles`) so that corral's shared artifact store can take its place later:
`RunArtifactFiles` keeps each run's files under `<root>/<run uid>/` (the home's
`artifacts/mlflow`), written to a temporary file and renamed (a reader never sees half a file),
streamed in and out, and at most `max_bytes` each.

Paths are checked here, whatever the caller did: relative, no `..`, `.`, empty or hidden-temporary
parts, no NUL or backslash; and nothing under a run's directory is a link (the server makes every
entry itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import stat
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from corral.errors import CorralError, InvalidRequest, NotFound

DEFAULT_MAX_BYTES = 64 << 20  # the API's body limit (api.limits): one request, one file
_TEMP_PREFIX = ".corral-upload-"
_UID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class TooLarge(CorralError):
    status = 413
    code = "too_large"


@dataclass(frozen=True)
class FileEntry:
    path: str  # its name within the directory listed
    is_dir: bool
    size: int | None


class ArtifactFiles(Protocol):
    """Where the MLflow routes keep a run's files (`run` is the run's uid, `path` relative to its root)."""

    async def put(self, run: str, path: str, chunks: AsyncIterator[bytes]) -> int: ...

    def open(self, run: str, path: str) -> str: ...

    def list(self, run: str, path: str) -> list[FileEntry]: ...

    def delete(self, run: str, path: str) -> None: ...


def check_path(path: str, *, allow_root: bool = False) -> list[str]:
    """The parts of a relative artifact path.

    Raises:
        InvalidRequest: an absolute path, `..`, `.`, empty parts, NUL or backslashes.
    """
    if path in ("", "/") and allow_root:
        return []
    parts = path.split("/")
    if (path.startswith("/") or "\x00" in path or "\\" in path or len(path) > 4096
            or any(p in ("", ".", "..") or p.startswith(_TEMP_PREFIX) for p in parts)):
        raise InvalidRequest("path", f"{path[:200]!r} is not an artifact path", "a relative path without '..'")
    return parts


def artifact_target(path: str) -> tuple[str, str]:
    """(run uid, path within the run's artifacts) of `<experiment>/<run uid>/artifacts[/<path>]`, the
    form of every run's `artifact_uri` (`corral.tracking.mlflow_compat`).

    Raises:
        InvalidRequest: another form.
    """
    parts = path.split("/")
    if len(parts) < 3 or not parts[0].isascii() or not parts[0].isdigit() or parts[2] != "artifacts" \
            or not _UID.fullmatch(parts[1]):
        raise InvalidRequest("path", f"{path[:200]!r} is not under a run's artifacts",
                             "use the run's artifact_uri: <experiment>/<run id>/artifacts/<path>")
    rest = "/".join(parts[3:])
    if rest:
        check_path(rest)
    return parts[1], rest


class RunArtifactFiles:
    """Each run's files under `root/<run uid>/`, kept by the server's own user."""

    def __init__(self, root: str, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes

    def _path(self, run: str, parts: list[str]) -> str:
        base = os.path.join(self.root, run)
        here = base
        for part in parts[:-1] if parts else []:  # no link anywhere on the way
            here = os.path.join(here, part)
            try:
                if stat.S_ISLNK(os.lstat(here).st_mode):
                    raise NotFound("no such artifact")
            except FileNotFoundError:
                break
        return os.path.join(base, *parts)

    async def put(self, run: str, path: str, chunks: AsyncIterator[bytes]) -> int:
        """Store the file from its chunks; its size. A file there already is replaced (MLflow's way)."""
        target = self._path(run, check_path(path))
        directory = os.path.dirname(target)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if os.path.isdir(target) and not os.path.islink(target):
            raise InvalidRequest("path", f"{path!r} is a directory of artifacts", "upload under another name")
        fd, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=directory)
        size = 0
        try:
            with os.fdopen(fd, "wb") as out:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise TooLarge(f"an artifact is at most {self.max_bytes >> 20} MiB here")
                    out.write(chunk)  # into the page cache: quick; the fsync below is not, so off the loop
                out.flush()
                await asyncio.to_thread(os.fsync, out.fileno())
            os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        return size

    def open(self, run: str, path: str) -> str:
        """The file's path, to stream; NotFound unless it is a regular file."""
        target = self._path(run, check_path(path))
        try:
            mode = os.lstat(target).st_mode
        except OSError:
            raise NotFound(f"no artifact {path!r} in run {run}") from None
        if not stat.S_ISREG(mode):
            raise NotFound(f"no artifact file {path!r} in run {run}")
        return target

    def list(self, run: str, path: str) -> list[FileEntry]:
        """A directory's entries; a file lists as itself; nothing for what does not exist (MLflow's way)."""
        parts = check_path(path, allow_root=True)
        target = self._path(run, parts)
        try:
            mode = os.lstat(target).st_mode
        except OSError:
            return []
        if stat.S_ISREG(mode):
            return [FileEntry(parts[-1], False, os.lstat(target).st_size)]
        if not stat.S_ISDIR(mode):
            return []
        out = []
        for entry in sorted(os.scandir(target), key=lambda e: e.name):
            if entry.name.startswith(_TEMP_PREFIX) or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                out.append(FileEntry(entry.name, True, None))
            elif entry.is_file(follow_symlinks=False):
                out.append(FileEntry(entry.name, False, entry.stat(follow_symlinks=False).st_size))
        return out

    def delete(self, run: str, path: str) -> None:
        target = self._path(run, check_path(path))
        try:
            if stat.S_ISREG(os.lstat(target).st_mode):
                os.unlink(target)
        except FileNotFoundError:
            pass


