"""The on-disk spool: what a run could not send (offline, or the server unreachable) waits here.

    <spool>/<uid>/lock                  flock-ed by the process writing the run, for as long as it runs
    <spool>/<uid>/run.json              {"request": <the create request>, "created": <time>}
    <spool>/<uid>/batches/00000001.json one record per file, in the order the run made them
    <spool>/<uid>/finish.json           {"state", "end_time"}, once the run has finished
    <spool>/<uid>/files/<sha256>        a copy of each file to upload as an artifact (one per content)

A record is `{"kind": "metrics", "batch": {...}, "points": N, "last_step": S}`, `{"kind": "params",
"params": {...}}`, `{"kind": "tags", "add": [...], "remove": [...]}`, `{"kind": "artifacts",
"artifacts": [...]}` (registered) or `{"kind": "upload", "source": <the copy in files/>, "name", "type", "size",
"sha256"}`. Every file is written whole (tmp, fsync, rename), so a crash leaves the old
state or the new one. Records are uploaded in order and deleted once acknowledged; each is
idempotent on the server (metric batches by `batch_id`, artifacts by path, params and tags by
value), so a record sent twice after a crash changes nothing (`corral.sdk.posting` sends them).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Sequence
from typing import Any

from corral.home import HomeLayout, resolve_home
from corral.sdk.files import read_json, sha256_file, write_json_atomic

SPOOL_ENV = "CORRAL_SPOOL_DIR"
RUN_FILE = "run.json"
LOCK_FILE = "lock"
BATCHES = "batches"
FINISH_FILE = "finish.json"
FILES = "files"
_RECORD_NAME = re.compile(r"^(\d{8,})\.json$")


def spool_root(spool_dir: str | None = None) -> str:
    """`spool_dir`, else `$CORRAL_SPOOL_DIR`, else `<corral home>/spool`; always absolute."""
    chosen = spool_dir or os.environ.get(SPOOL_ENV) or HomeLayout(resolve_home()).spool
    return os.path.abspath(os.path.expanduser(chosen))


class SpoolLocked(Exception):
    """Another live process holds this run's spool."""


class RunSpool:
    """One run's spool directory, held under an flock by the process that writes or uploads it."""

    def __init__(self, path: str, lock_fd: int, request: dict[str, Any]) -> None:
        self.path = path
        self.request = request
        self._lock_fd: int | None = lock_fd
        self._next_seq = max((seq for seq, _ in self._records()), default=0) + 1

    @property
    def uid(self) -> str:
        return str(self.request.get("uid") or os.path.basename(self.path))

    # -- opening ----------------------------------------------------------------------------------

    @classmethod
    def create(cls, root: str, uid: str, request: dict[str, Any]) -> RunSpool:
        """Make `<root>/<uid>` (another name if a live process holds that one), lock it, record the request."""
        path = os.path.join(root, uid)
        while True:
            try:
                os.makedirs(path)
            except FileExistsError:
                try:  # left by an earlier process of this run: take it over, unless it is alive
                    fd = _lock(path, blocking=False)
                    break
                except SpoolLocked:
                    path = os.path.join(root, f"{uid}-{secrets.token_hex(4)}")
                    continue
            # lock before run.json exists: `corral sync` skips a directory without one (and lets go)
            fd = _lock(path, blocking=True)
            break
        os.makedirs(os.path.join(path, BATCHES), exist_ok=True)
        write_json_atomic(os.path.join(path, RUN_FILE), {"request": request, "created": time.time()})
        return cls(path, fd, request)

    @classmethod
    def open(cls, path: str) -> RunSpool | None:
        """Lock an existing run directory; None when it is incomplete (no run.json).

        Raises:
            SpoolLocked: a live process holds it.
        """
        try:
            fd = _lock(path, blocking=False)
        except FileNotFoundError:
            return None
        meta = read_json(os.path.join(path, RUN_FILE))
        if not isinstance(meta, dict) or not isinstance(meta.get("request"), dict):
            _unlock(fd)
            return None
        return cls(path, fd, meta["request"])

    @classmethod
    def find(cls, roots: Sequence[str], resume_key: str) -> RunSpool | None:
        """The spooled run made under `resume_key` in `roots` that no live process holds, locked; else None."""
        for path in run_dirs(*roots):
            meta = read_json(os.path.join(path, RUN_FILE))
            if not isinstance(meta, dict) or (meta.get("request") or {}).get("resume_key") != resume_key:
                continue
            try:
                spool = cls.open(path)
            except SpoolLocked:
                continue
            if spool is not None:
                return spool
        return None

    # -- writing ----------------------------------------------------------------------------------

    def write(self, record: dict[str, Any]) -> None:
        """Append one record, durably, after all those before it."""
        write_json_atomic(os.path.join(self.path, BATCHES, f"{self._next_seq:08d}.json"), record)
        self._next_seq += 1

    def keep_file(self, source: str) -> tuple[str, int, str]:
        """A copy of `source` in the spool, named by its content: (path, size, sha256). A copy, not
        a link: a script may rewrite the file in place before the run is synced."""
        directory = os.path.join(self.path, FILES)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{secrets.token_hex(8)}")
        try:
            shutil.copyfile(source, tmp)
            size, sha = sha256_file(tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            kept = os.path.join(directory, sha)
            os.replace(tmp, kept)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return kept, size, sha

    def write_finish(self, state: str, end_time: float) -> None:
        write_json_atomic(os.path.join(self.path, FINISH_FILE), {"state": state, "end_time": end_time})

    # -- reading ----------------------------------------------------------------------------------

    def pending(self) -> list[str]:
        """The record files not yet uploaded, oldest first."""
        return [path for _, path in self._records()]

    def finish_record(self) -> dict[str, Any] | None:
        return read_json(os.path.join(self.path, FINISH_FILE))

    def last_step(self) -> int | None:
        """The highest step the spooled metrics reached (None: no metric record left)."""
        for path in reversed(self.pending()):
            record = read_record(path)
            if record.get("kind") == "metrics":
                return int(record.get("last_step", -1))
        return None

    @property
    def empty(self) -> bool:
        return not self._records() and not os.path.exists(os.path.join(self.path, FINISH_FILE))

    # -- removing ---------------------------------------------------------------------------------

    @staticmethod
    def remove(path: str) -> None:
        """Drop an uploaded record (a crash before this only means it is sent again, harmlessly)."""
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def remove_finish(self) -> None:
        self.remove(os.path.join(self.path, FINISH_FILE))

    def remove_all(self) -> None:
        """Delete the run's directory (all uploaded) and let go of it."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.release()

    def release(self) -> None:
        if self._lock_fd is not None:
            _unlock(self._lock_fd)
            self._lock_fd = None

    def _records(self) -> list[tuple[int, str]]:
        directory = os.path.join(self.path, BATCHES)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        found = [(int(m.group(1)), os.path.join(directory, name)) for name in names if (m := _RECORD_NAME.match(name))]
        return sorted(found)


def run_dirs(*roots: str) -> list[str]:
    """The spooled runs under `roots`, oldest first (a requeued job's runs upload in the order they ran).

    A directory without run.json is not one: a run its process is still creating, or in a
    shared server's spool, a user's own directory of runs (which that user syncs).
    """
    dirs = []
    for root in dict.fromkeys(roots):
        try:
            names = os.listdir(root)
        except OSError:  # missing, or a shared server's spool, which its users may pass but not list
            continue
        paths = (os.path.join(root, name) for name in names)
        dirs += [path for path in paths if os.path.isfile(os.path.join(path, RUN_FILE))]

    def created(path: str) -> tuple[float, str]:
        meta = read_json(os.path.join(path, RUN_FILE))
        when = meta.get("created") if isinstance(meta, dict) else None
        return (when if isinstance(when, (int, float)) else float("inf"), path)

    return sorted(dirs, key=created)


def read_record(path: str) -> dict[str, Any]:
    with open(path, "rb") as f:
        return json.loads(f.read())


def _lock(path: str, *, blocking: bool) -> int:
    fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        raise SpoolLocked(path) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unlock(fd: int) -> None:
    os.close(fd)  # closing the descriptor drops the flock
