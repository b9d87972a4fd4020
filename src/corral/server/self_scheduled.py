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
from corral.core.jobspec.job import Job
from corral.core.jobspec.spec import build_spec
from corral.core.jobspec.states import JobState
from corral.errors import Conflict, CorralError
from corral.server.job_table import CANCELLED_BY_USER

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from corral.server.cancelling import Answers, Named
    from corral.server.service import JobService


CANCEL_WAIT_S = 5.0


def cancel_at_backend(service: JobService, named: Sequence[Named], queue: ClusterQueue, pending_only: bool,
                      answers: Answers) -> list[tuple[int, str, float]]:
    """Cancel at the backend, which writes the jobs' lines (`corral.server.cancelling.cancel_jobs`); returns
    the refs to wait for. What has not reached it ends at once; of the rest, what corral last saw pending is
    cancelled first, so the backend cannot start it on what the running ones free. `pending_only`: running
    jobs are left running, and arrays keep their running tasks."""
    settled, at_backend = [], []
    for index, ref, job in named:
        if job.state.is_terminal():
            answers[index] = Conflict(f"job {job.id} already ended ({job.state.value}); there is nothing to cancel")
        elif job.is_array and "_" in ref and job.backend_id is None:
            answers[index] = Conflict(f"task {ref} is not at the cluster yet: cancel the whole array {job.id}, or "
                                      "this task once the array is queued there")
        elif job.state is JobState.PENDING and not job.is_array:
            settled.append((index, job))
        elif job.backend_id is None:  # an array not handed over yet: none of its tasks has started
            settled.append((index, job))
        elif pending_only and not job.is_array:
            answers[index] = Conflict(f"job {ref} is {job.state.value}; this cancel is of pending jobs only")
        else:
            at_backend.append((index, ref, job))
    jobs: dict[int, Job] = {}
    for index, job in settled:
        if job.id not in jobs and not _cancelled_at(service, job, index, answers):
            continue  # pending there: it leaves the backend's queue before any running job is stopped
        jobs[job.id] = job
        answers[index] = job
    now = service.clock()
    saved = [(job, job.state, job.end_time, job.reason, job.array_pending) for job in jobs.values()]
    for job in jobs.values():
        job.state, job.end_time, job.reason, job.array_pending = JobState.CANCELLED, now, CANCELLED_BY_USER, []
    try:
        service.store.save_states(jobs.values())
    except Exception:
        for job, state, end_time, reason, array_pending in saved:
            job.state, job.end_time, job.reason, job.array_pending = state, end_time, reason, array_pending
        raise
    for job in jobs.values():
        service.table.backend_reasons.pop(job.id, None)
        service.forget(job)
    waits = []
    at_backend.sort(key=lambda named: named[2].state is not JobState.PENDING)  # arrays and tasks waiting first
    for index, ref, job in at_backend:
        if job.is_array and "_" in ref:
            task_id = int(ref.partition("_")[2])
            if not _cancelled_at(service, job, index, answers, lambda: queue.cancel_task(job, task_id)):
                continue
        elif not _cancelled_at(service, job, index, answers,
                               (lambda: queue.cancel_waiting_tasks(job)) if job.is_array and pending_only else None):
            continue
        if job.is_array and "_" not in ref:
            job.reason = CANCELLED_BY_USER
            service.table.cancelled_arrays.add(job.id)
        if job.is_array and pending_only and "_" not in ref:
            answers[index] = job
        else:
            waits.append((index, str(job.id) if "_" not in ref else ref, CANCEL_WAIT_S))
    if at_backend:
        service.poll_soon()
    return waits


def _cancelled_at(service: JobService, job: Job, index: int, answers: Answers,
                  how: Callable[[], None] | None = None) -> bool:
    """Cancel at the backend (`how`, or the whole job); False, the error answered, if the backend refused."""
    if job.backend_id is None:
        return True
    try:
        how() if how is not None else service.backend.cancel(job)
    except CorralError as exc:
        answers[index] = exc
        return False
    return True


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
