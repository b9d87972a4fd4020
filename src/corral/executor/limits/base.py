"""The interface every limit follows: `Limit` (its hooks), `Ending` (its verdict), `WatchedJob` (what it reads)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.executor.cgroups import JobCgroup


class Ending:
    """A limit's verdict: the state the job ends in, and how it is stopped.

    Args:
        state: its end state (`TIMEOUT`, `CANCELLED`, `PREEMPTED`, `NODE_FAIL`, `FAILED`, `OUT_OF_MEMORY`).
        why: the reason its stderr gives, as slurmstepd's (`REQUEUE`, `NODE_FAIL`), when not `state`.
        error: the server's verdict or the logs' limit, written to its stderr and result.json.
        at_once: SIGKILL at once, without a grace; otherwise SIGTERM, then SIGKILL after the grace.
        warn_first: its warning signal (sbatch's --signal) instead of the SIGTERM, if it has not gone yet.
    """

    __slots__ = ("state", "why", "error", "at_once", "warn_first")

    def __init__(self, state: str, *, why: str | None = None, error: str | None = None, at_once: bool = False,
                 warn_first: bool = False) -> None:
        self.state = state
        self.why = why
        self.error = error
        self.at_once = at_once
        self.warn_first = warn_first


class WatchedJob:
    """The job as its limits see it: its processes (`pid`, its cgroup) and the `Ending` under way, if any."""

    __slots__ = ("pid", "cgroup", "ending")

    def __init__(self, pid: int, cgroup: JobCgroup | None) -> None:
        self.pid = pid
        self.cgroup = cgroup
        self.ending: Ending | None = None


class Limit:
    """One rule of the supervisor's: hooks that do nothing until a rule overrides them."""

    # Whether `check` is still called once the job is being stopped; most rules have nothing left to do then.
    while_stopping = False

    def next_look(self, job: WatchedJob) -> float | None:
        """The monotonic time by which the supervisor must wake to look at this rule again, or None."""
        return None

    def check(self, now: float, job: WatchedJob) -> Ending | None:
        """Enforce the rule at monotonic time `now`: how the job must end, or None."""
        return None


def first_ending(limits: Sequence[Limit], now: float, job: WatchedJob) -> Ending | None:
    """Check `limits` in their order, at monotonic time `now`: the first `Ending` found, or None. Once the job is
    being stopped, only those that still look at it then (`while_stopping`) are checked."""
    for rule in limits:
        if job.ending is None or rule.while_stopping:
            ending = rule.check(now, job)
            if ending is not None:
                return ending
    return None
