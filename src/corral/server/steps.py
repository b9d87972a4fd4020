"""Job steps on the server side (`JobSteps`): the in-job `srun` opens and closes each step through the API;
a job's end cancels the steps it left running; the batch step is told by the job itself."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future

from corral.core.access.identity import Caller, scope_covers
from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState
from corral.core.jobspec.steps import JobStep, StepEnd, StepStart
from corral.errors import Conflict, Forbidden
from corral.store.steps import StepStore

log = logging.getLogger(__name__)
BUSY = "Requested nodes are busy"
"""How a refusal of a step that must wait for the job's other steps begins (Slurm's words); srun retries it."""


class JobSteps:
    def __init__(self, store: StepStore, db_thread: Executor, *, clock: Callable[[], float]) -> None:
        """`db_thread`: where a job's end is written off the loop (the service's database thread)."""
        self.store = store
        self.db_thread = db_thread
        self.clock = clock

    def open(self, job: Job, caller: Caller, start: StepStart) -> JobStep:
        """A new step of a running job, for its owner (or an admin).

        Raises:
            Forbidden: another user; Conflict: the job is not running, or its other steps hold what this
                one needs (the message begins with BUSY); InvalidRequest: more than the job holds.
        """
        _check_owner(job, caller, "start a step of")
        if job.state is not JobState.RUNNING:
            raise Conflict(f"job {job.ref} is {job.state.value}, not RUNNING: steps run inside a running job")
        step = self.store.open(job.id, start, self.clock(), job_ref=job.ref, job_cpus=job.spec.cpus,
                               job_gpus=tuple(job.gpu_ids or ()), restart=job.restarts)
        if step is None:
            raise Conflict(f"{BUSY}: job {job.ref}'s other steps hold the CPUs or GPUs this one needs "
                           "(it starts once they end; srun --overlap shares them)")
        return step

    def close(self, job: Job, caller: Caller, step_id: int, end: StepEnd) -> JobStep:
        """The step's end, as its srun saw it.

        Raises:
            Forbidden: another user; NotFound: no such step.
        """
        _check_owner(job, caller, "end a step of")
        return self.store.close(job.id, step_id, end, self.clock(), restart=job.restarts)

    def of_job(self, job: Job) -> list[JobStep]:
        return self.store.of_jobs([job.id]).get(job.id, [])

    def of_jobs(self, job_ids: Sequence[int]) -> dict[int, list[JobStep]]:
        """Many jobs' steps in one read (sacct over a day's jobs), in chunks the database binds at once."""
        out: dict[int, list[JobStep]] = {}
        for at in range(0, len(job_ids), 500):
            out.update(self.store.of_jobs(job_ids[at:at + 500]))
        return out

    def job_ended(self, job: Job) -> None:
        """An `on_job_ended` listener: the steps still running went with the job's processes."""
        self.run_ended(job, job.end_time or self.clock())

    def run_ended(self, job: Job, stopped_at: float) -> None:
        """An `on_requeue` listener (and the job's end): the run's steps still running went with its processes,
        and the next run's srun gets the job's CPUs and GPUs."""
        if job.start_time is None:
            return
        done = self.db_thread.submit(self.store.end_running, job.id, stopped_at)

        def report(finished: Future[int]) -> None:
            if finished.exception():
                log.warning("could not end the steps of job %d: %s", job.id, finished.exception())

        done.add_done_callback(report)


def _check_owner(job: Job, caller: Caller, action: str) -> None:
    if not scope_covers(caller.scope, "submit"):
        raise Forbidden(f"{action} job {job.ref}: this credential is read-only ({caller.scope} scope)")
    if caller.user != job.spec.user and not caller.is_admin:
        raise Forbidden(f"{action} job {job.ref}: only its owner ({job.spec.user}) or an admin may; "
                        f"you are {caller.user}")
