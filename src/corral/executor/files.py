"""Atomic JSON files and the layout of a job's directory (shared by the server and the supervisor).

A job directory holds:
    launch.json   what to run (written by the server before the supervisor starts)
    lock          flock-ed by the supervisor for as long as it lives
    started.json  the job's pid and start time (written by the supervisor after fork)
    cancel        present once a cancel was asked for
    preempt       present once the scheduler preempted it (it will be queued again)
    fail          the reason the server stopped it (a user's log quota): it ends FAILED
    result.json   the outcome, written by the supervisor as its last act
    result.reserved  its space, set aside before the job starts: an outcome is recordable on a full disk
    script        the batch script, for script jobs
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Iterable
from typing import BinaryIO

from corral.atomic import read_json, reserve, write_json_atomic, write_json_reserved

LAUNCH = "launch.json"
LOCK = "lock"
STARTED = "started.json"
CANCEL = "cancel"
PREEMPT = "preempt"
REQUEUE = "requeue"  # what the PREEMPT mark holds for `scontrol requeue`: SIGTERM, never the warning signal
REQUEUE_NODE_FAIL = "requeue node_fail"  # and for a job requeued because its GPU failed
RESULT = "result.json"
RESULT_RESERVED = "result.reserved"
RESULT_RESERVE_BYTES = 64 * 1024  # an outcome is a few hundred bytes; its error message is bounded below that
FAIL = "fail"
NODE_FAIL = "node_fail"  # the server's: the job's GPU failed (corral.core.monitoring.gpu_health); it ends NODE_FAIL
SCRIPT = "script"
SUPERVISOR_LOG = "supervisor.log"
TERMINAL = "terminal.sock"  # an interactive job's (corral.executor.terminal)
__all__ = ["read_json", "reserve", "write_json_atomic", "write_json_reserved"]  # and the layout above; the writing itself is corral.atomic's


def open_log(path: str, owner_uid: int | None = None) -> BinaryIO:
    """Open a job's log for the server to read: a regular file, owned by `owner_uid` when given.

    The path is the job's to choose and the server reads with its own rights: a FIFO would hang
    the reader, /dev/zero would never end, and a link to someone else's file would hand it over.

    Raises:
        FileNotFoundError: no log yet. PermissionError: not a regular file, or not the owner's.
    """
    # O_PATH opens nothing (no device's open() runs: a watchdog or a tape would act on it); only a
    # regular file of the owner's is then opened for reading, through that very descriptor.
    handle = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise PermissionError(f"{path} is not a regular file")
        if owner_uid is not None and info.st_uid != owner_uid:
            raise PermissionError(f"{path} does not belong to the job's owner")
        fd = os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(handle)
    return os.fdopen(fd, "rb")


def process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot: with the pid, it names one process for good."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name may hold spaces and parentheses; fields resume after the last ')'
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[19])


def lock_held(path: str) -> bool:
    """True while some process holds an flock on `path` (a supervisor its job's, a server its home's)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases the lock if we took it
    return False


def boot_id() -> str | None:
    """Changes at every boot: with a pid's start ticks, it tells a process from a later one with its pid."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def session_members(sid: int) -> list[int]:
    """Pids of live processes in session `sid` (a job and everything it started)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != b"Z":
            members.append(int(entry))
    return members


def session_rss_mb(sid: int) -> float:
    """Resident memory of every process in the session, summed (what Slurm's jobacct_gather counts)."""
    return pids_rss_mb(session_members(sid))


def pids_rss_mb(pids: list[int]) -> float:
    """Resident memory of these processes, summed."""
    page_mb = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total * page_mb


def total_size(paths: Iterable[str]) -> int:
    """The bytes in `paths` together (a job's logs); a file that is not there counts 0."""
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_size
        except OSError:
            pass
    return total


def drain(fd: int) -> None:
    """Empty a non-blocking wake-up pipe (what woke the select is known; the bytes say nothing)."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def lock_within(fd: int, wait_s: float) -> bool:
    """Take `fd`'s exclusive flock, waiting at most `wait_s`; whether it was taken."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
