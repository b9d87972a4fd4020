"""Docker: its daemon runs containers as root, and membership of its group is root's equal, so a shared
server uses it only when an admin names it (`[containers] runtime = "docker"`). GPUs through the NVIDIA
Container Toolkit (`--gpus "device=2,3"`)."""

from __future__ import annotations

from collections.abc import Sequence

from corral.executor.containers import ContainerLaunch, Driver, entered_as_owner, oci_options


class Docker(Driver):
    name = "docker"

    def remove_argv(self, launch: ContainerLaunch) -> list[str]:
        return [launch.binary, "rm", "--force", launch.name]

    def run_argv(self, launch: ContainerLaunch, image: str, argv: Sequence[str], env_file: str | None,
                 entrypoint: Sequence[str] = ()) -> list[str]:
        out = [launch.binary, "run", "--rm", "--name", launch.name, "--pid=host", "--network=host", "--ipc=host",
               "--security-opt=no-new-privileges", "--cap-drop=ALL"]
        if launch.user:
            uid, gid, groups = launch.user
            out += [f"--user={uid}:{gid}", *(f"--group-add={g}" for g in groups if g != gid)]
        # the quotes are Docker's own syntax for a list inside the option's value
        gpus = [f'--gpus="device={",".join(launch.gpu_names)}"'] if launch.gpu_devices and launch.gpus else []
        out += oci_options(launch, gpus, env_file, "/")  # the daemon's runc would enter the directory as root
        return [*out, *entered_as_owner(launch, image, argv, entrypoint)]
