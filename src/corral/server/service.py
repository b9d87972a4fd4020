"""The job service: the one place that changes job state, for every backend.

It keeps the unfinished jobs in memory (the scheduler reads them every pass) and
writes every change through to the store before acknowledging it. All of it runs
on the server's event loop thread, so changes never interleave; database calls
are short and synchronous, and submits arriving together share one transaction.

`JobService` holds the request methods and composes the parts, each given its collaborators: the job
table (`job_table`), the state machine that alone sets a job's state (`transitions`), the usage ledger
(`usage`), submits and updates (`submission`), the loop's timing (`loop`), corral's own pass and the jobs it
placed (`scheduling`, `placed`) or, where the backend schedules itself, the hand-over (`handover`) and what
only such a backend answers (`self_scheduled`). Requests with more steps are parts of their own: `cancelling`,
`requeueing`, `holding`, `relaunching`, `sweeping`, `forecasting`, `recovery` (start-up), `job_output`, the
GPUs new jobs may have (`gpu_availability`, `gpu_faults`) and reservations (`reservation_requests`). What it
was started with is one `settings.ServiceSettings`; who watches the jobs is told through `job_watchers`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from corral.backends.base import Backend, Capabilities
from corral.core.scheduling.drains import Drain
from corral.core.monitoring.gpu_health import HealthEvent, HealthFigures
from corral.core.monitoring.outside_use import OutsideProcess
from corral.core.scheduling.sharing import OverBudget
from corral.core.access.identity import AccessPolicy, Caller
from corral.core.jobspec.job import Job, JobProcesses
from corral.core.scheduling.priority import PriorityFactors
from corral.core.scheduling.reservations import Wanted
from corral.core.scheduling.resources import Allocation, Node
from corral.core.scheduling.schedconfig import SchedulerConfig
from corral.core.jobspec.steps import JobStep, step_end, step_start
from corral.errors import CorralError
from corral.server.cancelling import Cancellations
from corral.server.draining import Drains
from corral.server.gpu_availability import GpuAvailability
from corral.server.gpu_faults import GpuFaults
from corral.server.gpu_health import GpuHealth
from corral.server.reservation_requests import ReservationRequests
from corral.server.reserving import Reservations
from corral.server.outside_gpus import OutsideGpus
from corral.server.share_budgets import ShareBudgets
from corral.server.forecasting import Forecasts, SubmitForecast
from corral.server.handover import BackendHandover
from corral.server.holding import Holds
from corral.server.job_mail import JobMail
from corral.server.job_output import JobOutput
from corral.server.job_table import JobTable
from corral.server.job_watchers import JobWatchers
from corral.server.loop import SchedulingLoop
from corral.server.plan_view import plan_view
from corral.server.placed import PlacedJobs
from corral.server.queries import JobQueries
from corral.server.recovery import Recovery
from corral.server.relaunching import Relaunches
from corral.server.requeueing import Requeues
from corral.server.scheduling import RunningJobs, SchedulingPass
from corral.server.self_scheduled import SelfScheduledRequests
from corral.server.settings import ServiceSettings
from corral.server.steps import JobSteps
from corral.server.submission import Submissions
from corral.server.sweeping import Sweeps
from corral.server.transitions import JobTransitions
from corral.server.usage import UsageLedger
from corral.store.drains import DrainStore
from corral.store.reservations import ReservationStore
from corral.store.jobs import JobStore
from corral.store.steps import StepStore
from corral.store.sweeps import SweepStore
from corral.store.usage import UsageStore


class JobService:
    def __init__(
        self, *, store: JobStore, backend: Backend, nodes: Sequence[Node], settings: ServiceSettings,
        config: SchedulerConfig | None = None, clock: Callable[[], float] = time.time,
    ) -> None:
        """`settings`: what the server was started with (`corral.server.settings`)."""
        # the store, the nodes, the usage ledger and the running jobs are read through the one part
        # that holds each (the table, the pass), so that no second reference can drift from it
        self.backend = backend
        self.settings = settings
        self.user = settings.user  # the server's own user (read by the monitor and the API)
        self.clock = clock
        config = config or SchedulerConfig()
        nodes = tuple(nodes)
        self.table = JobTable(store)
        self.queries = JobQueries(self.table, store, nodes)
        ledger = UsageLedger(config.half_life_s, clock(), UsageStore(store.engine))
        self.scheduling = SchedulingPass(self.table, RunningJobs(), store, ledger, config=config, nodes=nodes,
                                         clock=clock)
        self.watchers = JobWatchers(JobMail(settings.smtp, by_backend=backend.placement is None))
        if backend.placement is not None:  # sbatch --mail-type; Slurm sends its own jobs' mail
            self.watchers.on_job_ended.append(self.watchers.mail.ended)
        self.transitions = transitions = JobTransitions(self.table, self.scheduling, self.watchers, clock=clock)
        self.handover = None if backend.queue is None else BackendHandover(
            backend.queue, self.table, store, clock=clock, forget=transitions.forget,
            finish_array=transitions.finish_array_if_done, check_dependencies=transitions.check_dependencies)
        self.submissions = Submissions(settings=settings, backend=backend, nodes=nodes, config=config, table=self.table,
                                       store=store, clock=clock, changed=self.mark_dirty)
        self.placed = None if backend.placement is None else PlacedJobs(
            backend.placement, self.table, self.scheduling, store, self.submissions.db_thread,
            clock=clock, forget=transitions.forget, changed=self.mark_dirty)
        self.output = JobOutput(backend, self.queries, server_user=settings.user)
        self.steps = JobSteps(StepStore(store.engine), self.submissions.db_thread, clock=clock)
        self.sweeps = Sweeps(SweepStore(store.engine), self.submissions, access=settings.access, clock=clock)
        self.relaunches = Relaunches(self.queries, self.submissions, self.sweeps, access=settings.access, config=config,
                                     clock=clock)
        self.forecasts = Forecasts(backend, self.submissions, self.table, self.scheduling, clock=clock)
        self.recovery = Recovery(backend, self.table, self.scheduling, transitions, clock=clock,
                                 on_job_ended=self.watchers.on_job_ended)
        self.self_scheduled = SelfScheduledRequests(backend, self.queries, transitions, settings=settings, clock=clock,
                                                    poll_soon=self.poll_soon)
        self.cancellations = Cancellations(backend, self.queries, transitions, at_backend=self.self_scheduled,
                                           placed=self.placed, clock=clock, wait=self.wait, changed=self.mark_dirty)
        self.holds = Holds(backend, self.queries, changed=self.mark_dirty)
        self.requeues = Requeues(backend, self.queries, transitions, placed=self.placed, clock=clock,
                                 changed=self.mark_dirty)
        self.watchers.on_job_ended.append(self.steps.job_ended)
        self.scheduling.on_requeue += [self.watchers.mail.requeued, self.steps.run_ended]
        self.loop = SchedulingLoop(reap=self._reap_off_loop, schedule_pass=self.schedule_pass)
        self.drains = Drains(DrainStore(store.engine), nodes, clock)
        self.reservations = Reservations(ReservationStore(store.engine), nodes, table=self.table, jobs=store,
                                         allocations=self.scheduling.running.allocations, clock=clock)
        self.submissions.check_reservation = self.reservations.check_submit
        self.reservation_requests = ReservationRequests(
            self.reservations, self.drains, scheduling=self.scheduling, capabilities=backend.capabilities,
            access=settings.access, clock=clock, changed=self.mark_dirty, jobs_changed=self.watchers.changed)
        # the machine the monitor samples: this one, where corral places jobs itself
        here = nodes[0].name if nodes and not self.capabilities.schedules_itself else None
        self.outside = OutsideGpus(here, settings.outside_processes)
        self.budgets = ShareBudgets(settings.sharing, fail=None if backend.placement is None else backend.placement.fail,
                                    store=store, db_thread=self.submissions.db_thread)
        self.health = GpuHealth(here)
        self.gpus = GpuAvailability(self.drains, self.outside, self.health,
                                    GpuFaults(here, self.drains, self.table, self.scheduling.running, self.placed),
                                    scheduling=self.scheduling, table=self.table, capabilities=backend.capabilities,
                                    access=settings.access, changed=self.mark_dirty)
        self.gpus.changed()

    @property
    def store(self) -> JobStore:
        return self.table.store

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.scheduling.nodes

    @property
    def on_job_ended(self) -> list[Callable[[Job], None]]:
        """Called with each job that ended (e.g. tracking ends the job's runs): `corral.server.job_watchers`."""
        return self.watchers.on_job_ended

    @property
    def generation(self) -> int:
        """Goes up whenever jobs change: the dashboard's live view watches it."""
        return self.watchers.generation

    @property
    def scheduler_config(self) -> SchedulerConfig:
        """The partitions, QoS and priority weights the scheduler works with."""
        return self.scheduling.config

    @property
    def capabilities(self) -> Capabilities:
        return self.backend.capabilities

    @property
    def access(self) -> AccessPolicy:
        return self.settings.access

    @property
    def active(self) -> dict[int, Job]:
        """Every unfinished job, in submit order (read on the loop)."""
        return self.table.active

    @property
    def allocations(self) -> dict[int, Allocation]:
        """Of the jobs corral placed (read by the views)."""
        return self.scheduling.running.allocations

    # -- start-up -------------------------------------------------------------------------------

    def recover(self) -> None:
        """Load unfinished jobs and settle the ones that were running when the server stopped (`corral.server.recovery`)."""
        self.recovery.recover()

    # -- requests -------------------------------------------------------------------------------

    async def submit(self, request: Mapping[str, Any], user: str | None = None, privileged: bool = True,
                     parent: int | None = None, asked_by: str | None = None) -> Job:
        """Validate, refuse what could never run, persist; the job is acknowledged once committed.

        `user`: whose it is and as whom it runs (the caller; a rerun's, the first job's owner); `privileged`: an
        admin, who may raise a job above others with a negative nice (as in Slurm); `parent`: the job it runs again,
        for `asked_by`."""
        return await self.submissions.submit(request, user or self.user, privileged, parent, asked_by)

    async def resubmit(self, ref: str, changes: Mapping[str, Any], caller: Caller, confirm_owner: object = None) -> Job:
        """Run job `ref` again as its owner, for `caller`, with changes (`corral.server.relaunching`)."""
        return await self.relaunches.resubmit(ref, changes, caller, confirm_owner)

    async def submit_sweep(self, body: Mapping[str, Any], caller: Caller) -> tuple[Job, dict[str, Any]]:
        """Submit a sweep as one job array (`corral.server.sweeping`)."""
        return await self.sweeps.submit(body, caller)

    async def sweep(self, ref: str) -> tuple[Job, dict[str, Any], list[Job]]:
        """A sweep: its array job, its definition, and its tasks that have records."""
        job = self.resolve(ref)
        definition = await asyncio.to_thread(self.sweeps.get, job.id)
        _, tasks = self.array_tasks(job.id)
        return job, definition, tasks

    async def forecast(self, request: Mapping[str, Any], user: str | None = None,
                       privileged: bool = True) -> SubmitForecast:
        """When the job `request` describes would start if submitted now, without submitting it
        (`corral.server.forecasting`): built and admitted as `submit` would, refused the same way."""
        return await self.forecasts.forecast(request, user or self.user, privileged)

    def update(self, ref: str, changes: Mapping[str, Any], privileged: bool = True) -> Job:
        """Change a pending job's limits, priority or resources (`corral update`).

        Raises:
            InvalidRequest: a bad change; Conflict: the job is not pending.
        """
        job = self.resolve(ref)
        self.holds.refuse_if_cancelled(job)
        return self.submissions.update(job, ref, changes, privileged)

    def close(self) -> None:
        """Let an insert in flight finish (its submitters are owed an answer), and the launches handed over."""
        self.backend.close()
        if self.placed is not None:
            self.placed.close()
        self.submissions.close()
        self.watchers.mail.close()

    def resolve(self, ref: str) -> Job:
        """A job by its id (`12`) or an array task by `12_3` (`corral.server.queries`)."""
        return self.queries.resolve(ref)

    def get(self, job_id: int) -> Job:
        return self.queries.get(job_id)

    def array_tasks(self, job_id: int) -> tuple[Job, list[Job]]:
        return self.queries.array_tasks(job_id)

    def job_info(self, job_id: int) -> dict[str, Any] | None:
        return self.queries.job_info(job_id)

    def job_named(self, ref: str) -> int | None:
        """The corral job `ref` names: a Slurm backend id, else a corral id (`JobQueries.job_named`)."""
        return self.queries.job_named(ref)

    def list_active(self, *, states: Sequence[str] = (), limit: int = 10_000, after_id: int = 0,
                    name: str | None = None) -> list[Job]:
        return self.queries.list_active(states=states, limit=limit, after_id=after_id, name=name)

    def list_finished(self, *, states: Sequence[str] = (), limit: int = 100, before_id: int | None = None,
                      name: str | None = None, ended_after: float | None = None, by_start: bool = False) -> list[Job]:
        return self.queries.list_finished(states=states, limit=limit, before_id=before_id, name=name,
                                          ended_after=ended_after, by_start=by_start)

    async def cancel(self, refs: Sequence[str], caller: Caller, pending_only: bool = False) -> list[Job | CorralError]:
        """Cancel jobs (`12`), arrays, tasks (`12_3`) as one request of `caller`, who may cancel each; none starts on
        what the running ones free (`corral.server.cancelling`). Returns the job or the error, ref by ref."""
        def check(job: Job, ref: str) -> None:
            self.access.check_manage(caller, job.spec.user, job.spec.account, f"cancelling job {ref}")

        self.access.require(caller, "submit", f"cancelling job {refs[0]}" if len(refs) == 1 else "cancelling jobs")
        return await self.cancellations.cancel(refs, caller.user, pending_only=pending_only, check=check)

    def terminal(self, ref: str, user: str, admin: bool) -> str:
        """Where the client of interactive job `ref` (srun, salloc) connects (`corral.server.job_output`)."""
        return self.output.terminal(ref, user, admin)

    async def requeue(self, ref: str | int, by: str | None = None, hold: bool = False) -> Job:
        """Queue a running or ended job again, as Slurm's requeue (`corral.server.requeueing`); `hold`: held."""
        return await self.requeues.requeue(str(ref), by, hold)

    def hold(self, ref: str | int) -> Job:
        """Keep a pending job (or an array's waiting tasks) from starting until it is released."""
        return self.holds.set_held(str(ref), True)

    def release(self, ref: str | int) -> Job:
        return self.holds.set_held(str(ref), False)

    async def wait(self, ref: str | int, timeout: float) -> Job:
        """The job once it has ended, or as it is after `timeout` seconds."""
        job = self.resolve(str(ref))
        if job.state.is_terminal() or timeout <= 0:
            return job
        return await self.watchers.wait_for_end(job.id, timeout, self.get)

    # -- steps: what srun runs inside a job (corral.server.steps) ----------------------------------

    async def open_step(self, ref: str, caller: Caller, body: Mapping[str, Any]) -> JobStep:
        """A new step of a running job (its srun starting), for its owner or an admin."""
        start = step_start(body)
        job = self.resolve(ref)
        return await asyncio.to_thread(self.steps.open, job, caller, start)

    async def close_step(self, ref: str, step_id: int, caller: Caller, body: Mapping[str, Any]) -> JobStep:
        """A step's end (its srun ending): state, exit code, what its tasks used."""
        end = step_end(body)
        job = self.resolve(ref)
        return await asyncio.to_thread(self.steps.close, job, caller, step_id, end)

    async def steps_of(self, job_ids: Sequence[int]) -> dict[int, list[JobStep]]:
        """The srun steps of each job named, in order (those with none are left out)."""
        return await asyncio.to_thread(self.steps.of_jobs, job_ids)

    async def job_steps(self, ref: str) -> tuple[Job, list[JobStep]]:
        """The job and its srun steps, in order (its batch step is the job itself)."""
        job = self.resolve(ref)
        return job, await asyncio.to_thread(self.steps.of_job, job)

    # -- what the monitor reads (monitor.jobs.JobReader) ----------------------------------------------

    def active_jobs(self) -> Iterable[Job]:
        """Every job not yet ended, as it is now (a view: read it on the event loop, at once)."""
        return self.active.values()

    def is_admin(self, user: str) -> bool:
        return self.access.scope_of(user) == "admin"

    def checkpoint_dir(self, job_id: int) -> str:
        return self.settings.checkpoint_dir(job_id)

    def job_processes(self, job_id: int) -> JobProcesses | None:
        """The running job's process and cgroup to sample (None: this backend samples nothing)."""
        processes = self.backend.processes
        return processes.job_processes(job_id) if processes is not None else None

    def final_usage(self, job_id: int) -> dict[str, float] | None:
        """The kernel's count of an ended job's CPU time and peak memory (None: this backend keeps none)."""
        processes = self.backend.processes
        return processes.final_usage(job_id) if processes is not None else None

    def log_owner_uid(self, job: Job) -> int | None:
        """Whose a job's log files must be for the server to show them (None: its own user's job, no check)."""
        return self.output.owner_uid(job)

    def read_log(self, ref: str, stream: str, offset: int, limit: int, tail: int | None) -> tuple[bytes, int, Job]:
        """A chunk of a job's stdout or stderr from `offset` (or its last `tail` lines); returns the next offset."""
        return self.output.read_log(ref, stream, offset, limit, tail)

    def plan_view(self) -> dict[str, Any]:
        """Each GPU's timeline: running jobs to their time limits, reservations of pending ones (`corral.server.plan_view`)."""
        return plan_view(self.nodes, self.allocations, self.active, self.table.planned.estimates, self.table.planned.reserved,
                         self.clock(), self.reservations.all())

    def nodes_view(self) -> list[dict[str, Any]]:
        """Each node, its GPUs, who holds them, what is drained and what is in use outside corral
        (`corral.server.nodes_view`)."""
        return self.gpus.nodes_view(self.allocations.values(), self.active, isolation=self.settings.isolation,
                                    allocates=not self.capabilities.schedules_itself,
                                    shards_per_gpu=self.settings.sharing.shards_per_gpu)

    def drain(self, caller: Caller, node: str, gpus: Sequence[int] | None, reason: object) -> list[Drain]:
        """Take GPUs (None: the whole node) out of scheduling, for an admin (`corral.server.draining`);
        jobs on them run on."""
        return self.gpus.drain(caller, node, gpus, reason)

    def resume(self, caller: Caller, node: str, gpus: Sequence[int] | None) -> list[Drain]:
        """Give drained GPUs (None: the node and all its GPUs) back to scheduling, for an admin."""
        return self.gpus.resume(caller, node, gpus)

    def gpus_in_use_outside(self, processes: Sequence[OutsideProcess]) -> None:
        """The monitor's last sample of processes outside corral on this machine's GPUs (`JobReader`): a GPU
        they use is avoided (`[node] outside_processes`) until a sample no longer shows them."""
        self.gpus.outside_sampled(processes)

    def gpu_memory_sampled(self, used: Mapping[int, float]) -> list[tuple[Job, OverBudget]]:
        """The monitor's last sample of each running job's own GPU memory (`JobReader`): sharing jobs over their
        budget are warned, then stopped (`corral.server.share_budgets`). Returns those warned just now."""
        return self.budgets.sampled(self.active, used, self.clock())

    def gpu_health(self, figures: Mapping[int, HealthFigures], at: float) -> list[HealthEvent]:
        """The monitor's last sample of this machine's GPUs' health (`JobReader`): a fatal fault drains its GPU
        and ends the jobs on it (`corral.server.gpu_faults`). Returns what happened, for the monitor's alerts."""
        return self.gpus.health_sampled(figures, at)

    # -- the loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Reap ended jobs and run scheduling passes until cancelled (`corral.server.loop`)."""
        if self.placed is not None:  # supervisors are spawned by the launcher's threads
            self.placed.start_launcher(asyncio.get_running_loop())
        await self.loop.run()

    def reap(self) -> None:
        """Read and apply ended jobs' outcomes, here and now."""
        if self.handover is not None:
            if self.handover.reap():
                self.mark_dirty()
        elif self.placed is not None:
            self.placed.reap()

    async def _reap_off_loop(self) -> None:
        if self.reservation_requests.due():
            self.mark_dirty()  # a reservation begins or ends: its jobs start, or it is removed
        if self.handover is not None:
            self.reap()  # the backend's watcher reads in a thread of its own already
        elif self.placed is not None:
            await self.placed.reap_off_loop()

    def schedule_pass(self) -> None:
        if self.handover is not None:
            self.loop.dirty = False
            waited, more = self.handover.hand_over()
            self.loop.waited_s += waited
            if more:
                self.mark_dirty()
            return
        self.loop.dirty = False
        now = self.clock()
        self.watchers.mail.time_limits(self.table.active, now)
        self.reservation_requests.before_pass(now)
        if not self.table.queue and not self.table.arrays:
            return
        self.transitions.remove_past_deadline(now)
        waiting = self.transitions.check_dependencies()
        decisions = self.scheduling.decide(waiting, now)
        decisions.reasons.update(waiting)
        assert self.placed is not None
        self.placed.preempt(decisions.preempt, decisions.preempt_for, now)
        self.table.reasons = decisions.reasons
        self.table.planned = decisions
        if not decisions.starts:
            return
        started, events = self.scheduling.start(decisions.starts, now, decisions.limits)
        # Recorded as RUNNING before launch: after a crash in between, recovery finds
        # no supervisor and queues the job again instead of losing or doubling it.
        self.watchers.changed()
        assert self.placed is not None
        self.placed.launch(started, events)
        self.watchers.mail.started(started, now)

    def usage(self, now: float) -> dict[str, float]:
        """Each user's decayed usage in GPU-hours, running jobs included up to `now`."""
        return self.scheduling.usage(now)

    def priorities(self) -> list[tuple[Job, PriorityFactors]]:
        """Pending jobs with their priority factors from the latest pass, highest first."""
        return self.scheduling.ranked()

    def priority_of(self, job_id: int) -> int | None:
        """A pending job's priority from the latest pass (None before its first)."""
        factors = self.scheduling.factors.get(job_id)
        return factors.priority if factors is not None else None

    # -- a backend that schedules itself -------------------------------------------------------

    def poll_soon(self) -> None:
        """A job's end was announced (Slurm's epilog): the backend looks again now, and a few times more."""
        if self.backend.queue is not None:
            self.backend.queue.nudge()
            self.mark_dirty()

    def efficiency(self, ref: str) -> dict[str, Any]:
        """CPU and memory efficiency of a job, from the backend's accounting (`corral.server.self_scheduled`)."""
        return self.self_scheduled.efficiency(ref)

    async def attach(self, backend_id: str) -> Job:
        """Track a job submitted to the backend without corral (`corral.server.self_scheduled`)."""
        return self.self_scheduled.attach(backend_id)

    # -- reservations (`corral.server.reserving`) --------------------------------------------------

    def list_reservations(self) -> list[dict[str, Any]]:
        return self.reservation_requests.list()

    def create_reservation(self, caller: Caller, wanted: Wanted) -> dict[str, Any]:
        """Keep GPUs for some users over a window, for an admin (`corral.server.reservation_requests`)."""
        return self.reservation_requests.create(caller, wanted)

    def update_reservation(self, caller: Caller, name: str, body: Mapping[str, object]) -> dict[str, Any]:
        """Change a reservation's window, GPUs or users, for an admin."""
        return self.reservation_requests.update(caller, name, body)

    def delete_reservation(self, caller: Caller, name: str) -> dict[str, Any]:
        """Remove a reservation, for an admin; the jobs waiting for it are held (ReservationDeleted)."""
        return self.reservation_requests.delete(caller, name)

    def mark_dirty(self) -> None:
        self.watchers.changed()
        self.loop.wake()

