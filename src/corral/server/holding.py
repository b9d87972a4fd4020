"""Holding and releasing pending jobs (`corral hold`, `corral release`, as scontrol's): a held job keeps its
place in the queue but is never started until released. An array is held whole, with its tasks that wait
with records of their own; where the backend schedules itself, the backend holds what it already has."""

from __future__ import annotations

from collections.abc import Callable

from corral.backends.base import Backend
from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState, PendingReason
from corral.errors import Conflict
from corral.server.job_table import JobTable, pending
from corral.server.queries import JobQueries


class Holds:
    def __init__(self, backend: Backend, queries: JobQueries, *, changed: Callable[[], None]) -> None:
        """`changed`: the jobs changed (pass again, views refresh)."""
        self.backend = backend
        self.queries = queries
        self._changed = changed

    @property
    def table(self) -> JobTable:
        return self.queries.table

    def set_held(self, ref: str, held: bool) -> Job:
        """Hold (`held`) or release job `ref`, as it is named (`12`; a task `12_3` without a record: refused).

        Raises:
            Conflict: not pending, already so, a task not started, or its array is cancelled.
        """
        job = self.queries.resolve(ref)
        queue = self.backend.queue
        if queue is not None and job.backend_id is not None and job.state is JobState.PENDING and job.held != held:
            # already at the backend: it is the backend that must hold it (shown as JobHeldUser) or let it go
            queue.hold(job, held)
            self.table.backend_reasons[job.id] = PendingReason.HELD.value if held else PendingReason.NONE.value
        job_id = job.id
        self.refuse_if_cancelled(job)
        if job.is_array and "_" in ref:
            raise Conflict(f"task {ref} has not started; hold or release the whole array {job_id}")
        active = self.table.active
        if job.state is not JobState.PENDING or job.id not in active:
            raise Conflict(f"job {job_id} is {job.state.value}; only pending jobs can be held or released")
        if job.held == held:
            raise Conflict(f"job {job_id} is {'already' if held else 'not'} held")
        targets = [job]
        if job.is_array:  # and its tasks that wait with a record of their own
            targets += [active[t] for t in self.table.array_tasks.get(job.id, ())
                        if active[t].state is JobState.PENDING and active[t].held != held]
        for target in targets:
            target.held = held
        try:
            self.table.store.save_states(targets)
        except Exception:
            for target in targets:
                target.held = not held
            raise
        for target in targets:
            self.table.reservation_deleted.discard(target.id)
            if not target.is_array:
                self.table.queue[target.id] = pending(target)
            self.table.reasons.pop(target.id, None)
            if held:
                self.table.reasons[target.id] = PendingReason.HELD
        self._changed()
        return self.table.current(job)

    def refuse_if_cancelled(self, job: Job) -> None:
        """Raises Conflict for an array cancelled whose last tasks are still stopping: it is changed no more."""
        if job.id in self.table.cancelled_arrays:
            raise Conflict(f"array {job.id} is cancelled; its last tasks are stopping")
