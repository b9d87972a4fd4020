"""Docker: its daemon runs containers as root, and membership of its group is root's equal, so a shared
server uses it only when an admin names it (`[containers] runtime = "docker"`). GPUs through the NVIDIA
Container Toolkit (`--gpus "device=2,3"`)."""

from __future__ import annotations

from collections.abc import Sequence

from corral.executor.containers import ContainerLaunch, Driver


class Docker(Driver):
    name = "docker"

    def remove_argv(self, launch: ContainerLaunch) -> list[str]:
        return [launch.binary, "rm", "--force", launch.name]

    def run_argv(self, launch: ContainerLaunch, image: str, argv: Sequence[str], env_file: str | None) -> list[str]:
        out = [launch.binary, "run", "--rm", "--name", launch.name, "--pid=host", "--network=host", "--ipc=host",
               "--security-opt=no-new-privileges", "--cap-drop=ALL"]
        if launch.user:
            uid, gid, groups = launch.user
            out += [f"--user={uid}:{gid}", *(f"--group-add={g}" for g in groups if g != gid)]
        if launch.cgroup_parent:
            out.append(f"--cgroup-parent={launch.cgroup_parent}")
        if launch.cpus:
            out.append(f"--cpus={launch.cpus}")
        if launch.memory_mb:
            out += [f"--memory={launch.memory_mb}m", f"--memory-swap={launch.memory_mb}m"]
        if launch.gpu_devices and launch.gpus:
            # the quotes are Docker's own syntax for a list inside the option's value
            out.append(f'--gpus="device={",".join(map(str, launch.gpus))}"')
        for source, target, read_only in launch.mounts:
            out.append(f"--volume={source}:{target}:{'ro' if read_only else 'rw'}")
        out.append(f"--workdir={launch.workdir}")
        if launch.interactive:
            out += ["--interactive", *(["--tty"] if launch.interactive == "pty" else [])]
        if env_file:
            out.append(f"--env-file={env_file}")
        return [*out, image, *argv]
