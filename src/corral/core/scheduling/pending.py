"""A waiting job as the scheduler sees it: what it asks for and what orders it (`corral.core.scheduling.priority` ranks
these, `corral.core.scheduling.policy.schedule` places them)."""

from __future__ import annotations

from dataclasses import dataclass

from corral.core.jobspec.request import Request


@dataclass(frozen=True, slots=True)
class PendingJob:
    job_id: int
    request: Request
    user: str = ""
    partition: str | None = None
    qos: str | None = None
    time_limit_s: int | None = None
    held: bool = False
    submit_time: float = 0.0
    nice: int = 0
    preemptible: bool = False
    begin_time: float | None = None
    """Not eligible before then (sbatch's --begin): it waits with reason BeginTime and holds no reservation."""
    priority: int | None = None
    """A priority set by an admin (sbatch's --priority), in place of the computed one."""
    time_min_s: int | None = None
    """The shortest time limit it accepts (sbatch's --time-min): backfill may start it with less than its own."""
    deadline: float | None = None
    """It must end by then (sbatch's --deadline)."""
    reservation: str | None = None
    """The reservation it runs in (sbatch's --reservation, `corral.core.scheduling.reservations`): only there."""

    def misses_deadline(self, now: float) -> bool:
        """Whether, started now, it could no longer end by its deadline (Slurm removes it then, state DEADLINE)."""
        if self.deadline is None:
            return False
        shortest = self.time_min_s or self.time_limit_s or 0
        return now + shortest > self.deadline
