"""`scontrol requeue` / `requeuehold` (`corral requeue`) of jobs that corral schedules itself.

As Slurm's for a batch job: a running job is stopped and waits again (the path a preemption takes: the
supervisor stops it, its end comes back PREEMPTED and `SchedulingPass.requeue` queues it with its restart
count up one); an ended one waits again at once. `hold` leaves it held (requeuehold).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from corral.backends.base import Backend
from corral.core.jobspec.events import REQUEUED, JobEvent, requeued_detail
from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState, PendingReason
from corral.errors import Conflict
from corral.server.job_table import JobTable
from corral.server.placed import PlacedJobs
from corral.server.queries import JobQueries
from corral.server.transitions import JobTransitions

REQUEUE_WAIT_S = 3.0


class Requeues:
    def __init__(self, backend: Backend, queries: JobQueries, transitions: JobTransitions, *,
                 placed: PlacedJobs | None, clock: Callable[[], float], changed: Callable[[], None]) -> None:
        """`placed`: the jobs corral placed, which it stops to requeue; `changed`: the jobs changed."""
        self.queries = queries
        self.transitions = transitions
        self.placed = placed
        self.backend = backend
        self.clock = clock
        self._changed = changed

    @property
    def table(self) -> JobTable:
        return self.queries.table

    async def requeue(self, ref: str, by: str | None, hold: bool) -> Job:
        """Queue job `ref` again: stop it first if it runs; `hold`: held once pending. `by`: who asked.

        Raises:
            Conflict: the job is pending, an array (requeue its tasks), interactive, or the backend schedules itself.
        """
        job = self.queries.resolve(ref)
        if self.backend.queue is not None:
            raise Conflict(f"job {ref} is scheduled by the cluster; requeue it there (scontrol requeue "
                           f"{job.backend_id or ref})")
        if job.is_array:
            raise Conflict(f"job {ref} is an array; requeue its tasks one by one ({job.id}_N)")
        if job.spec.interactive is not None:  # Slurm requeues batch jobs only: its client would have no terminal
            raise Conflict(f"job {ref} is interactive (srun, salloc); only batch jobs can be requeued")
        if job.state is JobState.PENDING:
            raise Conflict(f"job {ref} is pending; only running or ended jobs can be requeued "
                           "(Job is pending execution)")
        if job.array_job_id is not None and job.state.is_terminal():
            raise Conflict(f"task {ref} has ended; corral requeues array tasks only while they run")
        if job.state.is_terminal():
            return self._requeue_ended(job, by, hold)
        assert self.placed is not None
        if hold and not job.held:
            job.held = True  # kept through the stop: it waits held
            self.table.store.save_state(job)
        self.placed.requeue(job, by)
        self._changed()
        return await self._until_pending(job.id)

    def _requeue_ended(self, job: Job, by: str | None, hold: bool) -> Job:
        """An ended job waits again at once, its restart count up one, its requeue (and how it had ended) on its
        timeline."""
        now = self.clock()
        event = JobEvent(job.id, now, REQUEUED,
                         requeued_detail(job.exit_code, job.signal, state=job.state.value, ended=job.end_time, by=by))
        self.transitions.move(
            [job], JobState.PENDING, lambda: self.table.store.save_state(job, [event]),
            restarts=job.restarts + 1, reason=None, start_time=None, node=None, gpu_ids=None, exit_code=None,
            signal=None, end_time=None, held=hold)
        self.table.track(job)
        if hold:
            self.table.reasons[job.id] = PendingReason.HELD
        self._changed()
        return self.table.current(job)

    async def _until_pending(self, job_id: int) -> Job:
        """The job once it waits again (or as it is after a few seconds: the stop may take its grace period)."""
        deadline = time.monotonic() + REQUEUE_WAIT_S
        while time.monotonic() < deadline:
            job = self.queries.get(job_id)
            if job.state is not JobState.RUNNING:
                return job
            await asyncio.sleep(0.05)
        return self.queries.get(job_id)
