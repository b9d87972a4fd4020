"""Container jobs on this machine: which runtime, what it may run, and each job's `ContainerLaunch`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation
from corral.core.jobspec.spec_container import ContainerSpec
from corral.errors import InvalidRequest
from corral.executor.containers import ContainerLaunch, driver_for, runtime_environment, visible_devices
from corral.executor.mig import by_uuid
from corral.executor.users import RunAs


@dataclass(frozen=True)
class LocalContainers:
    """The runtime this server runs jobs' images with (`Backend.containers`)."""

    runtime: str
    binary: str
    rootless: bool
    """The server is not root: the runtime runs as the job's owner, who is the server's user."""
    home_key: str
    """Keeps two servers' containers of job 1 apart (their names)."""
    ulimits: tuple[str, ...] = ()
    """`--ulimit` values every container gets, where the runtime's own exceed what it may set here."""

    def check(self, container: ContainerSpec) -> None:
        """Raises InvalidRequest (field `image`) for an image file this runtime cannot read."""
        if container.image.endswith(".sif") and self.runtime not in ("apptainer", "singularity"):
            raise InvalidRequest("image", f"{container.image} is a SIF file, which {self.runtime} cannot run",
                                 "give an OCI image (docker-archive:/path.tar, a registry image), or ask the admin "
                                 "to install Apptainer")

    def launch(self, job: Job, allocation: Allocation, owner: RunAs | None, *, checkpoint_dir: str, script: str | None,
               server_env: Mapping[str, str], cgroup_layout: Mapping[str, Any] | None,
               gpu_devices: bool, gpu_uuids: Mapping[int, str] | None = None) -> ContainerLaunch:
        """What the job's supervisor runs the job's image with; `gpu_uuids`: the node's, by index (MIG slices
        are passed by UUID)."""
        spec = job.spec
        container = spec.container
        assert container is not None
        mounts: dict[str, tuple[str, str, bool]] = {}

        def mount(source: str, target: str, read_only: bool = False) -> None:
            mounts[target] = (source, target, read_only)  # a later mount at the same place wins, as the request's

        mount(spec.workdir, spec.workdir)
        home = owner.home if owner is not None else os.path.expanduser("~")
        if container.mount_home and home and home != "/":
            mount(home, home)
        mount(checkpoint_dir, checkpoint_dir)
        if script is not None:
            mount(script, script, True)  # a batch script runs inside, as sbatch --container-image runs it under Pyxis
        for item in container.mounts:
            mount(item.source, item.target, item.read_only)
        parent, leftovers = _cgroup_places(cgroup_layout, job.id)
        user = None
        if owner is not None and not self.rootless:
            user = (owner.uid, owner.gid, tuple(owner.groups))
        elif not self.rootless:
            user = (os.getuid(), os.getgid(), tuple(os.getgroups()))
        return ContainerLaunch(
            runtime=self.runtime, binary=self.binary, image=container.image,
            name=f"corral-{self.home_key}-{job.ref.replace('_', '-')}",
            workdir=container.workdir or spec.workdir, mounts=tuple(mounts.values()), env_names=container.env,
            gpus=tuple(allocation.gpu_ids), gpu_uuids=by_uuid(allocation.gpu_ids, gpu_uuids or {}),
            gpu_devices=gpu_devices and bool(allocation.gpu_ids), cpus=spec.cpus,
            memory_mb=spec.mem_mb or None if cgroup_layout is None else None, user=user,
            remap_root=container.remap_root, rootless=self.rootless, interactive=spec.interactive, mount_home=container.mount_home,
            cgroup_parent=parent, leftover_cgroups=leftovers, runtime_env=runtime_environment(server_env),
            ulimits=self.ulimits,
        )

    def cgroup(self, cgroup: dict[str, Any] | None) -> dict[str, Any] | None:
        """The job's cgroup for a container job. On cgroup v1 a nested cgroup may allow no device its parent
        denies, and Podman and Docker start every container with `c *:* m` allowed: the job's cgroup then
        denies nothing, and the container's own (the devices passed to it alone) keeps it from other GPUs."""
        if cgroup is None or self.runtime not in ("podman", "docker") or cgroup["layout"].get("version") != 1:
            return cgroup
        return {**cgroup, "deny_devices": []}

    def environment(self, env: Mapping[str, str], allocation: Allocation,
                    gpu_uuids: Mapping[int, str] | None = None) -> dict[str, str]:
        """The job's environment as the container sees it: its GPUs numbered as the container numbers them."""
        out = dict(env)
        if allocation.gpu_ids:
            shown = visible_devices(driver_for(self.runtime, self.rootless), allocation.gpu_ids,
                                    by_uuid(allocation.gpu_ids, gpu_uuids or {}))
            out["CUDA_VISIBLE_DEVICES"] = shown  # CORRAL_GPUS and SLURM_JOB_GPUS keep the host's numbers
        return out


def _cgroup_places(layout: Mapping[str, Any] | None, job_id: int) -> tuple[str | None, tuple[str, ...]]:
    """The job's cgroup as a runtime names a parent, and the directories the runtime will make for it in
    hierarchies corral holds nothing in (removed when the job ends)."""
    if not layout or not layout.get("parent"):
        return None, ()
    name = f"job_{job_id}"
    return f"{layout['parent']}/{name}", tuple(os.path.join(other, name) for other in layout.get("others", ()))
