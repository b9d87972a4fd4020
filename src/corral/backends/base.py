"""The interface every backend implements."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from corral.core.job import Job, Outcome
from corral.core.resources import Allocation


class Recovered(enum.Enum):
    RUNNING = "running"
    """Still running under its supervisor: keep tracking it."""
    ENDED = "ended"
    """Ended while the server was away: the outcome is recorded."""
    LOST = "lost"
    """Its supervisor died without recording an outcome."""
    NEVER_STARTED = "never_started"
    """The server went down between deciding to run it and launching it: queue it again."""


@dataclass(frozen=True, slots=True)
class Recovery:
    status: Recovered
    outcome: Outcome | None = None


@dataclass(frozen=True, slots=True)
class JobProcesses:
    """Where a running local job's processes are: its main process, and its cgroup's process list."""

    pid: int
    """The main process, also its session id."""
    procs_file: str | None = None
    """The job's `cgroup.procs`: every process it started, however detached; None without cgroups."""


class Backend(Protocol):
    def start(self, job: Job, allocation: Allocation) -> None:
        """Launch a job on the resources the scheduler gave it."""

    def cancel(self, job: Job, by: str | None = None) -> None:
        """Ask a running job to stop (SIGTERM, grace, SIGKILL); its outcome arrives through `poll`.
        `by`: who asked, for the job's log to say."""

    def preempt(self, job: Job) -> None:
        """Stop a running job to make room (warning signal, grace, SIGKILL); it ends PREEMPTED."""

    def poll(self, running: Iterable[Job]) -> list[tuple[Job, Outcome]]:
        """Jobs among `running` that have ended, with their outcomes."""

    def recover(self, job: Job) -> Recovery:
        """On start-up: what became of a job that was running when the server stopped."""
