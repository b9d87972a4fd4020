"""The job service on a Slurm cluster: Slurm schedules, corral submits, watches and records.

Every job goes to Slurm as soon as it may (its corral dependencies mapped to Slurm job ids),
keeps its corral id and records Slurm's. One poller reads the state of all of them with one
`squeue` call (and one `sacct` call for those that left the queue), backing off while Slurm
does not answer; Slurm's epilog can also tell the server at once (`poll_soon`).
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from corral.backends.slurm.cluster import SlurmCluster, SlurmError
from corral.backends.slurm.parse import SacctRow, SqueueRow, outcome_from_sacct
from corral.backends.slurm.script import build_sbatch
from corral.core.dependency import Dependency
from corral.core.job import Job, Outcome
from corral.core.paths import expand_pattern
from corral.core.spec import MAX_NODES, JobSpec, build_spec
from corral.core.states import JobState, PendingReason
from corral.errors import Conflict, InvalidRequest, NotFound
from corral.executor.environment import job_environment
from corral.executor.files import write_json_atomic
from corral.home import HomeLayout
from corral.server.service import JobService, _apply_outcome

log = logging.getLogger("corral.slurm")

POLL_INTERVAL_S = 2.0
MAX_BACKOFF_S = 60.0
BURST_S, BURST_INTERVAL_S = 3.0, 0.1  # after an epilog's nudge
SUBMITS_PER_PASS = 16  # sbatch calls in one turn of the event loop (each takes 10-50 ms)
_TASK_SENTINEL = "\x00TASK\x00"


class SlurmJobService(JobService):
    def __init__(self, *, cluster: SlurmCluster, partition: str | None = None, account: str | None = None,
                 home: str, server_url: Callable[[], str | None] = lambda: None, poll_interval_s: float = POLL_INTERVAL_S,
                 job_token: Callable[[Job], str] | None = None, **kwargs: Any) -> None:
        """`job_token`: makes the API token a job's SDK sends from its compute node (another machine,
        which the server cannot name by the kernel)."""
        super().__init__(home=home, **kwargs)
        self.job_token = job_token
        self.cluster = cluster
        self.partition = partition
        self.account = account
        self.home = home
        self.server_url = server_url
        self.poll_interval_s = poll_interval_s
        self._next_poll = 0.0
        self._backoff = poll_interval_s
        self._slurm_reasons: dict[int, str] = {}
        self._slurm_dependency: dict[int, str] = {}  # jobs about to be submitted with these Slurm dependencies
        self._burst_until = 0.0
        self._slurm_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-slurm")
        self._reading: Future[tuple[list[SqueueRow], dict[str, SacctRow]]] | None = None
        self._read_for: Mapping[str, Job] = {}

    # -- what differs from the local service --------------------------------------------------

    max_nodes = MAX_NODES

    def _check_request(self, spec: JobSpec) -> None:
        pass  # Slurm itself refuses what its nodes cannot run, in its own words, at sbatch

    def _refuse_unconfigured(self, changes: Mapping[str, Any]) -> None:
        pass  # partitions and QoS are the cluster's

    def _place(self, spec: JobSpec, counted: bool = False) -> JobSpec:
        # partitions, QoS and their limits are the cluster's: "" leaves the choice to Slurm
        return replace(spec, partition=spec.partition or self.partition or "", qos=spec.qos or "")

    def close(self) -> None:
        self._slurm_thread.shutdown(wait=False, cancel_futures=True)  # a slow squeue must not hold up a stop
        super().close()

    def poll_soon(self) -> None:
        """Read Slurm's state now and a few times more in quick succession (a job's epilog said it
        ended: it may still be COMPLETING for a moment, and its record not yet written)."""
        self._next_poll = 0.0
        self._burst_until = time.monotonic() + BURST_S
        self._mark_dirty()

    def _current(self, job: Job) -> Job:
        if job.state is JobState.PENDING:
            job.reason = self._slurm_reasons.get(job.id) or self._reasons.get(job.id, PendingReason.NONE)
        return job

    def schedule_pass(self) -> None:
        """Submit to Slurm every queued job that may go now (the scheduling is Slurm's)."""
        self._dirty = False
        waiting = self._map_dependencies()
        submitted = 0
        for job_id in list(self._queue) + [a for a in self._arrays if self._arrays[a].backend_id is None]:
            job = self.active.get(job_id)
            if job is None or job.backend_id is not None or job.held or job_id in waiting:
                continue
            if submitted == SUBMITS_PER_PASS:
                self._mark_dirty()  # the rest in the next pass: the API is served in between
                return
            started = time.monotonic()
            self._submit(job, self._slurm_dependency.pop(job_id, None))
            self._waited_s += time.monotonic() - started
            submitted += 1

    def _map_dependencies(self) -> dict[int, PendingReason]:
        """Dependencies whose targets are all at Slurm become Slurm dependencies; the rest corral
        evaluates as on one machine (a target that already ended, or is not submitted yet)."""
        for job_id, dependency in list(self._dependencies.items()):
            mapped = self._to_slurm(dependency)
            if mapped is not None:
                self._slurm_dependency[job_id] = mapped
                del self._dependencies[job_id]
        return self._check_dependencies()

    def _to_slurm(self, dependency: Dependency) -> str | None:
        terms = []
        for term in dependency.terms:
            if term.kind == "singleton":
                terms.append("singleton")
                continue
            ids = []
            for target in term.job_ids:
                job = self.active.get(target)
                if job is None or job.backend_id is None or job.state.is_terminal():
                    return None
                ids.append(job.backend_id)
            terms.append(":".join([term.kind, *ids]))
        return ("?" if dependency.any_of else ",").join(terms)

    def _submit(self, job: Job, dependency: str | None) -> None:
        layout = HomeLayout(self.home)
        job_dir = layout.job_dir(job.id)
        os.makedirs(job_dir, exist_ok=True)
        checkpoint_dir = layout.checkpoint_dir(job.id)
        os.makedirs(checkpoint_dir, exist_ok=True)
        user_script = None
        if job.spec.script is not None:
            user_script = os.path.join(job_dir, "user-script")
            _write_executable(user_script, job.spec.script)
        stdout = self._log_pattern(job, "stdout")
        stderr = self._log_pattern(job, "stderr") if job.spec.stderr else None
        for path in (stdout, stderr):
            if path:  # Slurm fails a job whose log it cannot open (JobLaunchFailure)
                os.makedirs(os.path.dirname(path), exist_ok=True)
        request = build_sbatch(
            job, partition=self.partition, account=self.account, dependency=dependency,
            env=self._environment(job, checkpoint_dir), stdout=stdout, stderr=stderr, user_script_path=user_script,
        )
        script_path = os.path.join(job_dir, "sbatch.sh")
        _write_executable(script_path, request.script)
        write_json_atomic(os.path.join(job_dir, "sbatch.json"), {"argv": list(request.argv)})
        try:
            job.backend_id = self.cluster.submit(request, script_path)
        except Exception as exc:  # noqa: BLE001 - Slurm refused it: the job fails with Slurm's words
            log.warning("sbatch refused job %d: %s", job.id, exc)
            _apply_outcome(job, Outcome("FAILED", None, None, self.clock(), f"sbatch: {getattr(exc, 'message', exc)}"))
            self.store.save_state(job)
            self._forget(job)
            return
        self._slurm_reasons[job.id] = "None"
        self.store.save_state(job)
        self._next_poll = min(self._next_poll, time.monotonic() + 0.5)

    def _environment(self, job: Job, checkpoint_dir: str) -> dict[str, str]:
        # sbatch's --export=ALL passes the submitting environment itself; Slurm places the job and
        # sets its own SLURM_* and GPU variables; the compute node does not see the home's address file
        env = job_environment(job, None, server_env={}, checkpoint_dir=checkpoint_dir, server_url=self.server_url(),
                              home=self.home, follows_home_address=False)
        if self.job_token is not None and "CORRAL_TOKEN" not in env:
            env["CORRAL_TOKEN"] = self.job_token(job)
        return env

    def _log_pattern(self, job: Job, stream: str) -> str:
        """The log path as Slurm should write it: corral's pattern filled in, except an array's task
        number, which is Slurm's `%a` (its tasks get their corral records later)."""
        s = job.spec
        pattern = s.stdout if stream == "stdout" or s.stderr is None else s.stderr
        if not job.is_array:
            return job.log_path(stream)
        # a task's own job id (%j) is Slurm's to choose, so tasks are told apart by ARRAY_TASK
        pattern = pattern.replace("%j", "%A_%a").replace("%a", _TASK_SENTINEL)
        path = expand_pattern(pattern, job_id=job.id, name=s.name, user=s.user, node="%N", workdir=s.workdir,
                              array_job_id=job.id, array_task_id=None)
        return path.replace("%", "%%").replace("%%N", "%N").replace(_TASK_SENTINEL, "%a")

    # -- watching ---------------------------------------------------------------------------------

    async def _reap_off_loop(self) -> None:
        self.reap()  # the Slurm commands run in the Slurm thread already

    def reap(self) -> None:
        """Start a read of Slurm's state when one is due; apply one that has come back. The
        commands run in a thread of their own: a slow slurmctld never holds up the API."""
        if self._reading is not None:
            if self._reading.done():
                self._apply_read()
            return
        if time.monotonic() < self._next_poll:
            return
        submitted = {j.backend_id: j for j in self.active.values() if j.backend_id is not None}
        if not submitted:
            self._next_poll = time.monotonic() + self.poll_interval_s
            return
        arrays = {bid for bid, j in submitted.items() if j.is_array}
        self._reading = self._slurm_thread.submit(self._read_slurm, set(submitted), arrays)
        self._read_for = submitted

    def _read_slurm(self, ids: set[str], arrays: set[str]) -> tuple[list[SqueueRow], dict[str, SacctRow]]:
        """In the Slurm thread: the queue (one squeue), then accounting for what left it (one sacct)."""
        rows = self.cluster.queue()
        present = {row.job_id for row in rows if not row.slurm_state.startswith("COMPLETING")}
        present |= {str(row.array_job_id) for row in rows if row.array_job_id is not None}
        gone = sorted(i for i in ids if i not in present or (i in arrays and not _array_has_rows(i, rows)))
        try:
            records = {r.job_id: r for r in self.cluster.accounting(gone)} if gone else {}
        except SlurmError as exc:
            log.warning("sacct failed (%s); jobs that left the queue are settled without it", exc.message)
            records = {}
        return rows, records

    def _apply_read(self) -> None:
        assert self._reading is not None
        reading, submitted, self._reading = self._reading, self._read_for, None
        try:
            rows, records = reading.result()
        except SlurmError as exc:
            self._backoff = min(MAX_BACKOFF_S, self._backoff * 2)
            log.warning("polling Slurm failed (next try in %.0f s): %s", self._backoff, exc.message)
            self._next_poll = time.monotonic() + self._backoff
            return
        # jobs ended or cancelled while Slurm was being read are no longer corral's to settle
        submitted = {bid: j for bid, j in submitted.items() if self.active.get(j.id) is j}
        self._poll(submitted, rows, records)
        self._backoff = self.poll_interval_s
        now = time.monotonic()
        self._next_poll = now + (BURST_INTERVAL_S if now < self._burst_until else self.poll_interval_s)

    def _poll(self, submitted: Mapping[str, Job], rows: Sequence[SqueueRow], records: Mapping[str, SacctRow]) -> None:
        queued: set[str] = set()
        changed: list[Job] = []
        arrays_seen: set[str] = set()
        for row in rows:
            array = submitted.get(str(row.array_job_id)) if row.array_job_id is not None else None
            if array is not None and array.is_array:
                arrays_seen.add(array.backend_id or "")
                if row.is_range or not row.array_task_ids:
                    continue  # tasks not started yet: they stay in the array's pending list
                job = self._task(array, row.array_task_ids[0], submitted)
            else:
                job = submitted.get(row.job_id)
                if job is None:
                    continue
            if row.slurm_state.startswith("COMPLETING"):
                continue  # its processes are gone: settled from accounting, as soon as that has it
            queued.add(job.backend_id or "")
            if self._apply_queue_row(job, row):
                changed.append(job)
        gone = [j for bid, j in submitted.items() if bid not in queued and bid not in arrays_seen]
        self.store.save_states(changed)
        if gone:
            self._settle(gone, records)
        self._mark_dirty()

    def _task(self, array: Job, task_id: int, submitted: Mapping[str, Job]) -> Job:
        backend_id = f"{array.backend_id}_{task_id}"
        known = submitted.get(backend_id)
        if known is not None:
            return known
        # the task's log paths: where Slurm writes them (a corral pattern that needs no job id)
        logs = {stream: self._log_pattern(array, stream).replace("%a", str(task_id)) for stream in ("stdout", "stderr")}
        spec = replace(array.spec, dependency=None, stdout=logs["stdout"],
                       stderr=logs["stderr"] if array.spec.stderr else None)
        (task,) = self.store.add_tasks(array, spec, [task_id])
        task.backend_id = backend_id
        self.store.save_state(task)
        self._track(task)
        self._queue.pop(task.id, None)
        return task

    def _apply_queue_row(self, job: Job, row: SqueueRow) -> bool:
        state = row.state
        before = (job.state, job.node, job.start_time)
        if state is JobState.RUNNING:
            job.state, job.node = JobState.RUNNING, row.node or job.node
            job.start_time = job.start_time or row.start_time or self.clock()
            self._queue.pop(job.id, None)
            self._slurm_reasons.pop(job.id, None)
        elif state in (JobState.PENDING, JobState.PREEMPTED):
            if job.state is JobState.RUNNING:  # requeued by Slurm
                job.restarts += 1
                job.start_time, job.node = None, None
            job.state = JobState.PENDING
            self._slurm_reasons[job.id] = row.reason or "None"
        return (job.state, job.node, job.start_time) != before

    def _settle(self, gone: Sequence[Job], records: Mapping[str, SacctRow]) -> None:
        """Jobs that left Slurm's queue: their outcome from accounting (read with the queue)."""
        ended = []
        for job in gone:
            if job.is_array:
                self._settle_array(job, records)
                continue
            record = records.get(job.backend_id or "")
            if record is None:
                if time.time() - (job.start_time or job.submit_time) < 30:
                    continue  # accounting lags the queue by a moment: ask again at the next poll
                outcome = Outcome("COMPLETED", None, None, self.clock(), "Slurm has no record of how it ended")
            else:
                if not record.state.is_terminal():
                    continue
                outcome = outcome_from_sacct(record, now=self.clock())
            if job.start_time is None and record is not None and record.start_time:
                job.start_time = record.start_time
            _apply_outcome(job, outcome)
            ended.append(job)
        self.store.save_states(ended)
        for job in ended:
            self._slurm_reasons.pop(job.id, None)
            self._forget(job)

    def _settle_array(self, array: Job, records: Mapping[str, Any]) -> None:
        """An array that left the queue: its tasks not seen running get their records now."""
        tasks = {t: r for r in records.values() if str(r.array_job_id) == array.backend_id and r.state.is_terminal()
                 for t in r.array_task_ids}
        ended = []
        for task_id in list(array.array_pending):
            record = tasks.get(task_id)
            task = self._task(array, task_id, {})
            outcome = outcome_from_sacct(record, now=self.clock()) if record is not None else Outcome(
                "CANCELLED" if array.reason == "CancelledByUser" else "COMPLETED", None, None, self.clock(),
                None if record is not None else "Slurm has no record of this task")
            if record is not None:
                task.start_time, task.node = record.start_time, record.node
            _apply_outcome(task, outcome)
            ended.append(task)
        self.store.save_states(ended)
        for task in ended:
            self._forget(task)
        self._finish_array_if_done(array.id)

    # -- requests ---------------------------------------------------------------------------------

    def efficiency(self, ref: str) -> dict[str, Any]:
        """CPU and memory efficiency of a job, from Slurm's accounting.

        Raises:
            Conflict: the job has not run on Slurm yet, or accounting has no record of it.
        """
        from corral.backends.slurm.efficiency import efficiency

        job = self.resolve(ref)
        if job.backend_id is None or job.state is JobState.PENDING:
            raise Conflict(f"job {job.id} has not run yet; efficiency is known once it runs")
        try:
            return efficiency(self.cluster.efficiency_record(job.backend_id))
        except (SlurmError, ValueError) as exc:
            raise Conflict(f"Slurm's accounting has no efficiency for job {job.id}: {getattr(exc, 'message', exc)}") from None

    def _set_held(self, ref: str, held: bool) -> Job:
        job = self.resolve(ref)
        if job.backend_id is not None and job.state is JobState.PENDING and job.held != held:
            # already at Slurm: it is Slurm that must hold it (shown as JobHeldUser) or let it go
            self.cluster.hold([job.backend_id], release=not held)
            self._slurm_reasons[job.id] = "JobHeldUser" if held else "None"
        return super()._set_held(ref, held)

    async def attach(self, slurm_id: str) -> Job:
        """Track a job submitted with plain sbatch: its state, its logs, the runs it logs.

        Raises:
            InvalidRequest: not a Slurm job id; NotFound: Slurm does not know it.
        """
        slurm_id = str(slurm_id).strip()
        if not re.fullmatch(r"[0-9]{1,12}", slurm_id):
            raise InvalidRequest("slurm_job_id", f"{slurm_id!r} is not a Slurm job id", "give the number sbatch printed")
        for job in self.active.values():
            if job.backend_id == slurm_id:
                return self._current(job)
        try:
            info = self.cluster.job_info(slurm_id)
        except SlurmError:
            raise NotFound(f"Slurm has no job {slurm_id} (finished jobs leave scontrol after MinJobAge)") from None
        request = {
            "command": [info.get("Command") or f"slurm-job-{slurm_id}"], "name": info.get("JobName") or slurm_id,
            "workdir": info.get("WorkDir") or "/", "cpus": int(info.get("NumCPUs") or 1),
            "stdout": _literal_path(info.get("StdOut") or os.path.join(info.get("WorkDir") or "/", f"slurm-{slurm_id}.out")),
        }
        if info.get("StdErr") and info.get("StdErr") != info.get("StdOut"):
            request["stderr"] = _literal_path(info["StdErr"])
        spec = replace(build_spec(request, user=self.user, log_dir=self.log_dir, default_workdir="/",
                                  server_env=self.server_env), inherit_env=False, env={}, partition=info.get("Partition") or "",
                       qos="")
        (job,) = self.store.insert([spec], self.clock())
        job.backend_id = slurm_id
        self.store.save_state(job)
        self._track(job)
        self._queue.pop(job.id, None)  # Slurm runs it; corral never submits it
        self.poll_soon()
        return job

    async def cancel(self, ref: str | int, by: str | None = None) -> Job:  # slurmstepd writes the job's line
        ref = str(ref)
        job = self.resolve(ref)
        if job.state.is_terminal():
            raise Conflict(f"job {job.id} already ended ({job.state.value}); there is nothing to cancel")
        target = job.backend_id
        if job.is_array and "_" in ref and job.backend_id:
            target = f"{job.backend_id}_{ref.partition('_')[2]}"
        if target is not None:
            self.cluster.cancel([target])
            if job.is_array and "_" not in ref:
                job.reason = "CancelledByUser"
                self._cancelled_arrays.add(job.id)
            self.poll_soon()
        if job.state is JobState.PENDING and not job.is_array:
            job.state, job.end_time, job.reason = JobState.CANCELLED, self.clock(), "CancelledByUser"
            self.store.save_state(job)
            self._slurm_reasons.pop(job.id, None)
            self._forget(job)
            return job
        return await self.wait(job.id if "_" not in ref else ref, 5.0)

    def nodes_view(self) -> list[dict[str, Any]]:
        return [{"name": n.name, "cpus": n.cpus, "cpus_alloc": 0, "mem_mb": n.mem_mb, "mem_alloc_mb": 0,
                 "gpus": [{"index": g.index, "type": g.type, "mem_mb": g.mem_mb, "capability": g.capability,
                           "job_id": None, "job_ref": None, "job_name": None,
                           "user": None} for g in n.gpus]} for n in self.nodes]


def _array_has_rows(array_id: str, rows: Sequence[SqueueRow]) -> bool:
    return any(str(row.array_job_id) == array_id and not row.slurm_state.startswith("COMPLETING") for row in rows)


def _literal_path(path: str) -> str:
    """A path Slurm already expanded, as a corral pattern that expands to itself."""
    return path.replace("%", "%%")


def _write_executable(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o700)  # the job's environment (its token too) is in it: for its owner only
    os.replace(tmp, path)
