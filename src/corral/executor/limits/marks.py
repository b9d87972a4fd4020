"""The server's marks in a job's directory, each a `Limit`: `PreemptMark`, `FailMark`, `NodeFailMark`, and
`Cancel` (the cancel mark, or a cancel by signal or from the job's terminal); `read_reason`, what a mark says."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.executor import files
from corral.executor.limits.base import Ending, Limit, WatchedJob

if TYPE_CHECKING:
    from corral.executor.warning_signal import WarningSignal


class PreemptMark(Limit):
    """Preempted (or requeued: the mark's reason says `REQUEUE`, or `NODE_FAIL` for a failed GPU's requeue)."""

    def __init__(self, job_dir: str, warning: WarningSignal) -> None:
        self.path = os.path.join(job_dir, files.PREEMPT)
        self.warning = warning

    def check(self, now: float, job: WatchedJob) -> Ending | None:
        if not os.path.exists(self.path):
            return None
        why = {files.REQUEUE: "REQUEUE", files.REQUEUE_NODE_FAIL: "NODE_FAIL"}.get(read_reason(self.path, ""))
        # a preemption warns, once; a requeue does not
        return Ending("PREEMPTED", why=why, warn_first=self.warning.pending and why is None)


class FailMark(Limit):
    """The server's verdict: no grace, as for a runaway log."""

    def __init__(self, job_dir: str) -> None:
        self.path = os.path.join(job_dir, files.FAIL)

    def check(self, now: float, job: WatchedJob) -> Ending | None:
        if not os.path.exists(self.path):
            return None
        return Ending("FAILED", error=read_reason(self.path), at_once=True)


class NodeFailMark(Limit):
    """Its GPU failed: stopped as a cancel is, its stderr saying so as Slurm's."""

    def __init__(self, job_dir: str) -> None:
        self.path = os.path.join(job_dir, files.NODE_FAIL)

    def check(self, now: float, job: WatchedJob) -> Ending | None:
        return Ending("NODE_FAIL") if os.path.exists(self.path) else None


class Cancel(Limit):
    """Cancelled: the server's mark, or `requested` (SIGTERM, SIGINT or SIGHUP to the supervisor, a terminal's
    client gone for good)."""

    def __init__(self, job_dir: str, requested: Callable[[], bool]) -> None:
        self.path = os.path.join(job_dir, files.CANCEL)
        self.requested = requested

    def check(self, now: float, job: WatchedJob) -> Ending | None:
        return Ending("CANCELLED") if self.requested() or os.path.exists(self.path) else None


def read_reason(path: str, default: str = "stopped by the server") -> str:
    try:
        with open(path, "rb") as f:
            return f.read(2000).decode(errors="replace").strip() or default
    except OSError:
        return default
