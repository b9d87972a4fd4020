"""Requests that only a backend which schedules itself answers (Slurm): cancelling at the backend,
efficiency from its accounting, attaching a job submitted to it without corral.

Each request asks the backend's capability objects (`corral.backends.base`). The local backend has none
of them: efficiency and attach refuse it with a Conflict, and its cancels are `corral.server.cancelling`'s.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from corral.backends.base import Backend, ClusterQueue
from corral.core.jobspec.job import Job
from corral.core.jobspec.spec import build_spec
from corral.core.jobspec.states import JobState
from corral.errors import Conflict, CorralError
from corral.server.job_table import CANCELLED_BY_USER, JobTable
from corral.server.queries import JobQueries
from corral.server.settings import ServiceSettings
from corral.server.transitions import JobTransitions

if TYPE_CHECKING:
    from corral.server.cancelling import Answers, Named, Wait


CANCEL_WAIT_S = 5.0


class SelfScheduledRequests:
    def __init__(self, backend: Backend, queries: JobQueries, transitions: JobTransitions, *,
                 settings: ServiceSettings, clock: Callable[[], float], poll_soon: Callable[[], None]) -> None:
        """`settings`: whose a job attached is and where its logs go; `poll_soon`: the backend looks again now."""
        self.backend = backend
        self.queries = queries
        self.transitions = transitions
        self.settings = settings
        self.clock = clock
        self._poll_soon = poll_soon

    @property
    def table(self) -> JobTable:
        return self.queries.table

    def cancel_at_backend(self, named: Sequence[Named], queue: ClusterQueue, pending_only: bool,
                          answers: Answers) -> list[Wait]:
        """Cancel at the backend, which writes the jobs' lines (`corral.server.cancelling.Cancellations.cancel`);
        returns the refs to wait for. What has not reached it ends at once; of the rest, what corral last saw
        pending is cancelled first, so the backend cannot start it on what the running ones free. `pending_only`:
        running jobs are left running, and arrays keep their running tasks."""
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
            if job.id not in jobs and not self._cancelled_at(job, index, answers):
                continue  # pending there: it leaves the backend's queue before any running job is stopped
            jobs[job.id] = job
            answers[index] = job
        now = self.clock()
        store = self.table.store
        self.transitions.move(list(jobs.values()), JobState.CANCELLED, lambda: store.save_states(jobs.values()),
                              end_time=now, reason=CANCELLED_BY_USER, array_pending=[])
        for job in jobs.values():
            self.table.backend_reasons.pop(job.id, None)
            self.transitions.forget(job)
        waits = []
        at_backend.sort(key=lambda named: named[2].state is not JobState.PENDING)  # arrays and tasks waiting first
        for index, ref, job in at_backend:
            if job.is_array and "_" in ref:
                task_id = int(ref.partition("_")[2])
                if not self._cancelled_at(job, index, answers, lambda: queue.cancel_task(job, task_id)):
                    continue
            elif not self._cancelled_at(job, index, answers,
                                        (lambda: queue.cancel_waiting_tasks(job)) if job.is_array and pending_only
                                        else None):
                continue
            if job.is_array and "_" not in ref:
                job.reason = CANCELLED_BY_USER
                self.table.cancelled_arrays.add(job.id)
            if job.is_array and pending_only and "_" not in ref:
                answers[index] = job
            else:
                waits.append((index, str(job.id) if "_" not in ref else ref, CANCEL_WAIT_S))
        if at_backend:
            self._poll_soon()
        return waits

    def _cancelled_at(self, job: Job, index: int, answers: Answers, how: Callable[[], None] | None = None) -> bool:
        """Cancel at the backend (`how`, or the whole job); False, the error answered, if the backend refused."""
        if job.backend_id is None:
            return True
        try:
            how() if how is not None else self.backend.cancel(job)
        except CorralError as exc:
            answers[index] = exc
            return False
        return True

    def efficiency(self, ref: str) -> dict[str, Any]:
        """CPU and memory efficiency of a job, from the backend's accounting.

        Raises:
            Conflict: the job has not run yet, accounting has no record of it, or this backend keeps none.
        """
        accounting = self.backend.accounting
        if accounting is None:
            raise Conflict("this server's backend keeps no accounting; the monitor reports efficiency from samples")
        job = self.queries.resolve(ref)
        if job.backend_id is None or job.state is JobState.PENDING:
            raise Conflict(f"job {job.id} has not run yet; efficiency is known once it runs")
        return accounting.efficiency(job)

    def attach(self, backend_id: str) -> Job:
        """Track a job submitted to the backend without corral: its state, its logs, the runs it logs.

        Raises:
            Conflict: this backend runs no such jobs; InvalidRequest: not a job id of the backend;
            NotFound: the backend does not know it.
        """
        foreign = self.backend.foreign_jobs
        if foreign is None:
            raise Conflict("this server runs jobs itself; attaching Slurm jobs needs `corral up --backend slurm`")
        backend_id = str(backend_id).strip()
        foreign.check_id(backend_id)
        for job in self.table.active.values():
            if job.backend_id == backend_id:
                return self.table.current(job)
        request = foreign.describe(backend_id)
        partition = request.pop("partition", "")
        settings = self.settings
        spec = replace(build_spec(request, user=settings.user, log_dir=settings.log_dir, default_workdir="/",
                                  server_env=settings.server_env, can_enter=os.path.isdir),
                       inherit_env=False, env={}, partition=partition, qos="")
        store = self.table.store
        (job,) = store.insert([spec], self.clock())
        job.backend_id = backend_id
        store.save_state(job)
        self.table.track(job)
        self.table.queue.pop(job.id, None)  # the backend runs it; corral never submits it
        self._poll_soon()
        return job
