"""A user's share of log space, held together by the supervisors of that user's running jobs.

The per-user quota (`user_log_quota_mb`) caps what a user's running jobs write into their logs together,
however fast and however many they are. No one supervisor sees the others' jobs, and a watcher summing
file sizes now and then lets a job writing at GB/s run far past it; so each supervisor writes a byte of
its job's output only once it holds the room for it here (`corral.executor.log_relay`).

The ledger is one file per user, `<home>/log_ledgers/<user>` (`HomeLayout.log_ledger`), root's (0600 in a
0700 directory: no job can read, change or lock it), flock-ed around each change. It holds a JSON object:
each of the user's running jobs (its id) and the bytes reserved for its logs, what it wrote plus the part
of its last lease not yet written. A supervisor reserves in leases that grow as its job writes
(`reserve`), so a job writing a line a minute does one change and a job writing GB/s a few a second, and
removes its entry when its job ends (`release`). A supervisor that died cannot: the server's `LogQuota`
drops the entries of jobs whose supervisor is gone (`drop_dead`), so nothing leaks.

Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable

LEDGER_MODE = 0o600


class LogLedger:
    """One job's side of its owner's ledger: the open file, and the job's key in it."""

    def __init__(self, fd: int, key: str, quota_bytes: int) -> None:
        self.fd = fd
        self.key = key
        self.quota_bytes = quota_bytes

    @classmethod
    def open(cls, path: str, key: str, quota_bytes: int) -> LogLedger:
        """Open (or make) the ledger at `path`, with this process's own rights: call it as root, never as the
        job's owner, and before any thread runs (the owner's ids are worn for moments; a path then opened
        would be opened as them).

        Raises:
            OSError: it cannot be opened, or it is not a regular file of this process's user.
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, LEDGER_MODE)
        info = os.fstat(fd)
        if not (info.st_uid == os.geteuid() and info.st_mode & 0o170000 == 0o100000):
            os.close(fd)
            raise PermissionError(f"{path} is not a regular file of uid {os.geteuid()}")
        return cls(fd, key, quota_bytes)

    def reserve(self, want: int) -> int:
        """Take up to `want` more bytes for this job's logs; what was granted (0: the user's quota is used up)."""
        with _locked(self.fd):
            entries = read_entries(self.fd)
            held = sum(entries.values())
            grant = max(0, min(want, self.quota_bytes - held))
            if grant:
                entries[self.key] = entries.get(self.key, 0) + grant
                write_entries(self.fd, entries)
            return grant

    def used(self) -> int:
        """The bytes the user's running jobs hold, this one's included."""
        with _locked(self.fd):
            return sum(read_entries(self.fd).values())

    def release(self) -> None:
        """This job's logs no longer count: it ended (or never wrote). Closes the ledger."""
        try:
            with _locked(self.fd):
                entries = read_entries(self.fd)
                if entries.pop(self.key, None) is not None:
                    write_entries(self.fd, entries)
        finally:
            os.close(self.fd)


def drop_dead(path: str, alive: Callable[[str], bool]) -> list[str]:
    """Remove from the ledger at `path` the jobs for which `alive(key)` is false (their supervisor is gone
    without releasing); the keys removed.

    `alive` is asked under the ledger's lock: a supervisor holds its job's lock before it reserves, so a
    job found without one cannot add to its entry meanwhile."""
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with _locked(fd):
            entries = read_entries(fd)
            dead = [key for key in entries if not alive(key)]
            if dead:
                write_entries(fd, {k: v for k, v in entries.items() if k not in dead})
            return dead
    finally:
        os.close(fd)


def read_entries(fd: int) -> dict[str, int]:
    """The ledger's entries (an unreadable ledger reads as empty: the server's next look rebuilds nothing
    it needs, and the supervisors' next reservations fill it again)."""
    size = os.fstat(fd).st_size
    text = os.pread(fd, size, 0) if size else b""
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): int(v) for k, v in data.items() if isinstance(v, int) and v >= 0}


def write_entries(fd: int, entries: dict[str, int]) -> None:
    """Write the entries over the old ones: padded to the old length first, so that a writer killed before it
    truncates leaves trailing blanks, which JSON reads past, never a torn object."""
    text = json.dumps(entries, separators=(",", ":")).encode()
    old = os.fstat(fd).st_size
    os.pwrite(fd, text.ljust(old), 0)
    if old > len(text):
        os.ftruncate(fd, len(text))


class _locked:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
