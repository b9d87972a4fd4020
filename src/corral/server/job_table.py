"""The unfinished jobs in memory (`JobTable`): what a scheduling pass reads, and what a shown job's reason comes from.

Only the job service changes it, on the event loop thread; every change is in the store first.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping

from corral.core.jobspec.arrays import parse_array
from corral.core.jobspec.dependency import Dependency, Verdict, evaluate
from corral.core.jobspec.job import Job, Outcome
from corral.core.scheduling.policy import Decisions, PendingJob
from corral.core.scheduling.priority import PriorityFactors
from corral.core.jobspec.states import JobState, PendingReason
from corral.store.jobs import JobStore

CANCELLED_BY_USER = "CancelledByUser"
MAX_ENDED_STATES = 100_000  # finished dependency targets remembered (a cache: the store has them all)


class JobTable:
    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.active: dict[int, Job] = {}
        """Every unfinished job, in submit order."""
        self.queue: dict[int, PendingJob] = {}  # pending jobs (not arrays), in submit order
        self.arrays: dict[int, Job] = {}  # array jobs with tasks waiting or active
        self.array_tasks: dict[int, set[int]] = {}  # array id -> ids of its tasks not yet ended
        self.cancelled_arrays: set[int] = set()  # cancelled, waiting for their started tasks to stop
        self.dependencies: dict[int, Dependency] = {}  # pending jobs whose dependency is not yet satisfied
        self.reasons: dict[int, PendingReason] = {}  # from the last pass; read when a pending job is shown
        self.backend_reasons: dict[int, str] = {}  # what a backend that schedules itself says a job waits for
        self.reservation_deleted: set[int] = set()  # held because their reservation ended or was deleted
        self.drained_note = ""  # which GPUs are drained and why, shown after ReqNodeNotAvail
        self.planned = Decisions()  # the last pass's: expected starts (`estimates`) and where (`reserved`)
        self.factors: Mapping[int, PriorityFactors] = {}  # the last pass's priorities, set by `SchedulingPass`
        self.per_user: Counter[tuple[str, str | None]] = Counter()  # unfinished jobs by (user, QoS)
        self._ended_states: dict[int, tuple[JobState, bool]] = {}

    def track(self, job: Job, counted: bool = False) -> None:
        """Hold a job (`counted`: its user's count already includes it, as a submit counts ahead)."""
        self.active[job.id] = job
        if job.array_job_id is not None:
            self.array_tasks.setdefault(job.array_job_id, set()).add(job.id)
        elif not counted:
            self.per_user[(job.spec.user, job.spec.qos)] += 1  # an array counts once
        if job.state is not JobState.PENDING:
            return
        if job.spec.parsed_dependency is not None:
            self.dependencies[job.id] = job.spec.parsed_dependency
        if job.is_array:
            self.arrays[job.id] = job
            if job.reason == CANCELLED_BY_USER:
                self.cancelled_arrays.add(job.id)  # cancelled before a restart, its last tasks still running
        else:
            self.queue[job.id] = pending(job)

    def untrack(self, job: Job) -> None:
        """Let go of a job that ended (or was cancelled before it ran)."""
        if self.active.pop(job.id, None) is not None and job.array_job_id is None:
            self.per_user[(job.spec.user, job.spec.qos)] -= 1
        self.arrays.pop(job.id, None)
        self.queue.pop(job.id, None)
        self.dependencies.pop(job.id, None)
        self.reservation_deleted.discard(job.id)
        if self.dependencies and len(self._ended_states) < MAX_ENDED_STATES:
            self._ended_states[job.id] = (job.state, job.start_time is not None)
        if job.array_job_id is not None:
            tasks = self.array_tasks.get(job.array_job_id)
            if tasks is not None:
                tasks.discard(job.id)
                if not tasks:
                    del self.array_tasks[job.array_job_id]

    def current(self, job: Job) -> Job:
        """The job with its pending reason from the latest pass (kept aside: a pass over
        a long queue should not have to touch every job)."""
        if job.state is JobState.PENDING and self.backend_reasons.get(job.id):
            job.reason = self.backend_reasons[job.id]
        elif job.state is JobState.PENDING:
            job.reason = self.reasons.get(job.id, PendingReason.NONE)
            if job.reason == PendingReason.HELD and job.id in self.reservation_deleted:
                job.reason = PendingReason.RESERVATION_DELETED
            elif job.reason == PendingReason.NODE_NOT_AVAIL and self.drained_note:
                job.reason = f"{PendingReason.NODE_NOT_AVAIL.value}, {self.drained_note}"
            job.estimated_start = self.planned.estimates.get(job.id)
            if job.estimated_start is None and job.reason == PendingReason.BEGIN_TIME:
                job.estimated_start = job.spec.begin_time  # not before then, as squeue --start shows
            if job.is_array and job.id not in self.reasons:
                job.reason = self._array_reason(job)
            job.priority = 0 if job.held else self._priority(job)
        return job

    def _priority(self, job: Job) -> int | None:
        """A waiting job's priority from the last pass; an array's untaken tasks have their waiting tasks' (the
        same spec and submit time), or None before any has a record."""
        factors = self.factors.get(job.id)
        if factors is None and job.is_array:
            factors = next((self.factors[t] for t in sorted(self.array_tasks.get(job.id, ())) if t in self.factors),
                           None)
        return None if factors is None else factors.priority

    def _array_reason(self, array: Job) -> str:
        if array.held:
            return PendingReason.HELD
        tasks = [self.active[t] for t in self.array_tasks.get(array.id, ())]
        throttle = throttle_of(array.spec.array or "")
        if throttle and len(tasks) >= throttle:
            return "JobArrayTaskLimit"
        waiting = [t for t in tasks if t.state is JobState.PENDING]
        return self.reasons.get(waiting[0].id, PendingReason.NONE) if waiting else PendingReason.NONE

    def tasks_of(self, array_id: int) -> list[Job]:
        """An array's tasks that have records and have not ended."""
        return [self.active[t] for t in self.array_tasks.get(array_id, ())]

    def waiting_on_dependencies(self) -> tuple[dict[int, PendingReason], list[Job]]:
        """Jobs that must wait for others, with their reason, and those of them to cancel (they asked for
        it, and their dependency can no longer hold). A satisfied dependency is not checked again."""
        if not self.dependencies:
            return {}, []
        first_of: dict[tuple[str, str], int] = {}
        for job in self.active.values():
            key = (job.spec.name, job.spec.user)
            if key not in first_of:
                first_of[key] = job.id  # active is in submit order
        waiting: dict[int, PendingReason] = {}
        never: list[Job] = []
        for job_id, dependency in list(self.dependencies.items()):
            job = self.active[job_id]
            verdict = evaluate(dependency, self.state_of, first_of[(job.spec.name, job.spec.user)] == job_id)
            if verdict is Verdict.SATISFIED:
                del self.dependencies[job_id]
            elif verdict is Verdict.WAITING:
                waiting[job_id] = PendingReason.DEPENDENCY
            else:
                waiting[job_id] = PendingReason.DEPENDENCY_NEVER
                if job.spec.kill_on_invalid_dep:
                    never.append(job)
        return waiting, never

    def state_of(self, job_id: int) -> tuple[JobState, bool] | None:
        """A job's state and whether it ever started, for dependencies; None if there is no such job."""
        job = self.active.get(job_id)
        if job is not None:
            return job.state, job.start_time is not None
        cached = self._ended_states.get(job_id)
        if cached is None:
            stored = self.store.get(job_id)
            if stored is None:
                return None
            if len(self._ended_states) > MAX_ENDED_STATES:
                self._ended_states.clear()
            cached = self._ended_states[job_id] = (stored.state, stored.start_time is not None)
        return cached


@functools.lru_cache(maxsize=1024)
def throttle_of(array: str) -> int | None:
    return parse_array(array).throttle


def pending(job: Job) -> PendingJob:
    """A pending job as the scheduler reads it."""
    spec = job.spec
    return PendingJob(job.id, spec.request, spec.user, spec.partition, spec.qos, spec.time_limit_s, job.held,
                      job.submit_time, spec.nice, spec.preemptible, spec.begin_time, spec.priority, spec.time_min_s,
                      spec.deadline, spec.reservation)


def apply_outcome(job: Job, outcome: Outcome) -> None:
    """Record how a job ended on it (its record is saved by the caller)."""
    job.state = JobState(outcome.state)
    job.exit_code, job.signal, job.end_time = outcome.exit_code, outcome.signal, outcome.end_time
    job.reason = outcome.error


def reset_to_pending(job: Job) -> None:
    """A preempted job waits again, its restart count up one."""
    job.state, job.restarts, job.reason = JobState.PENDING, job.restarts + 1, None
    job.start_time, job.node, job.gpu_ids, job.exit_code, job.signal = None, None, None, None, None
