"""`LocalBackend`: each job under its own supervisor process on this machine.

Under a root server with an owner lookup (the shared service), each job runs as its owner
(`JobOwners`): the supervisor takes on the owner's account, the job's checkpoint directory and batch
script become the owner's, and its job directory is 0711 so the owner reaches the script by name
without reading launch.json.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from corral.backends.base import (
    Accounting, Capabilities, ClusterQueue, Ended, ForeignJobs, Recovered, Recovery,
)
from corral.backends.local.containers import LocalContainers
from corral.backends.local.owners import JobOwners
from corral.backends.local.settings import LaunchSettings
from corral.backends.local.supervisors import Supervisors
from corral.backends.registry import BackendSetup
from corral.core.jobspec.job import Job, JobProcesses, Outcome
from corral.core.scheduling.resources import Allocation, Gpu, Node
from corral.errors import InvalidRequest
from corral.executor import files
from corral.executor.endings import NODE_FAILURE, append_as_root, cancelled_line
from corral.executor.environment import job_environment
from corral.executor.launch import (
    kill_orphaned_job, read_outcome, request_cancel, spawn_supervisor, supervisor_alive, was_started,
)
from corral.executor.launch_config import LaunchConfig, LaunchConfigError
from corral.executor.log_quota import LogQuota
from corral.executor.mig import caps_major
from corral.executor.users import RunAs, give_dir
from corral.home import HomeLayout

READY_TIMEOUT_S = 10.0  # how long `start` waits for a new supervisor to have started its job
READY_CHECK_S = 0.005
TERMINAL_CONNECT_TIMEOUT_S = 120.0  # an srun whose client never connects once its job runs: the job ends


class LocalBackend:
    capabilities = Capabilities("local", samples_processes=True, runs_jobs_here=True)
    queue: ClusterQueue | None = None  # corral's scheduler places every job
    accounting: Accounting | None = None  # efficiency comes from the monitor's samples
    foreign_jobs: ForeignJobs | None = None

    def __init__(
        self, home: str, settings: LaunchSettings, *, owner_lookup: Callable[[str], RunAs | None] | None = None,
        user_log_quota_mb: int | None = None, clock: Callable[[], float] = time.time,
        containers: LocalContainers | None = None,
    ) -> None:
        """
        Args:
            owner_lookup: the account a job of a user runs as, None for this process's own (`JobOwners`).
            user_log_quota_mb: each user's running jobs' logs together (`LogQuota`).
            containers: the runtime jobs' images run with; None: jobs with an image are refused.
        """
        self.layout = HomeLayout(home)
        self.settings = settings
        self.owners = JobOwners(home, owner_lookup)
        self.supervisors = Supervisors()
        self.log_quota = (LogQuota(user_log_quota_mb, self.layout.log_ledgers, self.layout.jobs)
                          if user_log_quota_mb else None)
        if self.log_quota is not None:
            self.log_quota.prepare()  # a restarted server first drops what supervisors that died left
        self.clock = clock
        self.containers: LocalContainers | None = containers

    @property
    def home(self) -> str:
        return self.layout.root

    @property
    def jobs_dir(self) -> str:
        return self.layout.jobs

    @property
    def checkpoints_dir(self) -> str:
        return self.layout.checkpoints

    @property
    def placement(self) -> LocalBackend:
        return self

    @property
    def processes(self) -> LocalBackend:
        return self

    def close(self) -> None:
        pass  # supervisors outlive the server by design; nothing of the backend's runs in its threads

    def job_dir(self, job_id: int) -> str:
        return self.layout.job_dir(job_id)

    @property
    def terminals(self) -> LocalBackend:
        return self

    def terminal_socket(self, job_id: int) -> str:
        """Where an interactive job's client connects (`corral.executor.terminal`)."""
        return os.path.join(self.job_dir(job_id), files.TERMINAL)

    def start(self, job: Job, allocation: Allocation) -> None:
        """Launch the job under a new supervisor.

        Raises:
            InvalidRequest: the owner lookup refuses the job's user (no account on this machine).
        """
        owner = self.owners.of(job.spec.user)
        job_dir = self.job_dir(job.id)
        os.makedirs(job_dir, exist_ok=True)
        if owner is not None:
            os.chmod(job_dir, 0o711)  # the owner runs its script from here; launch.json stays 0600 root's
        self.supervisors.starting(job.id)
        for stale in (files.RESULT, files.STARTED, files.CANCEL, files.PREEMPT, files.FAIL, files.NODE_FAIL):
            try:
                os.unlink(os.path.join(job_dir, stale))
            except FileNotFoundError:
                pass
        checkpoint_dir = self.layout.checkpoint_dir(job.id)
        os.makedirs(checkpoint_dir, mode=0o700, exist_ok=True)  # a job's checkpoints are its owner's
        if owner is not None:
            give_dir(checkpoint_dir, owner, 0o700)
        if job.spec.script is not None:
            script_path = os.path.join(job_dir, files.SCRIPT)
            with open(script_path, "w") as f:
                f.write(job.spec.script)
            os.chmod(script_path, 0o700)
            if owner is not None:
                os.chown(script_path, owner.uid, owner.gid)
            argv = [script_path, *job.spec.script_args]
        else:
            argv = list(job.spec.command)
        stdout = job.log_path("stdout")
        warning = None
        if job.spec.warn_signal:
            from corral.core.jobspec.spec import parse_signal

            warning = parse_signal(job.spec.warn_signal)
        settings = self.settings
        env = job_environment(
            job, allocation, server_env=settings.server_env, checkpoint_dir=checkpoint_dir,
            server_url=settings.server_url(), home=self.home, slurm_commands=settings.slurm_commands,
            gpu_uuids=settings.gpu_uuids,
        )
        container = None
        cgroup = settings.cgroup_of(job, allocation)
        if job.spec.container is not None and self.containers is not None:
            cgroup = self.containers.cgroup(cgroup)
            container = self.containers.launch(
                job, allocation, owner, checkpoint_dir=checkpoint_dir, server_env=settings.server_env,
                script=argv[0] if job.spec.script is not None else None,
                cgroup_layout=settings.cgroup_layout, gpu_devices=settings.gpu_devices,
                gpu_uuids=settings.gpu_uuids).to_json()
            env = self.containers.environment(env, allocation, settings.gpu_uuids)
        config = LaunchConfig(
            job_ref=job.ref,
            node=allocation.node,  # the stop line in its stderr names it, as Slurm's does
            argv=tuple(argv),
            env=env,
            cwd=job.spec.workdir,
            stdout=stdout,
            stderr=job.log_path("stderr") if job.spec.stderr is not None else stdout,
            time_limit_s=job.spec.time_limit_s,
            mem_limit_mb=job.spec.mem_mb,
            kill_grace_s=settings.kill_grace_s,
            max_log_mb=settings.max_log_mb,
            log_reserve_mb=settings.log_reserve_mb,
            log_quota=self._log_quota(job.spec.user),
            append_logs=job.restarts > 0 or job.spec.open_mode == "append",
            run_as=owner.to_dict() if owner is not None else None,
            umask=job.spec.umask,
            max_processes=settings.max_job_processes,
            cgroup=cgroup,
            warn_signal=warning.number if warning else None,
            warn_before_s=warning.before_s if warning else 0.0,
            # as Slurm's: B: for the batch shell alone, else the job's steps; a command is its own batch shell
            warn_batch=warning is not None and (warning.batch or job.spec.script is None),
            condor_log={
                "path": job.user_log_path(),
                "cluster": job.array_job_id if job.array_job_id is not None else job.id,
                "proc": job.array_task_id or 0,
                "submit_time": job.submit_time,
            } if job.spec.user_log else None,
            interactive={
                "socket": self.terminal_socket(job.id), "mode": job.spec.interactive,
                "grace_s": settings.interactive_grace_s, "connect_timeout_s": TERMINAL_CONNECT_TIMEOUT_S,
            } if job.spec.interactive else None,
            container=container,
        )
        # the outcome's room, set aside while there is some: it is written however full the disk is then
        files.reserve(os.path.join(job_dir, files.RESULT_RESERVED), files.RESULT_RESERVE_BYTES)
        child = spawn_supervisor(job_dir, config)
        self.supervisors.spawned(job.id, child)
        self._await_supervisor(job_dir, child)

    def _log_quota(self, user: str) -> dict[str, Any] | None:
        """The owner's share of the per-user log quota, for the supervisor (`corral.executor.log_ledger`)."""
        if self.log_quota is None:
            return None
        return {"ledger": self.layout.log_ledger(user), "user": user, "quota_mb": self.log_quota.quota_mb}

    def _await_supervisor(self, job_dir: str, child: subprocess.Popen[bytes]) -> None:
        """Wait (in the launching thread, never the server's loop) until the supervisor has started
        the job, recorded an outcome or exited, for at most READY_TIMEOUT_S. A launcher with a few
        threads then has at most that many supervisors starting up at once: a thousand Python
        processes booting together would starve the server of CPU on a small machine."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        started, result = os.path.join(job_dir, files.STARTED), os.path.join(job_dir, files.RESULT)
        while time.monotonic() < deadline:
            if os.path.exists(started) or os.path.exists(result) or child.poll() is not None:
                return
            time.sleep(READY_CHECK_S)

    def job_processes(self, job_id: int) -> JobProcesses | None:
        """The running job's main process and cgroup, once its supervisor has started it."""
        return self.supervisors.job_processes(job_id, self.job_dir(job_id))

    def job_pid(self, job_id: int) -> int | None:
        """The running job's main process (its session leader), once its supervisor has started it."""
        processes = self.job_processes(job_id)
        return processes.pid if processes is not None else None

    def final_usage(self, job_id: int) -> dict[str, float] | None:
        """CPU seconds and peak memory of an ended job, as the kernel counted them for its supervisor."""
        result = files.read_json(os.path.join(self.job_dir(job_id), files.RESULT))
        usage = result.get("usage") if result else None
        return usage if isinstance(usage, dict) else None

    def cancel(self, job: Job, by: str | None = None) -> None:
        request_cancel(self.job_dir(job.id), content=by or "")  # the supervisor names them in the job's stderr

    def fail(self, job: Job, reason: str) -> None:
        self._fail(job.id, reason)

    def _fail(self, job_id: int, reason: str) -> None:
        """End a running job FAILED, its stderr saying why (the supervisor reads the reason from the mark)."""
        request_cancel(self.job_dir(job_id), mark=files.FAIL, content=reason)

    def preempt(self, job: Job) -> None:
        request_cancel(self.job_dir(job.id), mark=files.PREEMPT)

    def requeue(self, job: Job, node_failed: bool = False) -> None:
        request_cancel(self.job_dir(job.id), mark=files.PREEMPT, content=files.REQUEUE_NODE_FAIL if node_failed
                       else files.REQUEUE)

    def fail_node(self, job: Job, reason: str) -> None:
        request_cancel(self.job_dir(job.id), mark=files.NODE_FAIL, content=reason)

    def poll(self, running: Iterable[Job]) -> list[Ended]:
        """Jobs among `running` that have ended (one thread at a time calls this; it may be
        another than the one that started them)."""
        ended: list[Ended] = []
        now = self.clock()
        for job in running:
            job_dir = self.job_dir(job.id)
            # most jobs are still running: a look for the file costs a third of a failed open
            outcome = read_outcome(job_dir) if os.path.exists(os.path.join(job_dir, files.RESULT)) else None
            if outcome is None and self.supervisors.liveness_due(job.id, now):
                child = self.supervisors.child(job.id)
                if (child is None or child.poll() is not None) and not supervisor_alive(job_dir):
                    outcome = read_outcome(job_dir) or self._lost(job_dir, now)
            if outcome is not None:
                ended.append(Ended(job, outcome))
                self.supervisors.ended(job.id)
        self.supervisors.reap()
        return ended

    def recover(self, job: Job) -> Recovery:
        job_dir = self.job_dir(job.id)
        outcome = read_outcome(job_dir)
        if outcome is not None:
            return Recovery(Recovered.ENDED, outcome)
        if supervisor_alive(job_dir):
            return Recovery(Recovered.RUNNING)
        outcome = read_outcome(job_dir)  # it may have finished between the two looks
        if outcome is not None:
            return Recovery(Recovered.ENDED, outcome)
        if not was_started(job_dir):
            return Recovery(Recovered.NEVER_STARTED)
        return Recovery(Recovered.LOST, self._lost(job_dir, self.clock()))

    def _lost(self, job_dir: str, now: float) -> Outcome:
        kill_orphaned_job(job_dir)
        _note_node_failure(job_dir, now)
        return Outcome("NODE_FAIL", None, None, now, "the job's supervisor died without recording an outcome")


def _note_node_failure(job_dir: str, now: float) -> None:
    """Its supervisor is gone, so the server says in the job's stderr, in Slurm's words, that it ended."""
    data = files.read_json(os.path.join(job_dir, files.LAUNCH))  # written by the server: 0600, its own
    try:
        config = LaunchConfig.from_json(data) if data else None
    except LaunchConfigError:
        return  # not a launch this server can read: its job's stderr is left as it is
    if config is None or not config.stderr:
        return
    owner = config.run_as
    line = cancelled_line(str(config.job_ref or os.path.basename(job_dir)),
                          str(config.node or os.uname().nodename), now, NODE_FAILURE)
    append_as_root(config.stderr, int(owner["uid"]) if owner else None, line)


class LocalKind:
    """This machine, as `corral.backends.registry` opens it."""

    capabilities = LocalBackend.capabilities

    def nodes(self, settings: Any) -> list[Node]:
        from corral.executor.gpus import build_node

        return [build_node(settings.inventory)]

    def open(self, setup: BackendSetup) -> LocalBackend:
        s = setup.settings
        gpus = setup.nodes[0].gpus if setup.nodes else ()
        settings = LaunchSettings(
            kill_grace_s=s.kill_grace_s, server_env=setup.server_env, server_url=setup.server_url,
            interactive_grace_s=s.interactive_grace_s,
            max_log_mb=s.max_log_mb, log_reserve_mb=s.log_reserve_mb, max_job_processes=s.max_job_processes,
            cgroup_layout=setup.cgroup_layout, slurm_commands=s.slurm_commands,
            gpu_minors={g.index: g.minor if g.minor is not None else g.index for g in gpus},
            gpu_devices=any(g.uuid for g in gpus), gpu_uuids={g.index: g.uuid for g in gpus if g.uuid},
            gpu_caps={g.index: g.caps for g in gpus if g.caps}, caps_major=mig_caps_major(gpus),
        )
        return LocalBackend(setup.home, settings, owner_lookup=setup.owner_lookup,
                            user_log_quota_mb=s.user_log_quota_mb, containers=_containers(setup))


def mig_caps_major(gpus: tuple[Gpu, ...]) -> int | None:
    """/dev/nvidia-caps's major where a MIG slice here has instances to keep from other jobs."""
    return caps_major() if any(g.caps for g in gpus) else None


def _containers(setup: BackendSetup) -> LocalContainers | None:
    """The runtime for jobs' images: `[containers] runtime`, or one found on the server's PATH.

    Raises:
        InvalidRequest: the configured runtime is unknown or not installed (`corral up` stops with it).
    """
    from corral.executor.cgroups.placement import home_key
    from corral.executor.containers import find_runtime

    try:
        found = find_runtime(setup.settings.container_runtime, setup.server_env.get("PATH"))
    except ValueError as exc:
        raise InvalidRequest("containers.runtime", str(exc),
                             "install it, or name one that is installed: podman, apptainer, singularity, docker") from None
    if found is None:
        return None
    name, binary = found
    rootless = os.geteuid() != 0
    ulimits: tuple[str, ...] = ()
    if name == "podman" and not rootless:  # rootless Podman keeps within the hard limits itself
        from corral.executor.containers.ulimits import container_ulimits

        ulimits, note = container_ulimits(setup.server_env)
        if note:  # said at `corral up`, as the job isolation is (server.log when detached)
            print(f"corral: warning: {note}", file=sys.stderr, flush=True)
    return LocalContainers(name, binary, rootless=rootless, home_key=home_key(setup.home)[:8], ulimits=ulimits)


KIND = LocalKind()
