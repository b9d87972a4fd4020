"""When a job is expected to end, and on what grounds: its start plus its time limit, or, for a running job,
its tracked run's ETA where that comes sooner.

The limit is a bound the job cannot pass; the ETA is a guess from the run's recent pace. Which one a time
came from is part of the answer (`ExpectedEnd.source`), so a user knows how far to trust it. The ETA comes
from the monitor, which core does not know: callers pass its moment in (`eta_end`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple

from corral.core.jobspec.states import JobState

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job

Source = Literal["time_limit", "eta"]


class ExpectedEnd(NamedTuple):
    time: float
    """Epoch seconds."""
    source: Source
    """"time_limit": its start (a pending job's estimated start) plus its time limit; "eta": its tracked
    run's estimate, from the steps left and its recent rate."""


def expected_end(job: Job, eta_end: float | None = None) -> ExpectedEnd | None:
    """When `job` should end, as Slurm's EndTime reads for jobs that have not ended, but sooner where the job's
    training says so.

    Args:
        eta_end: when the job's tracked run expects to finish (epoch seconds), if it reports its progress;
            it counts for a running job only.

    Returns:
        A running job: start + limit, or `eta_end` where sooner (or where it has no limit). A pending job
        with an estimated start and a limit: estimated start + limit (as `squeue --start` reckons it).
        None for any other job: ended, or with nothing to reckon from.
    """
    limit = job.spec.time_limit_s
    if job.state is JobState.RUNNING:
        by_limit = job.start_time + limit if job.start_time is not None and limit is not None else None
        if eta_end is not None and (by_limit is None or eta_end < by_limit):
            return ExpectedEnd(eta_end, "eta")
        return None if by_limit is None else ExpectedEnd(by_limit, "time_limit")
    if job.state is JobState.PENDING and job.estimated_start is not None and limit is not None:
        return ExpectedEnd(job.estimated_start + limit, "time_limit")
    return None
