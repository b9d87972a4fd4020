"""`LogLimits`: a job whose logs reached their limits (max_log_mb, log_reserve_mb, its owner's quota) fails."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.executor.limits.base import Ending, Limit, WatchedJob

if TYPE_CHECKING:
    from corral.executor.log_relay import JobLogs


class LogLimits(Limit):
    """Killed without a grace: a runaway log would fill the disk meanwhile."""

    def __init__(self, logs: JobLogs | None) -> None:
        self.logs = logs

    def check(self, now: float, job: WatchedJob) -> Ending | None:
        stopped = self.logs.stopped if self.logs else None
        return Ending("FAILED", error=stopped, at_once=True) if stopped else None
