"""corral's own scheduling over the job table (`SchedulingPass`), and the jobs it placed (`RunningJobs`).

A pass orders the queue by priority (fair share from the usage ledger), gives array tasks records as
they get a chance to run, and asks the pure policy (`corral.core.scheduling.policy.schedule`) what starts and
what is preempted; the job service records and launches what it decided.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace

from corral.core.jobspec.events import CANCELLED, PREEMPTED, REQUEUED, STARTED, JobEvent, requeued_detail
from corral.core.jobspec.job import Job, Outcome
from corral.core.scheduling.policy import Decisions, PendingJob, schedule
from corral.core.scheduling.priority import PriorityFactors, charged_gpus, prioritize, usage_charge
from corral.core.scheduling.reservations import ReservationBook
from corral.core.scheduling.resources import Allocation, Node
from corral.core.scheduling.schedconfig import SchedulerConfig
from corral.core.jobspec.states import JobState
from corral.server.job_table import JobTable, pending, reset_to_pending, throttle_of
from corral.server.usage import UsageLedger
from corral.store.jobs import JobStore


class RunningJobs:
    """The jobs corral placed: their allocations, and who asked them to stop (a preemption, a cancel)."""

    def __init__(self) -> None:
        self.allocations: dict[int, Allocation] = {}
        self.preempting: set[int] = set()  # told to make room, not yet gone
        self.preempted_for: dict[int, tuple[str, float]] = {}  # those jobs -> (the job they make room for, when)
        self.cancelled_by: dict[int, str] = {}  # asked to stop -> who asked
        self.requeued_by: dict[int, str] = {}  # asked to stop and wait again (scontrol requeue) -> who asked
        self.node_failed: dict[int, str] = {}  # stopped because their GPU failed (`corral.core.monitoring.gpu_health`) -> why

    def release(self, job_id: int) -> Allocation | None:
        """The job no longer runs: its allocation (returned) and the asks to stop it go."""
        self.preempting.discard(job_id)
        self.preempted_for.pop(job_id, None)
        self.cancelled_by.pop(job_id, None)
        self.requeued_by.pop(job_id, None)
        self.node_failed.pop(job_id, None)
        return self.allocations.pop(job_id, None)

    def ending_events(self, job: Job, outcome: Outcome) -> list[JobEvent]:
        """The events that a running job's end (or requeue) writes with its new state."""
        if outcome.state == JobState.PREEMPTED.value and job.id in self.requeued_by:
            detail = requeued_detail(outcome.exit_code, outcome.signal, by=self.requeued_by[job.id])
            return [JobEvent(job.id, outcome.end_time, REQUEUED, detail)]
        if outcome.state == JobState.PREEMPTED.value:
            asked = self.preempted_for.get(job.id)
            preempted = (JobEvent(job.id, asked[1], PREEMPTED, {"by_job": asked[0]}) if asked is not None
                         else JobEvent(job.id, outcome.end_time, PREEMPTED))  # asked before a restart: for whom is lost
            return [preempted, JobEvent(job.id, outcome.end_time, REQUEUED,
                                        requeued_detail(outcome.exit_code, outcome.signal))]
        by = self.cancelled_by.get(job.id)
        if outcome.state == JobState.CANCELLED.value and by:
            return [JobEvent(job.id, outcome.end_time, CANCELLED, {"by_user": by})]
        return []


class SchedulingPass:
    def __init__(self, table: JobTable, running: RunningJobs, store: JobStore, ledger: UsageLedger, *,
                 config: SchedulerConfig, nodes: Sequence[Node], clock: Callable[[], float]) -> None:
        self.table = table
        self.running = running
        self.store = store
        self.ledger = ledger
        self.config = config
        self.nodes = tuple(nodes)
        self.clock = clock
        self._gpu_mem = {(n.name, g.index): g.mem_mb for n in self.nodes for g in n.gpus}
        self._largest_gpu_mb = max(self._gpu_mem.values(), default=0)
        self.total_gpus = sum(len(n.gpus) for n in self.nodes)
        self.total_cpus = sum(n.cpus for n in self.nodes)
        self.factors: dict[int, PriorityFactors] = {}  # pending jobs' priorities from the latest pass
        self.on_requeue: list[Callable[[Job, float], None]] = []  # told of a preempted job before it waits again
        # each node's GPUs no new job is given: drained (`corral.server.draining`) or avoided (in use outside corral)
        self.drained: Mapping[str, frozenset[int]] = {}
        # GPUs in use outside corral that no whole-GPU job is given but sharing jobs may go beside
        # (`corral.core.scheduling.sharing.shareable_beside`), and the memory held there (`corral.core.scheduling.sharing.outside_holds`)
        self.shareable: Mapping[str, frozenset[int]] = {}
        self.held_outside: Sequence[Allocation] = ()
        self.reservations: ReservationBook | None = None  # `corral.server.reserving`, set before each pass

    def decide(self, waiting: Mapping[int, object], now: float) -> Decisions:
        """What starts and what is preempted now; `waiting`: jobs held back by their dependencies."""
        self._add_array_tasks(waiting)
        ordered = self._by_priority(now, waiting)
        self._rate_preemptible(now)
        return schedule(self.nodes, self.holding(), ordered, now, self.config, self.factors, self.drained,
                        self.reservations, self.shareable)

    def holding(self, running: Collection[Allocation] | None = None) -> Collection[Allocation]:
        """What the policy counts as held: the running jobs' allocations, and memory held outside corral on GPUs
        that sharing jobs may use."""
        running = self.running.allocations.values() if running is None else running
        return [*running, *self.held_outside] if self.held_outside else running

    def start(self, starts: Sequence[Allocation], now: float,
              limits: Mapping[int, int] | None = None) -> tuple[list[Job], list[JobEvent]]:
        """Mark the decided starts RUNNING on their allocations (the caller records and launches them).
        `limits`: the jobs started with a shorter time limit (--time-min), which becomes theirs, as in Slurm.
        An exclusive job's CPUs, memory and GPUs become its node's, all of which it holds (Slurm's NumCPUs): what
        it is given (its cgroup, SLURM_CPUS_ON_NODE, CUDA_VISIBLE_DEVICES) and what every view shows are one."""
        started, events = [], []
        for allocation in starts:
            job = self.table.active[allocation.job_id]
            changed = job.spec
            if limits and job.id in limits:
                changed = replace(changed, time_limit_s=limits[job.id])
            if changed.exclusive:
                changed = replace(changed, cpus=allocation.cpus, mem_mb=allocation.mem_mb,
                                  gpus=len(allocation.gpu_ids))
            if changed != job.spec:
                job.spec = changed
                self.store.save_spec(job)
            job.state, job.reason, job.start_time = JobState.RUNNING, None, now
            job.node, job.gpu_ids = allocation.node, allocation.gpu_ids
            factors = self.factors.get(job.id)
            job.priority = None if factors is None else factors.priority  # kept while it runs, as Slurm keeps it
            self.running.allocations[job.id] = allocation
            self.table.queue.pop(job.id, None)
            started.append(job)
            detail: dict[str, object] = {"node": allocation.node}
            if job.priority is not None:
                detail["priority"] = job.priority
            events.append(JobEvent(job.id, now, STARTED, detail))
        return started, events

    def requeue(self, job: Job, stopped_at: float) -> None:
        """A preempted (or requeued) job waits again, its restart count up one; its checkpoint dir stays its own."""
        for listener in self.on_requeue:
            listener(job, stopped_at)
        allocation = self.running.release(job.id)
        if allocation is not None and job.start_time is not None:
            self.ledger.charge_interrupted(job.spec.user, self.charge(allocation, stopped_at - job.start_time),
                                           stopped_at, job.id)
        reset_to_pending(job)
        self.table.queue[job.id] = pending(job)

    def requeue_unsaved(self, jobs: Collection[Job]) -> None:
        """The database refused to record these starts: they were never launched, so they wait again."""
        for job in jobs:
            job.state, job.start_time, job.node, job.gpu_ids = JobState.PENDING, None, None, None
            self.running.allocations.pop(job.id, None)
            self.running.preempting.discard(job.id)  # a preemption asked while it launched ends with the launch
            self.running.preempted_for.pop(job.id, None)
            self.table.queue[job.id] = pending(job)
        self.table.queue = dict(sorted(self.table.queue.items()))

    def _add_array_tasks(self, waiting: Mapping[int, object]) -> None:
        """Give array tasks records of their own as they get a chance to run: as many as the free
        GPUs (or CPUs) could take now, at least one to hold the array's place, within its throttle."""
        if not self.table.arrays:
            return
        allocations = self.running.allocations.values()
        free_gpus = self.total_gpus - sum(len(a.gpu_ids) for a in allocations)
        free_cpus = self.total_cpus - sum(a.cpus for a in allocations)
        for array in list(self.table.arrays.values()):
            if not array.array_pending or array.held or array.id in waiting:
                continue
            tasks = self.table.array_tasks.setdefault(array.id, set())
            waiting_tasks = sum(1 for t in tasks if self.table.active[t].state is JobState.PENDING)
            throttle = throttle_of(array.spec.array or "")
            room = throttle - len(tasks) if throttle else len(array.array_pending)
            spec = array.spec
            fit = free_gpus // spec.gpus if spec.gpus else free_cpus // max(1, spec.cpus)
            wanted = min(len(array.array_pending), room, max(1, fit) - waiting_tasks)
            if wanted <= 0:
                continue
            task_spec = replace(spec, dependency=None, kill_on_invalid_dep=False)
            for task in self.store.add_tasks(array, task_spec, array.array_pending[:wanted]):
                self.table.track(task)

    def _rate_preemptible(self, now: float) -> None:
        """Give running preemptible jobs their priority as of now, as if they were waiting: a job
        may preempt one only if it would be ahead of it in the queue."""
        self.running.allocations.update(self.rated(now))

    def rated(self, now: float) -> dict[int, Allocation]:
        """Running preemptible jobs' allocations with their priority as of now (changing nothing)."""
        allocations, active = self.running.allocations, self.table.active
        rated = [active[i] for i, a in allocations.items() if a.preemptible and i in active]
        if not rated:
            return {}
        _, factors = prioritize(
            [pending(job) for job in rated], usage=self.usage(now), config=self.config, now=now,
            total_gpus=self.total_gpus, total_cpus=self.total_cpus,
        )
        return {job.id: replace(allocations[job.id], priority=factors[job.id].priority) for job in rated}

    def _by_priority(self, now: float, excluded: Mapping[int, object]) -> list[PendingJob]:
        queue = self.table.queue
        eligible = [p for p in queue.values() if p.job_id not in excluded] if excluded else list(queue.values())
        ordered, self.factors = prioritize(
            eligible, usage=self.usage(now), config=self.config, now=now,
            total_gpus=self.total_gpus, total_cpus=self.total_cpus,
        )
        self.table.factors = self.factors  # what a read of a waiting job shows as its priority (`JobTable.current`)
        return ordered

    def usage(self, now: float) -> dict[str, float]:
        """Each user's decayed usage in GPU-hours, running jobs included up to `now`."""
        usage = self.ledger.decayed(now)
        for job_id, allocation in self.running.allocations.items():
            job = self.table.active.get(job_id)
            if job is not None and job.start_time is not None:
                usage[allocation.user] = usage.get(allocation.user, 0.0) + self.charge(allocation, now - job.start_time)
        return usage

    def charge(self, allocation: Allocation, seconds: float) -> float:
        """What `seconds` of a job's allocation adds to its user's usage, in GPU-hours (a sharing job: its part of
        its GPU, `corral.core.scheduling.priority.charged_gpus`)."""
        gpus: float = len(allocation.gpu_ids)
        if allocation.gpu_share_mb:
            gpus = charged_gpus(1, allocation.gpu_share_mb, self.gpu_mem_mb(allocation.node, allocation.gpu_ids))
        return usage_charge(gpus, allocation.cpus, seconds)

    def gpu_mem_mb(self, node: str | None = None, gpu_ids: Sequence[int] = ()) -> int:
        """The memory of a GPU: the first of `gpu_ids` on `node`, else the largest here (a node no longer declared)."""
        for index in gpu_ids:
            found = self._gpu_mem.get((node or "", index))
            if found is not None:
                return found
        return self._largest_gpu_mb

    def ranked(self) -> list[tuple[Job, PriorityFactors]]:
        """Pending jobs with their priority factors from the latest pass, highest first."""
        active = self.table.active
        rows = [(active[i], f) for i, f in self.factors.items() if i in active and active[i].state is JobState.PENDING]
        rows.sort(key=lambda row: (-row[1].priority, row[0].id))
        return [(self.table.current(job), factors) for job, factors in rows]
