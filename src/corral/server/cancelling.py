"""Cancelling jobs that corral schedules itself: a pending job, an array, one of its tasks.

A pending job ends at once; a running one is asked to stop and waited for briefly. Where the backend
schedules itself, the backend cancels (`corral.server.self_scheduled.cancel_at_backend`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from corral.core.events import CANCELLED, JobEvent
from corral.core.job import Job
from corral.core.states import JobState
from corral.errors import Conflict
from corral.server.job_table import CANCELLED_BY_USER

if TYPE_CHECKING:
    from corral.server.service import JobService

CANCEL_WAIT_S = 3.0


async def cancel(service: JobService, ref: str, by: str | None) -> Job:
    """Cancel a pending job at once; ask a running one to stop and wait briefly for it.
    An array cancels all its tasks; `12_3` cancels one. `by`: who cancels (its log and timeline say)."""
    job = service.resolve(ref)
    job_id = job.id
    if job.id not in service.active and not job.state.is_terminal():
        job = await service.tracked(job_id)  # committed a moment ago, not yet in memory
    if job.is_array and "_" in ref:
        return _cancel_waiting_task(service, job, int(ref.partition("_")[2]), by)
    if job.is_array and not job.state.is_terminal():
        return await _cancel_array(service, job, by)
    if job.state.is_terminal():
        raise Conflict(f"job {job_id} already ended ({job.state.value}); there is nothing to cancel")
    if job.state is JobState.PENDING:
        saved = (job.state, job.end_time, job.reason)
        job.state, job.end_time, job.reason = JobState.CANCELLED, service.clock(), CANCELLED_BY_USER
        try:
            service.store.save_state(job, _cancel_events([job], by))
        except Exception:
            job.state, job.end_time, job.reason = saved
            raise
        service.forget(job)
        service.mark_dirty()
        return job
    assert service.placed is not None
    service.placed.stop(job, by)
    service.mark_dirty()
    try:
        return await service.wait(job_id, CANCEL_WAIT_S)
    finally:
        service.mark_dirty()


async def _cancel_array(service: JobService, array: Job, by: str | None) -> Job:
    """Its tasks without a record never get one (the pass adds tasks only from `array_pending`,
    emptied here in the same step as the record), its waiting tasks end now, its running ones
    are told to stop; the array ends CANCELLED once they have, whatever they did."""
    saved = (array.array_pending, array.reason)
    array.array_pending, array.reason = [], CANCELLED_BY_USER
    try:
        service.store.save_state(array)
    except Exception:
        array.array_pending, array.reason = saved
        raise
    service.table.cancelled_arrays.add(array.id)
    waiting = []
    for child_id in list(service.table.array_tasks.get(array.id, ())):
        child = service.active.get(child_id)
        if child is None or child.state.is_terminal():
            continue
        if child.state is JobState.PENDING:
            waiting.append(child)
        else:
            assert service.placed is not None
            service.placed.stop(child, by)
    now = service.clock()
    for child in waiting:
        child.state, child.end_time, child.reason = JobState.CANCELLED, now, CANCELLED_BY_USER
    service.store.save_states(waiting, _cancel_events(waiting, by))
    for child in waiting:
        service.forget(child)
    service.finish_array_if_done(array.id)
    service.mark_dirty()
    return await service.wait(array.id, CANCEL_WAIT_S)


def _cancel_waiting_task(service: JobService, array: Job, task_id: int, by: str | None) -> Job:
    """A task not started yet: it gets a record of its own, cancelled."""
    spec = replace(array.spec, dependency=None, kill_on_invalid_dep=False)
    (task,) = service.store.add_tasks(array, spec, [task_id])
    task.state, task.end_time, task.reason = JobState.CANCELLED, service.clock(), CANCELLED_BY_USER
    service.store.save_state(task, _cancel_events([task], by))
    service.finish_array_if_done(array.id)
    service.mark_dirty()
    return task


def _cancel_events(jobs: Sequence[Job], by: str | None) -> list[JobEvent]:
    return [JobEvent(job.id, job.end_time or 0.0, CANCELLED, {"by_user": by}) for job in jobs] if by else []
