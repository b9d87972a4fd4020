"""The line a job's stderr gets when it is stopped, in Slurm's words (slurmstepd's `req.c` and `mgr.c`).

A person (or a script) reading a job's log finds why it ended where Slurm users look for it, and tools
that grep for Slurm's lines recognise them. Slurm names no one in its cancel line; corral adds
` BY <user>` before the closing `***` when it knows who cancelled.

Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import os
import stat
import time

PREFIX = "slurmstepd: error: "
TIME_LIMIT = " DUE TO TIME LIMIT"
PREEMPTION = " DUE TO PREEMPTION"
REQUEUE = " DUE TO JOB REQUEUE"
NODE_FAILURE = " DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS"


def cancelled_line(job: str, node: str, at: float, why: str = "", by: str | None = None) -> str:
    """`*** JOB 12 ON node CANCELLED AT 2026-11-24T07:12:03 DUE TO TIME LIMIT ***` (local time, as Slurm's).

    Args:
        why: one of TIME_LIMIT, PREEMPTION, REQUEUE, NODE_FAILURE; empty for a cancel.
        by: who cancelled (a cancel only).
    """
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(at))
    by = "".join(c for c in by or "" if c.isprintable() and not c.isspace())[:64]  # one line, whoever it names
    who = f" BY {by}" if by and not why else ""
    return f"{PREFIX}*** JOB {job} ON {node} CANCELLED AT {when}{why}{who} ***"


def oom_line(job: str, kills: int) -> str:
    """Slurm's note of the kernel's OOM kills in the job's batch step."""
    events = "event" if kills == 1 else "events"
    return (f"{PREFIX}Detected {kills} oom_kill {events} in StepId={job}.batch. "
            "Some of the step tasks have been OOM Killed.")


def append_as_root(path: str, owner_uid: int | None, line: str) -> bool:
    """Append `line` to a job's log from a process that may be root and is not its owner (the server,
    when the job's supervisor is gone): never through a symbolic link, never creating the file, never
    blocking on a FIFO, and only to a regular file its owner owns (a hostile owner may have swapped
    the log for a link, or a hard link, to /etc/shadow). Returns whether it was written."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return False
        if owner_uid is not None and info.st_uid != owner_uid:
            return False
        if owner_uid is None and info.st_uid != os.geteuid():
            return False
        os.write(fd, (line + "\n").encode())
        return True
    except OSError:  # a full disk: the note is lost, the job's end is recorded all the same
        return False
    finally:
        os.close(fd)
