"""The time limit: `TimeLimit` (TIMEOUT at the deadline) and `TimeLimitNotice` (an interactive job's user told
before it comes; a batch job has --signal, `warning.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.executor.limits.base import Ending, Limit, WatchedJob

if TYPE_CHECKING:
    from corral.executor.terminal import Terminal


class TimeLimit(Limit):
    """TIMEOUT once the monotonic `deadline` (None: no time limit) has come."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline

    def next_look(self, job: WatchedJob) -> float | None:
        return self.deadline if job.ending is None else None

    def check(self, now: float, job: WatchedJob) -> Ending | None:
        return Ending("TIMEOUT") if self.deadline is not None and now >= self.deadline else None


class TimeLimitNotice(Limit):
    """srun's warning on the job's terminal, a minute (or a fifth of its time limit) before the limit."""

    while_stopping = True  # a job that is being stopped may still reach its time limit within its grace

    def __init__(self, deadline: float | None, limit_s: float | None, terminal: Terminal | None,
                 job_ref: str) -> None:
        self.deadline = deadline
        self.terminal = terminal
        self.job_ref = job_ref
        self.at = deadline - min(60.0, 0.2 * float(limit_s or 0)) if deadline and terminal is not None else None

    def next_look(self, job: WatchedJob) -> float | None:
        return self.at

    def check(self, now: float, job: WatchedJob) -> Ending | None:
        if self.at is not None and now >= self.at and self.terminal is not None:
            left = max(0, round((self.deadline or now) - now))
            self.terminal.notice(f"srun: warning: job {self.job_ref} reaches its time limit in {left} s")
            self.at = None
        return None
