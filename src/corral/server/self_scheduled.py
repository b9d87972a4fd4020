"""Requests that only a backend which schedules itself answers (Slurm): cancelling at the backend,
efficiency from its accounting, attaching a job submitted to it without corral.

Each function asks the backend's capability objects (`corral.backends.base`). The local backend has none
of them: efficiency and attach refuse it with a Conflict, and its cancels are `corral.server.cancelling`'s.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from corral.backends.base import ClusterQueue
from corral.core.job import Job
from corral.core.spec import build_spec
from corral.core.states import JobState
from corral.errors import Conflict
from corral.server.job_table import CANCELLED_BY_USER

if TYPE_CHECKING:
    from corral.server.service import JobService


async def cancel_at_backend(service: JobService, ref: str, queue: ClusterQueue) -> Job:
    """Cancel a job at the backend (which writes the job's line); one that has not reached it ends at once."""
    job = service.resolve(ref)
    if job.state.is_terminal():
        raise Conflict(f"job {job.id} already ended ({job.state.value}); there is nothing to cancel")
    if job.backend_id is not None:
        if job.is_array and "_" in ref:
            queue.cancel_task(job, int(ref.partition("_")[2]))
        else:
            service.backend.cancel(job)
        if job.is_array and "_" not in ref:
            job.reason = CANCELLED_BY_USER
            service.table.cancelled_arrays.add(job.id)
        service.poll_soon()
    if job.state is JobState.PENDING and not job.is_array:
        job.state, job.end_time, job.reason = JobState.CANCELLED, service.clock(), CANCELLED_BY_USER
        service.store.save_state(job)
        service.table.backend_reasons.pop(job.id, None)
        service.forget(job)
        return job
    return await service.wait(job.id if "_" not in ref else ref, 5.0)


def efficiency(service: JobService, ref: str) -> dict[str, Any]:
    """CPU and memory efficiency of a job, from the backend's accounting.

    Raises:
        Conflict: the job has not run yet, accounting has no record of it, or this backend keeps none.
    """
    accounting = service.backend.accounting
    if accounting is None:
        raise Conflict("this server's backend keeps no accounting; the monitor reports efficiency from samples")
    job = service.resolve(ref)
    if job.backend_id is None or job.state is JobState.PENDING:
        raise Conflict(f"job {job.id} has not run yet; efficiency is known once it runs")
    return accounting.efficiency(job)


def attach(service: JobService, backend_id: str) -> Job:
    """Track a job submitted to the backend without corral: its state, its logs, the runs it logs.

    Raises:
        Conflict: this backend runs no such jobs; InvalidRequest: not a job id of the backend;
        NotFound: the backend does not know it.
    """
    foreign = service.backend.foreign_jobs
    if foreign is None:
        raise Conflict("this server runs jobs itself; attaching Slurm jobs needs `corral up --backend slurm`")
    backend_id = str(backend_id).strip()
    foreign.check_id(backend_id)
    for job in service.active.values():
        if job.backend_id == backend_id:
            return service.table.current(job)
    request = foreign.describe(backend_id)
    partition = request.pop("partition", "")
    settings = service.settings
    spec = replace(build_spec(request, user=settings.user, log_dir=settings.log_dir, default_workdir="/",
                              server_env=settings.server_env, can_enter=os.path.isdir),
                   inherit_env=False, env={}, partition=partition, qos="")
    (job,) = service.store.insert([spec], service.clock())
    job.backend_id = backend_id
    service.store.save_state(job)
    service.table.track(job)
    service.table.queue.pop(job.id, None)  # the backend runs it; corral never submits it
    service.poll_soon()
    return job
