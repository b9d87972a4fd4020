"""What happened to a job, in order: its timeline.

The job's row holds only its latest run (a requeued job's start time is its newest start), so what
would be lost on each requeue is kept as events, written in the same transaction as the change of
state they explain: each start, each preemption (when it was asked, and for which job), each
requeue (when the job was stopped and waited again), who cancelled it, and who ran it again. Its submission and its
end are the job's own fields; `timeline` puts the two together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral.core.units.iso_times import iso_utc

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job

STARTED = "started"
"""It started; `detail["node"]` where, `detail["priority"]` its priority then (the one it keeps while it runs)."""
PREEMPTED = "preempted"
"""The scheduler told the job to make room; `detail["by_job"]` names the job it made room for."""
REQUEUED = "requeued"
"""The job stopped (preempted, requeued, or its start could not be kept) and waits again; `detail["by_user"]`
names who requeued it, and how the run's batch shell ended is its `signal`, else its `exit_code` (with the
`state` it had ended in and when, `ended`, for a job requeued once it had ended): what sacct -D shows of the run."""
CANCELLED = "cancelled"
"""Someone cancelled it; `detail["by_user"]` names them."""
GPU_OVER_BUDGET = "gpu_over_budget"  # (the column holds 16 characters)
"""A sharing job's processes held more GPU memory than its budget (`corral.core.scheduling.sharing`): `detail["action"]` is
"warned" or "stopped", with `used_mb`, `budget_mb` and the `reason`."""
RUN_AGAIN = "run_again"
"""The job is another run again (`corral resubmit`, the dashboard's "Run again"), as that job's owner:
`detail["by_user"]` names who asked (an admin, for another user's job), `detail["of_job"]` the job."""
STORED_KINDS = (STARTED, PREEMPTED, REQUEUED, CANCELLED, GPU_OVER_BUDGET, RUN_AGAIN)


@dataclass(frozen=True, slots=True)
class JobEvent:
    job_id: int
    time: float
    kind: str
    detail: Mapping[str, Any] = field(default_factory=dict)


def requeued_detail(exit_code: int | None, signal: int | None, *, state: str | None = None,
                    ended: float | None = None, by: str | None = None) -> dict[str, Any]:
    """A `requeued` event's detail: who asked, and how the run ended (see REQUEUED; `ended`: when, for a job
    requeued once it had ended)."""
    detail: dict[str, Any] = {"by_user": by} if by else {}
    if signal:
        detail["signal"] = signal
    elif exit_code is not None:
        detail["exit_code"] = exit_code
    if state:
        detail["state"] = state
    if ended is not None:
        detail["ended"] = iso_utc(ended, milliseconds=True)
    return detail


def timeline(job: Job, stored: Sequence[JobEvent]) -> list[dict[str, Any]]:
    """The job's events as the API shows them, oldest first: submitted, the stored ones, and its end.

    A job recorded before events were kept has no stored start: its start time stands in for one.
    """
    events = [{"time": iso_utc(job.submit_time, milliseconds=True), "kind": "submitted"}]
    ordered = sorted(stored, key=lambda e: e.time)
    if job.start_time is not None and not any(e.kind == STARTED for e in ordered):
        ordered.append(JobEvent(job.id, job.start_time, STARTED, {"node": job.node} if job.node else {}))
        ordered.sort(key=lambda e: e.time)
    events += [{"time": iso_utc(e.time, milliseconds=True), "kind": e.kind, **dict(e.detail)} for e in ordered]
    if job.state.is_terminal() and job.end_time is not None:
        events.append({"time": iso_utc(job.end_time, milliseconds=True), "kind": "ended", "state": job.state.value})
    return events


def started_priority(job: Job, stored: Sequence[JobEvent]) -> int | None:
    """The priority a job that started had then, from its latest started event (its own where it knows it)."""
    if job.priority is not None or job.start_time is None:
        return job.priority
    starts = [e for e in stored if e.kind == STARTED and isinstance(e.detail.get("priority"), int)]
    return max(starts, key=lambda e: e.time).detail["priority"] if starts else None
