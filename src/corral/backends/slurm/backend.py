"""The Backend interface on Slurm: Slurm decides where and when jobs run; corral submits, watches and records.

Every job goes to Slurm as soon as it may (`corral.backends.slurm.submit`), keeps its corral id and
records Slurm's; one watcher reads the state of all of them (`corral.backends.slurm.watcher`);
Slurm's epilog can also tell the server at once (`nudge`).
"""

from __future__ import annotations

import getpass
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from corral.backends.base import Capabilities, JobUpdate, Placement, ProcessView, Recovered, Recovery, Terminals
from corral.backends.registry import BackendSetup
from corral.backends.slurm.cluster import SlurmCluster, SlurmError
from corral.backends.slurm.submit import SlurmSubmitter
from corral.backends.slurm.watcher import POLL_INTERVAL_S, SlurmWatcher
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Node
from corral.core.jobspec.spec_container import ContainerSpec
from corral.core.jobspec.spec import MAX_NODES
from corral.errors import Conflict, InvalidRequest, NotFound


class PyxisContainers:
    """Jobs' images run by the cluster's Pyxis plugin (enroot), from `#SBATCH --container-image`."""

    runtime = "pyxis"

    def check(self, container: ContainerSpec) -> None:
        if container.image.endswith(".sif"):
            raise InvalidRequest("image", "Pyxis (enroot) cannot run a SIF file",
                                 "give a registry image, or a squashfs file made with enroot import")


class SlurmBackend:
    capabilities = Capabilities("slurm", schedules_itself=True, max_nodes=MAX_NODES, attach=True,
                                efficiency_from_accounting=True)
    placement: Placement | None = None  # Slurm places jobs itself
    processes: ProcessView | None = None  # they run on compute nodes, out of this machine's sight
    terminals: Terminals | None = None  # the cluster's own srun and salloc run interactive jobs there
    containers = PyxisContainers()  # the image goes to Pyxis (#SBATCH --container-image)

    def __init__(self, cluster: SlurmCluster, *, home: str, partition: str | None = None, account: str | None = None,
                 server_url: Callable[[], str | None] = lambda: None, job_token: Callable[[Job], str] | None = None,
                 poll_interval_s: float = POLL_INTERVAL_S, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self.default_partition = partition
        self.submitter = SlurmSubmitter(cluster, home=home, partition=partition, account=account,
                                        server_url=server_url, job_token=job_token)
        self.watcher = SlurmWatcher(cluster, poll_interval_s=poll_interval_s, clock=clock, monotonic=monotonic)

    @property
    def queue(self) -> SlurmBackend:
        return self

    @property
    def accounting(self) -> SlurmBackend:
        return self

    @property
    def foreign_jobs(self) -> SlurmBackend:
        return self

    # -- the cluster queue ------------------------------------------------------------------------

    def submit(self, job: Job, dependency: str | None) -> str:
        backend_id = self.submitter.submit(job, dependency)
        self.watcher.soon()
        return backend_id

    def hold(self, job: Job, held: bool) -> None:
        if job.backend_id:
            # uhold: JobHeldUser, as `corral hold` means
            self.cluster.hold([job.backend_id], release=not held)

    def cancel_task(self, array: Job, task_id: int) -> None:
        if array.backend_id:
            self.cluster.cancel([f"{array.backend_id}_{task_id}"])

    def cancel_waiting_tasks(self, array: Job) -> None:
        if array.backend_id:
            self.cluster.cancel([array.backend_id], state="PENDING")

    def watch(self, submitted: Mapping[str, Job]) -> list[JobUpdate] | None:
        return self.watcher.watch(submitted)

    def nudge(self) -> None:
        self.watcher.nudge()

    # -- stopping and recovering ------------------------------------------------------------------

    def cancel(self, job: Job, by: str | None = None) -> None:  # slurmstepd writes the job's line itself
        if job.backend_id:
            self.cluster.cancel([job.backend_id])

    def preempt(self, job: Job) -> None:
        if job.backend_id:
            self.cluster.requeue([job.backend_id])

    def recover(self, job: Job) -> Recovery:
        # Slurm kept running it while the server was away; the next read says what became of it
        return Recovery(Recovered.RUNNING)

    def close(self) -> None:
        self.watcher.close()

    # -- accounting and foreign jobs --------------------------------------------------------------

    def efficiency(self, job: Job) -> dict[str, Any]:
        """CPU and memory efficiency of a job, from Slurm's accounting.

        Raises:
            Conflict: accounting has no record of it.
        """
        from corral.backends.slurm.efficiency import efficiency

        try:
            return efficiency(self.cluster.efficiency_record(job.backend_id or ""))
        except (SlurmError, ValueError) as exc:
            raise Conflict(f"Slurm's accounting has no efficiency for job {job.id}: {getattr(exc, 'message', exc)}") from None

    def check_id(self, backend_id: str) -> None:
        """Raises InvalidRequest for what is not a Slurm job id."""
        if not re.fullmatch(r"[0-9]{1,12}", backend_id):
            raise InvalidRequest("slurm_job_id", f"{backend_id!r} is not a Slurm job id", "give the number sbatch printed")

    def describe(self, backend_id: str) -> dict[str, Any]:
        """A job sbatch'ed outside corral, as a submit request (with `partition`).

        Raises:
            NotFound: Slurm does not know it.
        """
        try:
            info = self.cluster.job_info(backend_id)
        except SlurmError:
            raise NotFound(f"Slurm has no job {backend_id} (finished jobs leave scontrol after MinJobAge)") from None
        workdir = info.get("WorkDir") or "/"
        request: dict[str, Any] = {
            "command": [info.get("Command") or f"slurm-job-{backend_id}"], "name": info.get("JobName") or backend_id,
            "workdir": workdir, "cpus": int(info.get("NumCPUs") or 1),
            "stdout": _literal_path(info.get("StdOut") or os.path.join(workdir, f"slurm-{backend_id}.out")),
            "partition": info.get("Partition") or "",
        }
        if info.get("StdErr") and info.get("StdErr") != info.get("StdOut"):
            request["stderr"] = _literal_path(info["StdErr"])
        return request


def _literal_path(path: str) -> str:
    """A path Slurm already expanded, as a corral pattern that expands to itself."""
    return path.replace("%", "%%")


class SlurmKind:
    """A Slurm cluster reached from this machine (a login node), as `corral.backends.registry` opens it."""

    capabilities = SlurmBackend.capabilities

    def nodes(self, settings: Any) -> list[Node]:
        try:
            return SlurmCluster(user=getpass.getuser()).nodes()
        except SlurmError as exc:
            raise InvalidRequest("backend", f"cannot reach Slurm: {exc.message}",
                                 "run corral up --backend slurm where sinfo and sbatch work (a login node)") from None

    def open(self, setup: BackendSetup) -> SlurmBackend:
        s = setup.settings
        return SlurmBackend(SlurmCluster(user=getpass.getuser()), home=setup.home, partition=s.slurm_partition,
                            account=s.slurm_account, server_url=setup.server_url, job_token=setup.job_token)


KIND = SlurmKind()
