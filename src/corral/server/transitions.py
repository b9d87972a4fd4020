"""The job service's state machine (`JobTransitions`): the one part that sets a job's state.

A change of state is set on the job in memory and recorded in the store, with the events that explain it, in
one transaction (`move`); where that transaction fails the job is put back as it was, so that memory never
holds what the store does not. A job that ended is let go of (`forget`): the table drops it, its GPUs are
freed and charged to its user, and whoever waits for it hears of it; an array ends with its last task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from corral.core.jobspec.arrays import array_state
from corral.core.jobspec.job import Job, Outcome
from corral.core.jobspec.states import JobState, PendingReason
from corral.server.job_table import CANCELLED_BY_USER, JobTable, apply_outcome
from corral.server.job_watchers import JobWatchers
from corral.server.scheduling import SchedulingPass
from corral.store.jobs import JobStore

R = TypeVar("R")


class JobTransitions:
    def __init__(self, table: JobTable, scheduling: SchedulingPass, watchers: JobWatchers, *,
                 clock: Callable[[], float]) -> None:
        """`scheduling`: whose allocations an ended job frees and whose ledger it is charged to; `watchers`:
        who is told of every change and of each end."""
        self.table = table
        self.scheduling = scheduling
        self.watchers = watchers
        self.clock = clock

    @property
    def store(self) -> JobStore:
        return self.table.store

    def set(self, job: Job, to: JobState, **fields: Any) -> None:
        """Put `job` in state `to`, with `fields` (the job's own attributes) changed with it; the caller
        records it (recovery, in one transaction for all it settles)."""
        job.state = to
        for name, value in fields.items():
            # a list (the waiting tasks) is each job's own, as if each had been given a fresh one
            setattr(job, name, list(value) if isinstance(value, list) else value)

    def move(self, jobs: Sequence[Job], to: JobState, record: Callable[[], R], **fields: Any) -> R:
        """Put `jobs` in state `to` with `fields`, and record that with `record` (one transaction).

        Returns:
            what `record` returned.
        Raises:
            what `record` raised, the jobs put back as they were.
        """
        before = [(job, {name: getattr(job, name) for name in ("state", *fields)}) for job in jobs]
        for job in jobs:
            self.set(job, to, **fields)
        try:
            return record()
        except Exception:
            for job, values in before:
                for name, value in values.items():
                    setattr(job, name, value)
            raise

    def ended_as(self, job: Job, outcome: Outcome) -> None:
        """Record how a job ended on it, as its supervisor or the backend said (the caller records it)."""
        apply_outcome(job, outcome)

    def end(self, job: Job, state: JobState, at: float, reason: str) -> None:
        """End a job that never started (a pass's: past its deadline, its dependency never met), and let it go."""
        self.set(job, state, end_time=at, reason=reason)
        self.store.save_state(job)
        self.forget(job)

    def remove_past_deadline(self, now: float) -> None:
        """Pending jobs that could no longer end by their --deadline end so (state DEADLINE), as in Slurm."""
        late = [job_id for job_id, waiting in self.table.queue.items() if waiting.misses_deadline(now)]
        for job_id in late:
            self.end(self.table.active[job_id], JobState.DEADLINE, now, PendingReason.DEADLINE.value)

    def check_dependencies(self) -> dict[int, PendingReason]:
        """Jobs that must wait for others, with their reason (`JobTable.waiting_on_dependencies`); cancels
        those that asked for it when a dependency can no longer hold."""
        waiting, never = self.table.waiting_on_dependencies()
        for job in never:
            self.end(job, JobState.CANCELLED, self.clock(), PendingReason.DEPENDENCY_NEVER)
            waiting.pop(job.id)
        return waiting

    def finish_array_if_done(self, array_id: int) -> None:
        """An array ends when its last task does (`corral.core.jobspec.arrays.array_state` says how)."""
        array = self.table.arrays.get(array_id)
        if array is None or array.array_pending or self.table.array_tasks.get(array_id):
            return
        cancelled = array_id in self.table.cancelled_arrays
        self.set(array, array_state(self.store.task_states(array_id), cancelled=cancelled),
                 end_time=self.clock(), reason=CANCELLED_BY_USER if cancelled else None)
        self.store.save_state(array)
        self.table.cancelled_arrays.discard(array_id)
        self.forget(array)

    def forget(self, job: Job) -> None:
        """Let go of a job that ended (or was cancelled before it ran): its GPUs are freed and charged."""
        self.watchers.changed()
        self.table.untrack(job)
        scheduling = self.scheduling
        allocation = scheduling.running.release(job.id)
        if allocation is not None and job.start_time is not None and job.end_time is not None:
            scheduling.ledger.charge(job.spec.user, scheduling.charge(allocation, job.end_time - job.start_time),
                                     job.end_time)
        scheduling.factors.pop(job.id, None)
        self.watchers.let_go(job)
        if job.array_job_id is not None:
            self.finish_array_if_done(job.array_job_id)
