"""What every job's supervisor is launched with: the server's limits, environment and cgroup placement."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation
from corral.executor.cgroups import DEVICE_NVIDIA_MAJOR


@dataclass(frozen=True)
class LaunchSettings:
    """The same for every job of this server; each job's own limits come from its spec."""

    kill_grace_s: float
    server_env: Mapping[str, str]
    server_url: Callable[[], str | None]
    """Read at each launch: the server knows its address only once it listens."""
    max_log_mb: int | None = None
    interactive_grace_s: float = 30.0
    """An interactive job (srun, salloc) whose client has been gone this long is ended: an abandoned
    shell never holds GPUs."""
    log_reserve_mb: int | None = None
    """A job whose logs grow while their filesystem has less than this free is stopped (FAILED): the
    last of the disk is for the server and every job."""
    max_job_processes: int | None = None
    """Each job's process cap: a fork bomb fails its own forks instead of exhausting the machine's pids.
    With cgroups it is the job's `pids.max`; without, RLIMIT_NPROC for jobs that run as their owner
    (the kernel then counts all of the owner's processes, not one job's)."""
    cgroup_layout: Mapping[str, Any] | None = None
    """Where jobs' cgroups go (`corral.executor.cgroups.placement`); None without cgroups (jobs are
    followed by process group and session)."""
    slurm_commands: str | None = None
    """The directory of corral's Slurm commands (`corral slurm-path`), first on every job's PATH: `srun`
    in a job is then a step of it. None: jobs' PATH as their environment has it."""
    gpu_devices: bool = False
    """The node's GPUs are devices NVML found (a container is given them); declared GPUs have none."""
    gpu_minors: Mapping[int, int] = field(default_factory=dict)
    """Each GPU's device minor (`/dev/nvidiaN`), by index: a job may open only its own where the layout
    controls devices. MIG slices share their parent's."""
    gpu_caps: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    """Each MIG slice's /dev/nvidia-caps minors, by index: a job may open only its own slices' instances."""
    caps_major: int | None = None
    """The /dev/nvidia-caps major, where the driver has one."""
    gpu_uuids: Mapping[int, str] = field(default_factory=dict)
    """Each GPU's UUID by index, where NVML gave one: a MIG slice is bound by it (`MIG-<uuid>`)."""

    def cgroup_of(self, job: Job, allocation: Allocation) -> dict[str, Any] | None:
        """The job's cgroup for its supervisor: where, and the GPUs of this node that are not its own."""
        if not self.cgroup_layout:
            return None
        deny = []
        if self.cgroup_layout.get("devices"):
            # a device no GPU of the job's is on: MIG slices of one GPU share its /dev/nvidiaN
            own = {minor for index, minor in self.gpu_minors.items() if index in allocation.gpu_ids}
            deny = [["c", DEVICE_NVIDIA_MAJOR, minor] for minor in sorted(set(self.gpu_minors.values()) - own)]
            if self.caps_major is not None:  # and the MIG instances of slices that are not its own
                mine = {m for index, minors in self.gpu_caps.items() if index in allocation.gpu_ids for m in minors}
                others = {m for minors in self.gpu_caps.values() for m in minors} - mine
                deny += [["c", self.caps_major, minor] for minor in sorted(others)]
        return {"layout": dict(self.cgroup_layout), "name": f"job_{job.id}", "deny_devices": deny}
