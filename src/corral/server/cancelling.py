"""Cancelling jobs: one request names one job or many (`corral cancel 14 15 16`, `scancel -u ana`), arrays,
their tasks; none of the jobs it names starts because of it.

A request is settled in two steps with nothing in between (no await, so no scheduling pass): first every
job it names that has not started ends CANCELLED, in one transaction (its pending jobs, the waiting tasks of
its arrays, and the tasks it names that have no record yet, which get one, cancelled), and only then are its
running jobs told to stop, so the resources they free never go to a job the same request cancels. Running
jobs are waited for briefly. Where the backend schedules itself, the backend cancels
(`corral.server.self_scheduled.SelfScheduledRequests.cancel_at_backend`), pending jobs first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from corral.backends.base import Backend, ClusterQueue
from corral.core.jobspec.events import CANCELLED, JobEvent
from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState
from corral.errors import Conflict, CorralError
from corral.server.job_table import CANCELLED_BY_USER, JobTable
from corral.server.placed import PlacedJobs
from corral.server.queries import JobQueries
from corral.server.transitions import JobTransitions

CANCEL_WAIT_S = 3.0

Named = tuple[int, str, Job]
"""A job a request names: where in the request, the ref it was named by, the job (an array, for a task
without a record)."""
Answers = list["Job | CorralError | None"]
Check = Callable[[Job, str], None]
"""Raises (Forbidden) unless the caller may cancel the job named by the ref."""
Wait = tuple[int, str, float]
"""A ref to wait for, once cancelled: where in the request, the ref, how long."""


class CancelsAtBackend(Protocol):
    """Where the backend schedules itself, what cancels there (`corral.server.self_scheduled`)."""

    def cancel_at_backend(self, named: Sequence[Named], queue: ClusterQueue, pending_only: bool,
                          answers: Answers) -> list[Wait]: ...


class Cancellations:
    def __init__(self, backend: Backend, queries: JobQueries, transitions: JobTransitions, *,
                 at_backend: CancelsAtBackend, placed: PlacedJobs | None, clock: Callable[[], float],
                 wait: Callable[[str, float], Awaitable[Job]], changed: Callable[[], None]) -> None:
        """`at_backend`: cancels where the backend schedules itself (it has a queue); else `placed`, the jobs
        corral placed, are stopped; `wait`: a job once it ended (or as it is after some seconds); `changed`:
        the jobs changed."""
        self.queries = queries
        self.transitions = transitions
        self.backend = backend
        self.at_backend = at_backend
        self.placed = placed
        self.clock = clock
        self._wait = wait
        self._changed = changed

    @property
    def table(self) -> JobTable:
        return self.queries.table

    async def cancel(self, refs: Sequence[str], by: str | None, *, pending_only: bool = False,
                     check: Check | None = None) -> list[Job | CorralError]:
        """Cancel what each ref names: a job, an array (all its tasks), a task `12_3`. Pending jobs end at once;
        running ones are asked to stop (`pending_only`: are left running) and waited for briefly. `by`: who
        cancels (its log and timeline say); `check`: whether they may, job by job.

        Returns, ref by ref: the job as it is afterwards, or the error that ref met (the others go on)."""
        answers: Answers = [None] * len(refs)
        named = self._named(refs, check, answers)
        late = [job.id for _, _, job in named if job.id not in self.table.active and not job.state.is_terminal()]
        if late:  # committed a moment ago, not yet in memory: look again once they are, as all is now
            for job_id in late:
                await self._tracked(job_id)
            answers = [None] * len(refs)
            named = self._named(refs, check, answers)
        queue = self.backend.queue
        if queue is not None:
            waits = self.at_backend.cancel_at_backend(named, queue, pending_only, answers)
        else:
            waits = self._cancel_here(named, by, pending_only, answers)
        try:
            ended = await asyncio.gather(*(self._ended(ref, timeout) for _, ref, timeout in waits))
        finally:
            self._changed()
        for (index, _, _), job in zip(waits, ended):
            answers[index] = job
        done = [answer for answer in answers if answer is not None]
        assert len(done) == len(refs), "every ref is answered"
        return done

    def _named(self, refs: Sequence[str], check: Check | None, answers: Answers) -> list[Named]:
        named = []
        for index, ref in enumerate(refs):
            try:
                job = self.queries.resolve(ref)
                if check is not None:
                    check(job, ref)
            except CorralError as exc:
                answers[index] = exc
                continue
            named.append((index, ref, job))
        return named

    async def _tracked(self, job_id: int) -> Job:
        """The job once the table holds it (its submit's commit is being applied), or as it is after 10 s."""
        deadline = time.monotonic() + 10
        while job_id not in self.table.active and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        return self.queries.get(job_id)

    async def _ended(self, ref: str, timeout: float) -> Job | CorralError:
        try:
            return await self._wait(ref, timeout)
        except CorralError as exc:
            return exc

    def _cancel_here(self, named: Sequence[Named], by: str | None, pending_only: bool,
                     answers: Answers) -> list[Wait]:
        """Cancel on a backend corral schedules onto; returns the refs to wait for. No await in here: no pass
        runs until the named jobs that have not started are cancelled."""
        plan = _Cancel()
        later: list[tuple[int, Job, int | None]] = []  # answered once settled: (where, job, a task without a record)
        waits: list[Wait] = []
        for index, ref, job in named:
            if job.is_array and "_" in ref:
                task_id = int(ref.partition("_")[2])
                tasks = plan.unstarted.setdefault(job.id, (job, []))[1]
                if task_id not in tasks:
                    tasks.append(task_id)
                later.append((index, job, task_id))
            elif job.state.is_terminal():
                answers[index] = Conflict(f"job {job.id} already ended ({job.state.value}); there is nothing to cancel")
            elif job.is_array:
                plan.arrays[job.id] = job
                for task in self.table.tasks_of(job.id):
                    if task.state is JobState.PENDING:
                        plan.waiting[task.id] = task
                    elif not pending_only:
                        plan.running[task.id] = task
                if pending_only:
                    later.append((index, job, None))
                else:
                    waits.append((index, str(job.id), CANCEL_WAIT_S))
            elif job.state is JobState.PENDING:
                plan.waiting[job.id] = job
                later.append((index, job, None))
            elif pending_only:
                answers[index] = Conflict(f"job {ref} is {job.state.value}; this cancel is of pending jobs only")
            else:
                plan.running[job.id] = job
                waits.append((index, str(job.id), CANCEL_WAIT_S))
        for array_id in plan.arrays:
            plan.unstarted.pop(array_id, None)  # the whole array is cancelled: its tasks never get records
        records = self._settle(plan, by)
        for index, job, task_number in later:
            answers[index] = records.get((job.id, task_number), job) if task_number is not None else job
        for job in plan.running.values():
            assert self.placed is not None
            self.placed.stop(job, by)
        return waits

    def _settle(self, plan: _Cancel, by: str | None) -> dict[tuple[int, int | None], Job]:
        """End what has not started, in one transaction; returns the records made for unstarted tasks, by
        (array id, task id)."""
        now = self.clock()
        waiting, arrays = list(plan.waiting.values()), list(plan.arrays.values())
        unstarted = list(plan.unstarted.values())
        if not (waiting or arrays or unstarted):
            return {}
        pending_lists = [(array, array.array_pending, array.reason) for array in [*arrays, *(a for a, _ in unstarted)]]
        for array in arrays:
            array.array_pending, array.reason = [], CANCELLED_BY_USER
        for array, task_ids in unstarted:
            taken = set(task_ids)
            array.array_pending = [t for t in array.array_pending if t not in taken]
        store = self.table.store
        try:
            records = self.transitions.move(waiting, JobState.CANCELLED, lambda: store.save_cancels(
                [*waiting, *arrays, *(array for array, _ in unstarted)],
                [(array, replace(array.spec, dependency=None, kill_on_invalid_dep=False), task_ids)
                 for array, task_ids in unstarted],
                (now, CANCELLED_BY_USER), lambda jobs: _cancel_events([job for job in jobs if not job.is_array], by)),
                end_time=now, reason=CANCELLED_BY_USER)
        except Exception:
            for array, array_pending, reason in pending_lists:
                array.array_pending, array.reason = array_pending, reason
            raise
        self.table.cancelled_arrays.update(plan.arrays)
        for job in waiting:
            self.transitions.forget(job)
        for array in [*arrays, *(a for a, _ in unstarted)]:
            self.transitions.finish_array_if_done(array.id)
        return {(record.array_job_id or 0, record.array_task_id): record for record in records}


@dataclass
class _Cancel:
    """What one request cancels here, sorted out before any of it is done (by job id: a job named twice,
    or as an array's task and with its array, is cancelled once)."""

    waiting: dict[int, Job] = field(default_factory=dict)  # pending jobs and tasks with a record: they end now
    arrays: dict[int, Job] = field(default_factory=dict)  # their tasks without a record never get one
    unstarted: dict[int, tuple[Job, list[int]]] = field(default_factory=dict)  # array id -> tasks named, no record
    running: dict[int, Job] = field(default_factory=dict)  # told to stop once the rest is settled


def _cancel_events(jobs: Sequence[Job], by: str | None) -> list[JobEvent]:
    return [JobEvent(job.id, job.end_time or 0.0, CANCELLED, {"by_user": by}) for job in jobs] if by else []
