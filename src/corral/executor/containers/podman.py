"""Podman: rootful under a root server (the job's owner inside through --user), rootless under a
personal one (--userns=keep-id: the user is themself inside). GPUs as CDI devices
(`nvidia.com/gpu=N`, from `nvidia-ctk cdi generate`)."""

from __future__ import annotations

from collections.abc import Sequence

from corral.executor.containers import ContainerLaunch, Driver, entered_as_owner, oci_options


class Podman(Driver):
    name = "podman"

    def __init__(self, rootless: bool = False) -> None:
        self.rootless = rootless
        self.runs_as_owner = rootless

    def remove_argv(self, launch: ContainerLaunch) -> list[str]:
        return [launch.binary, "rm", "--force", "--ignore", "--time", "0", launch.name]

    def run_argv(self, launch: ContainerLaunch, image: str, argv: Sequence[str], env_file: str | None,
                 entrypoint: Sequence[str] = ()) -> list[str]:
        out = [launch.binary, "run", "--rm", "--replace", "--name", launch.name,
               # what a batch job has of the host, no more: its processes, network and shared memory
               "--pid=host", "--network=host", "--ipc=host",
               "--security-opt=no-new-privileges", "--log-driver=none"]
        out += _identity(self, launch)
        out += [f"--ulimit={limit}" for limit in launch.ulimits]
        devices = [f"--device=nvidia.com/gpu={name}" for name in launch.gpu_names] if launch.gpu_devices else []
        if self.rootless:  # the runtime is the owner: it may enter the working directory itself
            return [*out, *oci_options(launch, devices, env_file, launch.workdir), image, *argv]
        return [*out, *oci_options(launch, devices, env_file, "/"), *entered_as_owner(launch, image, argv, entrypoint)]


def _identity(driver: Podman, launch: ContainerLaunch) -> list[str]:
    """Who the job is inside: its owner, never root (root inside only as the owner, mapped)."""
    if driver.rootless:
        return ["--userns=keep-id", "--cap-drop=all"]
    if launch.remap_root and launch.user:
        uid, gid, _ = launch.user
        # root inside a user namespace of its own, mapped onto the owner: the owner's rights on the host
        return [f"--uidmap=0:{uid}:1", f"--gidmap=0:{gid}:1", "--user=0:0"]
    if launch.user:
        uid, gid, groups = launch.user
        return [f"--user={uid}:{gid}", *(f"--group-add={g}" for g in groups if g != gid), "--cap-drop=all"]
    return ["--cap-drop=all"]
