"""The job service: the one place that changes job state, for every backend.

It keeps the unfinished jobs in memory (the scheduler reads them every pass) and
writes every change through to the store before acknowledging it. All of it runs
on the server's event loop thread, so changes never interleave; database calls
are short and synchronous, and submits arriving together share one transaction.

`JobService` holds the request methods and composes the parts that own state: the job
table (`job_table`), the usage ledger (`usage`), admission (`corral.core.admission`),
the loop's timing (`loop`), corral's own pass and the jobs it placed (`scheduling`,
`placed`) or, where the backend schedules itself, the hand-over (`handover`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from corral.backends.base import Backend, ClusterQueue, JobProcesses, Recovered
from corral.core.admission import admit, check_nice, check_runnable, refuse_unconfigured
from corral.core.arrays import array_state
from corral.core.events import CANCELLED, JobEvent
from corral.core.identity import AccessPolicy
from corral.core.job import Job
from corral.core.priority import PriorityFactors, usage_charge
from corral.core.resources import Allocation, Node
from corral.core.schedconfig import SchedulerConfig
from corral.core.spec import DEFAULT_MAX_SCRIPT_MB, JobSpec, build_spec, check_script_size, update_spec
from corral.core.states import JobState, PendingReason
from corral.errors import Conflict, InvalidRequest
from corral.executor.directory_access import DirectoryAccess, can_enter
from corral.home import HomeLayout
from corral.server.accounts import home_of, may_use, uid_of
from corral.server.handover import BackendHandover
from corral.server.inserts import GroupCommit
from corral.server.job_table import CANCELLED_BY_USER, JobTable, apply_outcome, pending
from corral.server.log_window import read_log_window
from corral.server.loop import SchedulingLoop
from corral.server.nodes_view import nodes_view
from corral.server.placed import PlacedJobs
from corral.server.queries import JobQueries
from corral.server.scheduling import RunningJobs, SchedulingPass
from corral.server.usage import UsageLedger
from corral.store.jobs import JobStore
from corral.store.usage import UsageStore

log = logging.getLogger("corral.server")

CANCEL_WAIT_S = 3.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class JobService:
    def __init__(
        self, *, store: JobStore, backend: Backend, nodes: Sequence[Node], home: str, user: str,
        server_env: Mapping[str, str], config: SchedulerConfig | None = None, clock: Callable[[], float] = time.time,
        access: AccessPolicy | None = None, user_log_dir: Callable[[str], str] | None = None,
        isolation: tuple[str, str] = ("none", ""), max_script_mb: int = DEFAULT_MAX_SCRIPT_MB,
    ) -> None:
        """`user`: the server's own user, whose jobs these are unless a submit names another (the caller);
        `access`: accounts and admins; `user_log_dir`: where a user's logs go by default (else `<home>/logs`);
        `isolation`: how jobs are held apart (the mode, "cgroup v1", and a sentence of what it guarantees);
        `max_script_mb`: the largest batch script taken ([server] max_script_mb)."""
        self.store = store
        self.max_script_mb = max_script_mb
        self.backend = backend
        self.capabilities = backend.capabilities
        self.nodes = tuple(nodes)
        self.log_dir = HomeLayout(home).logs
        self.user = user
        self.isolation = isolation
        self.access = access or AccessPolicy()
        self._user_log_dir = user_log_dir
        self.server_env = server_env
        self.clock = clock
        self.config = config or SchedulerConfig()
        self.table = JobTable(store)
        self.active = self.table.active  # every unfinished job, in submit order (read on the loop)
        self.queries = JobQueries(self.table, store, self.nodes)
        self.handover = None if backend.queue is None else BackendHandover(
            backend.queue, self.table, store, clock=clock, forget=self._forget, finish_array=self._finish_array_if_done,
            check_dependencies=self._check_dependencies)
        self.ledger = UsageLedger(self.config.half_life_s, clock(), UsageStore(store.engine))
        self.running = RunningJobs()
        self.allocations = self.running.allocations  # of the jobs corral placed (read by the views)
        self.scheduling = SchedulingPass(self.table, self.running, store, self.ledger, config=self.config,
                                         nodes=self.nodes, clock=clock)
        self._waiters: dict[int, list[asyncio.Future[Job]]] = {}
        self._db_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-db")
        self.inserts = GroupCommit(store, self._db_thread, clock=clock, inserted=self._inserted)
        self.placed = None if backend.placement is None else PlacedJobs(
            backend.placement, self.table, self.running, self.scheduling, store, self.ledger, self._db_thread,
            clock=clock, forget=self._forget, changed=self._mark_dirty)
        self.directories = DirectoryAccess()  # submitters' directories, checked as them
        self.loop = SchedulingLoop(reap=self._reap_off_loop, schedule_pass=self.schedule_pass)
        self.on_job_ended: list[Callable[[Job], None]] = []  # e.g. tracking ends the job's runs
        self.generation = 0  # goes up whenever jobs change: the dashboard's live view watches it

    # -- start-up -------------------------------------------------------------------------------

    def recover(self) -> None:
        """Load unfinished jobs and settle the ones that were running when the server stopped."""
        now = self.clock()
        self.ledger.load(self.store, now)
        changed, ended, events = [], [], []
        for job in self.store.active():
            if job.state is JobState.RUNNING:
                recovery = self.backend.recover(job)
                if recovery.status is Recovered.RUNNING:
                    self.allocations[job.id] = _allocation_of(job)
                elif recovery.status is Recovered.NEVER_STARTED:
                    job.state, job.start_time, job.node, job.gpu_ids = JobState.PENDING, None, None, None
                    changed.append(job)
                elif recovery.outcome is not None and recovery.outcome.state == JobState.PREEMPTED.value:
                    self.allocations[job.id] = _allocation_of(job)
                    events += self.running.ending_events(job, recovery.outcome)
                    self.scheduling.requeue(job, recovery.outcome.end_time)
                    changed.append(job)
                else:
                    assert recovery.outcome is not None
                    apply_outcome(job, recovery.outcome)
                    changed.append(job)
                    ended.append(job)
                    continue
            self.table.track(job)
        self.store.save_states(changed, events)
        for job in ended:
            for listener in self.on_job_ended:
                listener(job)
        for array_id in list(self.table.arrays):
            self._finish_array_if_done(array_id)  # its last task may have ended while the server was away
        log.info("recovered %d unfinished jobs (%d running)", len(self.active), len(self.allocations))

    # -- requests -------------------------------------------------------------------------------

    async def submit(self, request: Mapping[str, Any], user: str | None = None, privileged: bool = True) -> Job:
        """Validate, refuse what could never run, persist; the job is acknowledged once committed.

        `user`: who submits it (the caller), and so whose it is and as whom it runs; `privileged`:
        an admin, who may raise a job above others with a negative nice (as in Slurm).
        """
        user = user or self.user
        own = user == self.user
        check_script_size(request, self.max_script_mb)
        spec = build_spec(
            request, user=user, log_dir=self.log_dir if self._user_log_dir is None else self._user_log_dir(user),
            default_workdir=os.path.expanduser("~") if own else home_of(user), server_env=self.server_env if own else {},
            can_enter=can_enter if own else self.directories.checker(user),  # as the user: root sees into every home
            max_nodes=self.max_nodes,
        )
        check_nice(spec, privileged)
        if not own and spec.inherit_env:
            # another user's job never sees the server's environment; theirs comes with the request (the CLI sends it)
            spec = replace(spec, inherit_env=False, env={"PATH": DEFAULT_PATH, **spec.env})
        if spec.account is not None or self.access.accounts:
            spec = replace(spec, account=self.access.account_for(user, spec.account))
        self._check_request(spec)
        spec = self._place(spec)
        key = (spec.user, spec.qos)
        self.table.per_user[key] += 1  # counted now, so that concurrent submits cannot overshoot a limit
        try:
            return await self.inserts.insert(spec)
        except BaseException:
            self.table.per_user[key] -= 1
            raise

    def update(self, ref: str, changes: Mapping[str, Any], privileged: bool = True) -> Job:
        """Change a pending job's limits, priority or resources (`corral update`).

        Raises:
            InvalidRequest: a bad change; Conflict: the job is not pending.
        """
        job = self.resolve(ref)
        self._refuse_if_cancelled(job)
        self._refuse_unconfigured(changes)
        if job.state is not JobState.PENDING or job.id not in self.active or (job.is_array and "_" in ref):
            kind = "a task that has not started (update the array)" if job.is_array else job.state.value
            raise Conflict(f"job {ref} is {kind}; only pending jobs can be updated")
        # an array's change applies to its tasks not started yet and to those waiting with a record
        targets = [job] + [self.active[t] for t in self.table.array_tasks.get(job.id, ()) if self.active[t].state
                           is JobState.PENDING] if job.is_array else [job]
        specs = []
        for target in targets:
            spec = update_spec(target.spec, changes)
            if spec.nice < target.spec.nice:
                check_nice(spec, privileged)
            self._check_request(spec)
            old_key, new_key = (target.spec.user, target.spec.qos), (spec.user, spec.qos or self.config.default_qos)
            counts = target.array_job_id is None
            specs.append((target, self._place(spec, counted=not counts or old_key == new_key), old_key, counts))
        for target, spec, old_key, counts in specs:
            target.spec = spec
            self.store.save_spec(target)
            if counts and old_key != (spec.user, spec.qos):
                self.table.per_user[old_key] -= 1
                self.table.per_user[(spec.user, spec.qos)] += 1
            if target.id in self.table.queue:
                self.table.queue[target.id] = pending(target)
        self._mark_dirty()
        return self.table.current(job)

    def _refuse_unconfigured(self, changes: Mapping[str, Any]) -> None:
        if not self.capabilities.schedules_itself:  # there, partitions and QoS are the cluster's
            refuse_unconfigured(changes, self.config)

    @property
    def max_nodes(self) -> int:
        """The most nodes a job runs on here (the local backend runs each job on this machine)."""
        return self.capabilities.max_nodes

    def _check_request(self, spec: JobSpec) -> None:
        if not self.capabilities.schedules_itself:  # there, the cluster refuses what its nodes cannot run, at submission
            check_runnable(spec, self.nodes)

    def _place(self, spec: JobSpec, counted: bool = False) -> JobSpec:
        """Fill in the partition, QoS and default time limit (`corral.core.admission.admit`)."""
        if self.backend.queue is not None:
            # partitions, QoS and their limits are the cluster's: "" leaves the choice to it
            return replace(spec, partition=spec.partition or self.backend.queue.default_partition or "", qos=spec.qos or "")
        return admit(spec, self.config, nodes=self.nodes, may_use=may_use,
                     unfinished=lambda qos: self.table.per_user[(spec.user, qos)] - (1 if counted else 0),
                     job_exists=lambda job_id: self.table.state_of(job_id) is not None)

    def _inserted(self, jobs: list[Job]) -> None:
        """Submits committed (`corral.server.inserts`): the jobs are the table's now."""
        for job in jobs:
            self.table.track(job, counted=True)
        self._mark_dirty()

    def close(self) -> None:
        """Let an insert in flight finish (its submitters are owed an answer), and the launches handed over."""
        self.backend.close()
        if self.placed is not None:
            self.placed.close()
        self._db_thread.shutdown(wait=True)
        self.directories.close()

    def resolve(self, ref: str) -> Job:
        """A job by its id (`12`) or an array task by `12_3` (`corral.server.queries`)."""
        return self.queries.resolve(ref)

    def get(self, job_id: int) -> Job:
        return self.queries.get(job_id)

    def array_tasks(self, job_id: int) -> tuple[Job, list[Job]]:
        return self.queries.array_tasks(job_id)

    def job_info(self, job_id: int) -> dict[str, Any] | None:
        return self.queries.job_info(job_id)

    def list_active(self, *, states: Sequence[str] = (), limit: int = 10_000, after_id: int = 0,
                    name: str | None = None) -> list[Job]:
        return self.queries.list_active(states=states, limit=limit, after_id=after_id, name=name)

    def list_finished(self, *, states: Sequence[str] = (), limit: int = 100, before_id: int | None = None,
                      name: str | None = None) -> list[Job]:
        return self.queries.list_finished(states=states, limit=limit, before_id=before_id, name=name)

    async def cancel(self, ref: str | int, by: str | None = None) -> Job:
        """Cancel a pending job at once; ask a running one to stop and wait briefly for it.
        An array cancels all its tasks; `12_3` cancels one. `by`: who cancels (its log and timeline say)."""
        ref = str(ref)
        if self.backend.queue is not None:
            return await self._cancel_at_backend(ref, self.backend.queue)
        job = self.resolve(ref)
        job_id = job.id
        if job.id not in self.active and not job.state.is_terminal():
            job = await self._tracked(job_id)  # committed a moment ago, not yet in memory
        if job.is_array and "_" in ref:
            return self._cancel_waiting_task(job, int(ref.partition("_")[2]), by)
        if job.is_array and not job.state.is_terminal():
            return await self._cancel_array(job, by)
        if job.state.is_terminal():
            raise Conflict(f"job {job_id} already ended ({job.state.value}); there is nothing to cancel")
        if job.state is JobState.PENDING:
            saved = (job.state, job.end_time, job.reason)
            job.state, job.end_time, job.reason = JobState.CANCELLED, self.clock(), CANCELLED_BY_USER
            try:
                self.store.save_state(job, _cancel_events([job], by))
            except Exception:
                job.state, job.end_time, job.reason = saved
                raise
            self._forget(job)
            self._mark_dirty()
            return job
        assert self.placed is not None
        self.placed.stop(job, by)
        self._mark_dirty()
        try:
            return await self.wait(job_id, CANCEL_WAIT_S)
        finally:
            self._mark_dirty()

    async def _cancel_array(self, array: Job, by: str | None) -> Job:
        """Its tasks without a record never get one (the pass adds tasks only from `array_pending`,
        emptied here in the same step as the record), its waiting tasks end now, its running ones
        are told to stop; the array ends CANCELLED once they have, whatever they did."""
        saved = (array.array_pending, array.reason)
        array.array_pending, array.reason = [], CANCELLED_BY_USER
        try:
            self.store.save_state(array)
        except Exception:
            array.array_pending, array.reason = saved
            raise
        self.table.cancelled_arrays.add(array.id)
        waiting = []
        for child_id in list(self.table.array_tasks.get(array.id, ())):
            child = self.active.get(child_id)
            if child is None or child.state.is_terminal():
                continue
            if child.state is JobState.PENDING:
                waiting.append(child)
            else:
                assert self.placed is not None
                self.placed.stop(child, by)
        now = self.clock()
        for child in waiting:
            child.state, child.end_time, child.reason = JobState.CANCELLED, now, CANCELLED_BY_USER
        self.store.save_states(waiting, _cancel_events(waiting, by))
        for child in waiting:
            self._forget(child)
        self._finish_array_if_done(array.id)
        self._mark_dirty()
        return await self.wait(array.id, CANCEL_WAIT_S)

    def _cancel_waiting_task(self, array: Job, task_id: int, by: str | None) -> Job:
        """A task not started yet: it gets a record of its own, cancelled."""
        spec = replace(array.spec, dependency=None, kill_on_invalid_dep=False)
        (task,) = self.store.add_tasks(array, spec, [task_id])
        task.state, task.end_time, task.reason = JobState.CANCELLED, self.clock(), CANCELLED_BY_USER
        self.store.save_state(task, _cancel_events([task], by))
        self._finish_array_if_done(array.id)
        self._mark_dirty()
        return task

    def hold(self, ref: str | int) -> Job:
        """Keep a pending job (or an array's waiting tasks) from starting until it is released."""
        return self._set_held(str(ref), True)

    def release(self, ref: str | int) -> Job:
        return self._set_held(str(ref), False)

    def _set_held(self, ref: str, held: bool) -> Job:
        job = self.resolve(ref)
        queue = self.backend.queue
        if queue is not None and job.backend_id is not None and job.state is JobState.PENDING and job.held != held:
            # already at the backend: it is the backend that must hold it (shown as JobHeldUser) or let it go
            queue.hold(job, held)
            self.table.backend_reasons[job.id] = PendingReason.HELD.value if held else PendingReason.NONE.value
        job_id = job.id
        self._refuse_if_cancelled(job)
        if job.is_array and "_" in ref:
            raise Conflict(f"task {ref} has not started; hold or release the whole array {job_id}")
        if job.state is not JobState.PENDING or job.id not in self.active:
            raise Conflict(f"job {job_id} is {job.state.value}; only pending jobs can be held or released")
        if job.held == held:
            raise Conflict(f"job {job_id} is {'already' if held else 'not'} held")
        targets = [job]
        if job.is_array:  # and its tasks that wait with a record of their own
            targets += [self.active[t] for t in self.table.array_tasks.get(job.id, ())
                        if self.active[t].state is JobState.PENDING and self.active[t].held != held]
        for target in targets:
            target.held = held
        try:
            self.store.save_states(targets)
        except Exception:
            for target in targets:
                target.held = not held
            raise
        for target in targets:
            if not target.is_array:
                self.table.queue[target.id] = pending(target)
            self.table.reasons.pop(target.id, None)
            if held:
                self.table.reasons[target.id] = PendingReason.HELD
        self._mark_dirty()
        return self.table.current(job)

    def _refuse_if_cancelled(self, job: Job) -> None:
        if job.id in self.table.cancelled_arrays:
            raise Conflict(f"array {job.id} is cancelled; its last tasks are stopping")

    async def _tracked(self, job_id: int) -> Job:
        deadline = time.monotonic() + 10
        while job_id not in self.active and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        return self.get(job_id)

    async def wait(self, ref: str | int, timeout: float) -> Job:
        """The job once it has ended, or as it is after `timeout` seconds."""
        job = self.resolve(str(ref))
        job_id = job.id
        if job.state.is_terminal() or timeout <= 0:
            return job
        future: asyncio.Future[Job] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(job_id, []).append(future)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return self.get(job_id)
        finally:
            waiters = self._waiters.get(job_id)
            if waiters and future in waiters:
                waiters.remove(future)
                if not waiters:
                    del self._waiters[job_id]

    # -- what the monitor reads (monitor.jobs.JobReader) ----------------------------------------------

    def active_jobs(self) -> Iterable[Job]:
        """Every job not yet ended, as it is now (a view: read it on the event loop, at once)."""
        return self.active.values()

    def is_admin(self, user: str) -> bool:
        return self.access.scope_of(user) == "admin"

    def checkpoint_dir(self, job_id: int) -> str:
        return HomeLayout(os.path.dirname(self.log_dir)).checkpoint_dir(job_id)

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
        if job.spec.user == self.user:
            return None
        uid = uid_of(job.spec.user)
        return -1 if uid is None else uid  # an account that is gone owns no file: show nothing

    def read_log(self, ref: str, stream: str, offset: int, limit: int, tail: int | None) -> tuple[bytes, int, Job]:
        """A chunk of a job's stdout or stderr from `offset` (or its last `tail` lines); returns the next offset."""
        if stream not in ("stdout", "stderr"):
            raise InvalidRequest("stream", f"must be stdout or stderr, got {stream!r}")
        if offset < 0:
            raise InvalidRequest("offset", "must not be negative")
        job = self.resolve(ref)
        if job.state is JobState.PENDING:
            return b"", 0, job
        data, end = read_log_window(job, stream, offset, limit, tail, self.log_owner_uid(job), ref)
        return data, end, job

    def nodes_view(self) -> list[dict[str, Any]]:
        """Each node, its GPUs and who holds them (`corral.server.nodes_view`)."""
        return nodes_view(self.nodes, self.allocations.values(), self.active, isolation=self.isolation,
                          allocates=not self.capabilities.schedules_itself)

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
                self._mark_dirty()
        elif self.placed is not None:
            self.placed.reap()

    async def _reap_off_loop(self) -> None:
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
                self._mark_dirty()
            return
        self.loop.dirty = False
        now = self.clock()
        if not self.table.queue and not self.table.arrays:
            return
        waiting = self._check_dependencies()
        decisions = self.scheduling.decide(waiting, now)
        decisions.reasons.update(waiting)
        assert self.placed is not None
        self.placed.preempt(decisions.preempt, decisions.preempt_for, now)
        self.table.reasons = decisions.reasons
        self.table.estimates = decisions.estimates
        if not decisions.starts:
            return
        started, events = self.scheduling.start(decisions.starts, now)
        # Recorded as RUNNING before launch: after a crash in between, recovery finds
        # no supervisor and queues the job again instead of losing or doubling it.
        self.generation += 1
        assert self.placed is not None
        self.placed.launch(started, events)

    def _finish_array_if_done(self, array_id: int) -> None:
        """An array ends when its last task does (`corral.core.arrays.array_state` says how)."""
        array = self.table.arrays.get(array_id)
        if array is None or array.array_pending or self.table.array_tasks.get(array_id):
            return
        cancelled = array_id in self.table.cancelled_arrays
        array.state = array_state(self.store.task_states(array_id), cancelled=cancelled)
        array.end_time, array.reason = self.clock(), CANCELLED_BY_USER if cancelled else None
        self.store.save_state(array)
        self.table.cancelled_arrays.discard(array_id)
        self._forget(array)

    def _check_dependencies(self) -> dict[int, PendingReason]:
        """Jobs that must wait for others, with their reason (`JobTable.waiting_on_dependencies`); cancels
        those that asked for it when a dependency can no longer hold."""
        waiting, never = self.table.waiting_on_dependencies()
        for job in never:
            job.state, job.end_time, job.reason = JobState.CANCELLED, self.clock(), PendingReason.DEPENDENCY_NEVER
            self.store.save_state(job)
            self._forget(job)
            waiting.pop(job.id)
        return waiting

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
            self._mark_dirty()

    async def _cancel_at_backend(self, ref: str, queue: ClusterQueue) -> Job:
        """Cancel a job at the backend (which writes the job's line); one that has not reached it ends at once."""
        job = self.resolve(ref)
        if job.state.is_terminal():
            raise Conflict(f"job {job.id} already ended ({job.state.value}); there is nothing to cancel")
        if job.backend_id is not None:
            if job.is_array and "_" in ref:
                queue.cancel_task(job, int(ref.partition("_")[2]))
            else:
                self.backend.cancel(job)
            if job.is_array and "_" not in ref:
                job.reason = CANCELLED_BY_USER
                self.table.cancelled_arrays.add(job.id)
            self.poll_soon()
        if job.state is JobState.PENDING and not job.is_array:
            job.state, job.end_time, job.reason = JobState.CANCELLED, self.clock(), CANCELLED_BY_USER
            self.store.save_state(job)
            self.table.backend_reasons.pop(job.id, None)
            self._forget(job)
            return job
        return await self.wait(job.id if "_" not in ref else ref, 5.0)

    def efficiency(self, ref: str) -> dict[str, Any]:
        """CPU and memory efficiency of a job, from the backend's accounting.

        Raises:
            Conflict: the job has not run yet, accounting has no record of it, or this backend keeps none.
        """
        accounting = self.backend.accounting
        if accounting is None:
            raise Conflict("this server's backend keeps no accounting; the monitor reports efficiency from samples")
        job = self.resolve(ref)
        if job.backend_id is None or job.state is JobState.PENDING:
            raise Conflict(f"job {job.id} has not run yet; efficiency is known once it runs")
        return accounting.efficiency(job)

    async def attach(self, backend_id: str) -> Job:
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
        for job in self.active.values():
            if job.backend_id == backend_id:
                return self.table.current(job)
        request = foreign.describe(backend_id)
        partition = request.pop("partition", "")
        spec = replace(build_spec(request, user=self.user, log_dir=self.log_dir, default_workdir="/",
                                  server_env=self.server_env, can_enter=os.path.isdir), inherit_env=False, env={}, partition=partition, qos="")
        (job,) = self.store.insert([spec], self.clock())
        job.backend_id = backend_id
        self.store.save_state(job)
        self.table.track(job)
        self.table.queue.pop(job.id, None)  # the backend runs it; corral never submits it
        self.poll_soon()
        return job

    # -- helpers --------------------------------------------------------------------------------

    def _mark_dirty(self) -> None:
        self.generation += 1
        self.loop.wake()

    def _forget(self, job: Job) -> None:
        self.generation += 1
        self.table.untrack(job)
        allocation = self.running.release(job.id)
        if allocation is not None and job.start_time is not None and job.end_time is not None:
            self.ledger.charge(job.spec.user, usage_charge(len(allocation.gpu_ids), allocation.cpus,
                                                           job.end_time - job.start_time), job.end_time)
        self.scheduling.factors.pop(job.id, None)
        if job.state.is_terminal():
            for listener in self.on_job_ended:
                listener(job)
        for future in self._waiters.pop(job.id, []):
            if not future.done():
                future.set_result(job)
        if job.array_job_id is not None:
            self._finish_array_if_done(job.array_job_id)


def _cancel_events(jobs: Sequence[Job], by: str | None) -> list[JobEvent]:
    return [JobEvent(job.id, job.end_time or 0.0, CANCELLED, {"by_user": by}) for job in jobs] if by else []


def _allocation_of(job: Job) -> Allocation:
    spec = job.spec
    end = job.start_time + spec.time_limit_s if job.start_time is not None and spec.time_limit_s else None
    return Allocation(job.id, job.node or "", tuple(job.gpu_ids or ()), spec.cpus, spec.mem_mb, spec.user, spec.qos, end,
                      spec.preemptible)
