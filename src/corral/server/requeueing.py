"""`scontrol requeue` / `requeuehold` (`corral requeue`) of jobs that corral schedules itself.

As Slurm's for a batch job: a running job is stopped and waits again (the path a preemption takes: the
supervisor stops it, its end comes back PREEMPTED and `SchedulingPass.requeue` queues it with its restart
count up one); an ended one waits again at once. `hold` leaves it held (requeuehold).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from corral.core.jobspec.events import REQUEUED, JobEvent, requeued_detail
from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState, PendingReason
from corral.errors import Conflict
from corral.server.job_table import reset_to_pending

if TYPE_CHECKING:
    from corral.server.service import JobService

REQUEUE_WAIT_S = 3.0


async def requeue(service: JobService, ref: str, by: str | None, hold: bool) -> Job:
    """Queue job `ref` again: stop it first if it runs; `hold`: held once pending. `by`: who asked.

    Raises:
        Conflict: the job is pending, an array (requeue its tasks), interactive, or the backend schedules itself.
    """
    job = service.resolve(ref)
    if service.backend.queue is not None:
        raise Conflict(f"job {ref} is scheduled by the cluster; requeue it there (scontrol requeue "
                       f"{job.backend_id or ref})")
    if job.is_array:
        raise Conflict(f"job {ref} is an array; requeue its tasks one by one ({job.id}_N)")
    if job.spec.interactive is not None:  # Slurm requeues batch jobs only: its client would have no terminal
        raise Conflict(f"job {ref} is interactive (srun, salloc); only batch jobs can be requeued")
    if job.state is JobState.PENDING:
        raise Conflict(f"job {ref} is pending; only running or ended jobs can be requeued (Job is pending execution)")
    if job.array_job_id is not None and job.state.is_terminal():
        raise Conflict(f"task {ref} has ended; corral requeues array tasks only while they run")
    if job.state.is_terminal():
        return _requeue_ended(service, job, by, hold)
    assert service.placed is not None
    if hold and not job.held:
        job.held = True  # kept through the stop: it waits held
        service.store.save_state(job)
    service.placed.requeue(job, by)
    service.mark_dirty()
    return await _until_pending(service, job.id)


def _requeue_ended(service: JobService, job: Job, by: str | None, hold: bool) -> Job:
    now = service.clock()
    saved = (job.state, job.restarts, job.reason, job.start_time, job.end_time, job.node, job.gpu_ids, job.exit_code,
             job.signal, job.held)
    reset_to_pending(job)
    job.end_time, job.held = None, hold
    try:
        detail = requeued_detail(saved[7], saved[8], state=saved[0].value, ended=saved[4], by=by)
        service.store.save_state(job, [JobEvent(job.id, now, REQUEUED, detail)])
    except Exception:
        (job.state, job.restarts, job.reason, job.start_time, job.end_time, job.node, job.gpu_ids, job.exit_code,
         job.signal, job.held) = saved
        raise
    service.table.track(job)
    if hold:
        service.table.reasons[job.id] = PendingReason.HELD
    service.mark_dirty()
    return service.table.current(job)


async def _until_pending(service: JobService, job_id: int) -> Job:
    """The job once it waits again (or as it is after a few seconds: the stop may take its grace period)."""
    deadline = time.monotonic() + REQUEUE_WAIT_S
    while time.monotonic() < deadline:
        job = service.get(job_id)
        if job.state is not JobState.RUNNING:
            return job
        await asyncio.sleep(0.05)
    return service.get(job_id)
