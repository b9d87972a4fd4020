"""What comes in: submits and updates, checked, admitted and written.

A submit is built into a spec as its submitter (their directories, their environment), refused if it
could never run, admitted (`corral.core.scheduling.admission.admit`: partition, QoS, limits, default time), and
acknowledged once committed (`corral.server.inserts.GroupCommit`). Where the backend schedules itself,
partitions and QoS are the cluster's and it refuses what its nodes cannot run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from corral.backends.base import Backend
from corral.core.scheduling.admission import admit, check_nice, check_priority, check_runnable, refuse_unconfigured
from corral.core.jobspec.events import RUN_AGAIN
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Node
from corral.core.scheduling.schedconfig import SchedulerConfig
from corral.core.scheduling.sharing import shards_to_mb
from corral.core.jobspec.spec import JobSpec, build_spec, check_script_size, update_spec
from corral.core.jobspec.states import JobState, PendingReason
from corral.errors import Conflict, InvalidRequest
from corral.executor.directory_access import DirectoryAccess, can_enter
from corral.server.accounts import home_of, may_use
from corral.server.inserts import GroupCommit
from corral.server.job_table import JobTable, pending
from corral.server.settings import ServiceSettings
from corral.store.jobs import JobStore

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Submissions:
    """Submits and updates of pending jobs; `changed` is called when the table's jobs changed."""

    def __init__(
        self, *, settings: ServiceSettings, backend: Backend, nodes: Sequence[Node], config: SchedulerConfig,
        table: JobTable, store: JobStore, clock: Callable[[], float],
        changed: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.nodes = tuple(nodes)
        self.config = config
        self.table = table
        self.store = store
        self._changed = changed
        self.clock = clock
        self.directories = DirectoryAccess()  # submitters' directories, checked as them
        # the one thread that writes to the database off the event loop: submits' group commits here,
        # and the starts and ends `PlacedJobs` records; one, so that those writes never interleave
        self.db_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-db")
        # refuses a job for a reservation that is not there or not its (`corral.server.reserving`)
        self.check_reservation: Callable[[JobSpec, bool], None] = lambda spec, privileged: None
        self.inserts = GroupCommit(store, self.db_thread, clock=clock, inserted=self._inserted)

    async def submit(self, request: Mapping[str, Any], user: str, privileged: bool, parent: int | None = None,
                     asked_by: str | None = None) -> Job:
        """Validate, refuse what could never run, persist; the job is acknowledged once committed.
        `parent`: the job this one runs again (`corral.server.relaunching`), at `asked_by`'s request (its timeline
        says so)."""
        spec = self.prepare(request, user, privileged)
        if parent is not None:
            spec = replace(spec, parent=parent)
        self.check_request(spec)
        spec = self.place(spec)
        self.check_reservation(spec, privileged)
        key = (spec.user, spec.qos)
        self.table.per_user[key] += 1  # counted now, so that concurrent submits cannot overshoot a limit
        try:
            note = (RUN_AGAIN, {"by_user": asked_by, "of_job": parent}) if parent is not None and asked_by else None
            return await self.inserts.insert(spec, note)
        except BaseException:
            self.table.per_user[key] -= 1
            raise

    def prepare(self, request: Mapping[str, Any], user: str, privileged: bool) -> JobSpec:
        """A submit's spec, built as its submitter and checked, before it is refused or admitted (a forecast
        builds it the same way)."""
        own = user == self.settings.user
        check_script_size(request, self.settings.max_script_mb)
        spec = build_spec(
            request, user=user, log_dir=self.settings.log_dir_of(user),
            default_workdir=os.path.expanduser("~") if own else home_of(user), server_env=self.settings.server_env if own else {},
            can_enter=can_enter if own else self.directories.checker(user),  # as the user: root sees into every home
            max_nodes=self.max_nodes, now=self.clock(),
        )
        check_nice(spec, privileged)
        check_priority(spec, privileged)
        if self.backend.capabilities.schedules_itself:
            if spec.gpu_share_mb:
                raise InvalidRequest("gpu_share", f"the {self.backend.capabilities.name} backend shares GPUs by shards "
                                     "alone", "ask for --gres=shard:N (its gres/shard), or for whole GPUs")
        elif spec.gpu_shards:  # Slurm sizes its own shards; here they are megabytes of one GPU
            spec = replace(spec, gpu_share_mb=shards_to_mb(spec.gpu_shards, self.nodes, self.settings.sharing.shards_per_gpu))
        if spec.interactive and self.backend.terminals is None:
            raise InvalidRequest("interactive", f"the {self.backend.capabilities.name} backend runs interactive jobs "
                                 "with the cluster's own srun and salloc", "run srun or salloc on the cluster's login node")
        if spec.container is not None:
            containers = self.backend.containers
            if containers is None:
                raise InvalidRequest(
                    "image", "this corral server has no container runtime to run images with",
                    "install Podman (apt-get install podman) or Apptainer on the server's machine and restart it, "
                    "or set [containers] runtime in its config.toml; or drop the image and run on the host")
            containers.check(spec.container)
        if not own and spec.inherit_env:
            # another user's job never sees the server's environment; theirs comes with the request (the CLI sends it)
            spec = replace(spec, inherit_env=False, env={"PATH": DEFAULT_PATH, **spec.env})
        access = self.settings.access
        if spec.account is not None and not access.accounts and "account" not in request:
            # a script's #SBATCH -A (or sbatch's) from a cluster, where no accounts are kept: as Slurm without
            # enforced accounting, it is taken and charges nothing
            spec = replace(spec, account=None, warnings=(*spec.warnings, f"--account={spec.account}: this server "
                                                         "keeps no accounts; ignored"))
        if spec.account is not None or access.accounts:
            try:
                spec = replace(spec, account=access.account_for(user, spec.account))
            except InvalidRequest as exc:
                if "account" in request or spec.account is None:
                    raise
                # asked for by an #SBATCH line or sbatch's -A: named as it was written
                reason = exc.message[len("account: "):len(exc.message) - (len(exc.hint) + 3 if exc.hint else 0)]
                raise InvalidRequest("account", f"--account={spec.account}: {reason}", exc.hint) from None
        return spec

    def update(self, job: Job, ref: str, changes: Mapping[str, Any], privileged: bool) -> Job:
        """Change pending `job` (which `ref` named): its limits, priority or resources.

        Raises:
            InvalidRequest: a bad change; Conflict: the job is not pending.
        """
        self._refuse_unconfigured(changes)
        active = self.table.active
        if job.state is not JobState.PENDING or job.id not in active or (job.is_array and "_" in ref):
            kind = "a task that has not started (update the array)" if job.is_array else job.state.value
            raise Conflict(f"job {ref} is {kind}; only pending jobs can be updated")
        # an array's change applies to its tasks not started yet and to those waiting with a record
        targets = [job] + [active[t] for t in self.table.array_tasks.get(job.id, ()) if active[t].state
                           is JobState.PENDING] if job.is_array else [job]
        specs = []
        now = self.clock()
        for target in targets:
            spec = update_spec(target.spec, changes, now)
            if spec.nice < target.spec.nice:
                check_nice(spec, privileged)
            if "priority" in changes:
                check_priority(spec, privileged)
            self.check_request(spec)
            old_key, new_key = (target.spec.user, target.spec.qos), (spec.user, spec.qos or self.config.default_qos)
            counts = target.array_job_id is None
            specs.append((target, self.place(spec, counted=not counts or old_key == new_key), old_key, counts))
        for target, spec, old_key, counts in specs:
            target.spec = spec
            self.store.save_spec(target)
            if counts and old_key != (spec.user, spec.qos):
                self.table.per_user[old_key] -= 1
                self.table.per_user[(spec.user, spec.qos)] += 1
            if target.id in self.table.queue:
                self.table.queue[target.id] = pending(target)
            if "dependency" in changes:  # a new dependency is awaited from now on; a cleared one no longer
                if spec.parsed_dependency is not None:
                    self.table.dependencies[target.id] = spec.parsed_dependency
                else:
                    self.table.dependencies.pop(target.id, None)
        self._changed()
        return self.table.current(job)

    @property
    def max_nodes(self) -> int:
        """The most nodes a job runs on here (the local backend runs each job on this machine)."""
        return self.backend.capabilities.max_nodes

    def close(self) -> None:
        """Let an insert in flight finish (its submitters are owed an answer)."""
        self.db_thread.shutdown(wait=True)
        self.directories.close()

    def _refuse_unconfigured(self, changes: Mapping[str, Any]) -> None:
        if not self.backend.capabilities.schedules_itself:  # there, partitions and QoS are the cluster's
            refuse_unconfigured(changes, self.config)

    def check_request(self, spec: JobSpec) -> None:
        if not self.backend.capabilities.schedules_itself:  # there, the cluster refuses what its nodes cannot run, at submission
            check_runnable(spec, self.nodes)

    def place(self, spec: JobSpec, counted: bool = False) -> JobSpec:
        """Fill in the partition, QoS and default time limit (`corral.core.scheduling.admission.admit`)."""
        queue = self.backend.queue
        if queue is not None:
            # partitions, QoS and their limits are the cluster's: "" leaves the choice to it
            return replace(spec, partition=spec.partition or queue.default_partition or "", qos=spec.qos or "")
        return admit(spec, self.config, nodes=self.nodes, may_use=may_use, sends_mail=self.settings.smtp is not None,
                     unfinished=lambda qos: self.table.per_user[(spec.user, qos)] - (1 if counted else 0),
                     job_exists=lambda job_id: self.table.state_of(job_id) is not None)

    def _inserted(self, jobs: list[Job]) -> None:
        """Submits committed (`corral.server.inserts`): the jobs are the table's now."""
        for job in jobs:
            self.table.track(job, counted=True)
            if job.held:  # submitted held (-H): it says so before the next scheduling pass does
                self.table.reasons[job.id] = PendingReason.HELD
        self._changed()
