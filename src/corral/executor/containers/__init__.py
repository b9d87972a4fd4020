"""Jobs in container images on this machine: one small driver per runtime behind one interface.

The server picks the runtime once (`[containers] runtime`, or the first of Podman, Apptainer and
Singularity on PATH; Docker only when an admin names it, its group being root's equal) and each container
job's launch.json carries a `ContainerLaunch`. Its supervisor opens the job's mounts and image file as the
owner and hands the runtime what it opened, never the paths (`held`), then the job's process (`start.exec_container`) brings the image in if it is absent, timing that apart from
the run, and execs the runtime's `run` with the argv its driver builds: never a shell string.

What keeps it a corral job, whatever the runtime: the container's processes sit in a cgroup nested in
the job's (`--cgroup-parent`), so its limits, signals, OOM kills and the monitor's samples are the job's;
they share the host's PID, network and IPC namespaces, as a batch job (and Pyxis's) do; they run as the
owner (`--user uid:gid`, no new privileges, no capabilities), and see the job's GPUs alone, numbered as
the container sees them.

Standard library only: the supervisor imports this, and it starts for every job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

RUNTIMES = ("podman", "apptainer", "singularity", "docker")
FOUND_ON_PATH = ("podman", "apptainer", "singularity")
"""Looked for on PATH, in this order; Docker is used only when `[containers] runtime` names it."""
RUNTIME_LEAF = "runtime"
"""On cgroup v2, the cgroup nested in the job's that holds the runtime's client (`podman run`)."""
OWN_CGROUPS = ("conmon", RUNTIME_LEAF)
"""Cgroups nested in the job's that hold the runtime's processes, not the container's (Podman's monitor)."""
# The runtime's own process environment: the server's, never the job's (a root runtime reading the
# owner's LD_PRELOAD, CONTAINERS_CONF or HOME would run what the owner says as root).
RUNTIME_ENV_KEYS = ("PATH", "HOME", "LANG", "TMPDIR", "XDG_RUNTIME_DIR", "CONTAINERS_CONF",
                    "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF", "REGISTRY_AUTH_FILE", "DOCKER_HOST",
                    "DOCKER_CONFIG", "APPTAINER_CACHEDIR", "SINGULARITY_CACHEDIR", "APPTAINER_TMPDIR")
ARCHIVE_TRANSPORTS = ("docker-archive:", "oci-archive:")
"""Images read from a file, as Podman and skopeo name the transport: `docker-archive:PATH[:REFERENCE]`."""


@dataclass(frozen=True)
class ContainerLaunch:
    """One container job's launch, as launch.json's `container` holds it (keys are the field names)."""

    runtime: str
    binary: str
    image: str
    name: str
    """The container's name: unique per home and job, so a relaunch replaces a leftover."""
    workdir: str
    mounts: tuple[tuple[str, str, bool], ...] = ()
    """(host path, path inside, read-only): the job's own places first, then the request's."""
    env_names: tuple[str, ...] = ()
    """Variables whose job value wins over the image's (--container-env)."""
    gpus: tuple[int, ...] = ()
    """The job's GPUs by the host's index."""
    gpu_uuids: tuple[str, ...] = ()
    """The job's GPUs by UUID, where one is a MIG slice (which the runtimes and CUDA name only so); else empty."""
    gpu_devices: bool = False
    """Pass the GPUs' devices (NVML found them); declared GPUs have none to pass."""
    cpus: int = 0
    memory_mb: int | None = None
    """A limit for the runtime to hold; None where the job's own cgroup holds it (the usual case)."""
    user: tuple[int, int, tuple[int, ...]] | None = None
    """uid, gid and groups inside; None: the runtime runs as the owner already (rootless, Apptainer)."""
    remap_root: bool = False
    interactive: str | None = None
    """srun's or salloc's job: `pty` or `stream`; its stdin is relayed into the container (a terminal for pty)."""
    rootless: bool = False
    """The runtime runs as the owner (a personal server's Podman): no root anywhere."""
    mount_home: bool = True
    """The owner's home is among `mounts` (Apptainer binds it itself unless told not to)."""
    cgroup_parent: str | None = None
    """The job's cgroup, as the runtime names a parent (relative to the hierarchy's root)."""
    leftover_cgroups: tuple[str, ...] = ()
    """The job's directory in hierarchies corral does not hold, which the runtime makes: removed at the end."""
    runtime_env: Mapping[str, str] = field(default_factory=dict)
    ulimits: tuple[str, ...] = ()
    """`--ulimit` values (`nofile=4096:4096`) where root Podman's own exceed the hard limits it may set
    (`containers.ulimits`); empty: the runtime's own."""
    held_image: str | None = None
    """The image as a root runtime reads it, where that is not `image`: an archive through the descriptor
    the supervisor opened as the owner (`containers.held`). Never in launch.json: it names a live process."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ContainerLaunch:
        values = dict(data)
        values["mounts"] = tuple((str(s), str(t), bool(ro)) for s, t, ro in values.get("mounts", ()))
        values["env_names"] = tuple(values.get("env_names", ()))
        values["gpus"] = tuple(int(g) for g in values.get("gpus", ()))
        values["gpu_uuids"] = tuple(str(g) for g in values.get("gpu_uuids", ()))
        user = values.get("user")
        values["user"] = (int(user[0]), int(user[1]), tuple(int(g) for g in user[2])) if user else None
        values["leftover_cgroups"] = tuple(values.get("leftover_cgroups", ()))
        values["runtime_env"] = dict(values.get("runtime_env") or {})
        values["ulimits"] = tuple(str(u) for u in values.get("ulimits", ()))
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime, "binary": self.binary, "image": self.image, "name": self.name,
            "workdir": self.workdir, "mounts": [list(m) for m in self.mounts], "env_names": list(self.env_names),
            "gpus": list(self.gpus), "gpu_uuids": list(self.gpu_uuids), "gpu_devices": self.gpu_devices, "cpus": self.cpus, "memory_mb": self.memory_mb,
            "user": [self.user[0], self.user[1], list(self.user[2])] if self.user else None,
            "remap_root": self.remap_root, "rootless": self.rootless, "interactive": self.interactive,
            "mount_home": self.mount_home, "cgroup_parent": self.cgroup_parent,
            "leftover_cgroups": list(self.leftover_cgroups), "runtime_env": dict(self.runtime_env),
            "ulimits": list(self.ulimits),
        }

    @property
    def gpu_names(self) -> list[str]:
        """The job's GPUs as the runtime's device request names them: their indexes, or their UUIDs (MIG)."""
        return list(self.gpu_uuids) or [str(index) for index in self.gpus]

    @property
    def archive(self) -> str | None:
        """The file the image is read from (an archive or a `.sif`), None for an image by name."""
        for transport in ARCHIVE_TRANSPORTS:
            if self.image.startswith(transport):
                return self.image[len(transport):].partition(":")[0]
        return self.image if self.image.startswith("/") else None


ENTER_WORKDIR = ('cd -- "$1" || { echo "corral: cannot enter the working directory $1 in the container as the '
                 'job\'s owner" >&2; exit 1; }; shift; exec "$@"')
"""What a root runtime's container runs first, as the job's owner, under the image's /bin/sh: enter the job's
working directory, then become its command. runc enters the `--workdir` it is given as root (and creates it
where it is missing), which would take a job through another user's 0700 directory, or make one as root in a
host directory mounted into the container; so a root runtime is given `/`, and the owner's own `cd` does the rest."""


@dataclass(frozen=True)
class ImageFacts:
    """What the runtime says of an image (`Driver.inspect_argv`)."""

    env_names: tuple[str, ...] = ()
    """The variables it sets."""
    entrypoint: tuple[str, ...] = ()
    """Its ENTRYPOINT, which the job's command follows."""

    @classmethod
    def from_config(cls, config: object) -> ImageFacts:
        """From the image's `.Config` as Podman and Docker print it in JSON."""
        if not isinstance(config, dict):
            return cls()
        env, entrypoint = config.get("Env") or [], config.get("Entrypoint") or []
        if isinstance(entrypoint, str):
            entrypoint = [entrypoint]
        return cls(tuple(str(item).partition("=")[0] for item in env if isinstance(item, str)),
                   tuple(str(item) for item in entrypoint))


class Driver:
    """What differs between runtimes: the argv of each step, and who runs it."""

    name = ""
    runs_as_owner = False
    """The runtime itself runs as the job's owner (Apptainer; rootless Podman): no `--user`, and the job's
    process drops to the owner before it execs the runtime."""
    visible_renumbered = True
    """Inside, the job's GPUs are 0..n-1 (their devices alone were passed); else the host's indices."""
    passes_environment = False
    """The runtime hands its own environment to the job (Apptainer); else the job's comes in a file."""
    inspects = True
    """The image is looked up (and pulled when absent) before the run; its environment names are read."""

    def inspect_argv(self, launch: ContainerLaunch, image: str) -> list[str]:
        """Prints the image's configuration (`ImageFacts.from_config`) as JSON; fails when the image is absent."""
        return [launch.binary, "image", "inspect", "--format", "{{json .Config}}", image]

    def pull_argv(self, launch: ContainerLaunch, image: str) -> list[str]:
        return [launch.binary, "pull", image]

    def remove_argv(self, launch: ContainerLaunch) -> list[str] | None:
        """Removes what is left of the container after its end (a kill may have stopped its cleanup)."""
        return None

    def run_argv(self, launch: ContainerLaunch, image: str, argv: Sequence[str], env_file: str | None,
                 entrypoint: Sequence[str] = ()) -> list[str]:
        """The runtime's `run`; `entrypoint`: the image's (`ImageFacts`), which the job's argv follows."""
        raise NotImplementedError

    def reference(self, image: str) -> str:
        """The image as this runtime names it (Pyxis's `registry#image` and `docker://` made plain)."""
        if image.startswith("docker://"):
            image = image[len("docker://"):]
        head, sep, rest = image.partition("#")
        return f"{head}/{rest}" if sep and "/" not in head else image


def oci_options(launch: ContainerLaunch, gpus: Sequence[str], env_file: str | None, workdir: str) -> list[str]:
    """What Podman and Docker (one command line between them) are told of the job but for who it is: its
    cgroup, CPUs and memory, its GPUs (`gpus`, each runtime's own flags), its mounts, where the runtime starts
    it (`workdir`), its stdin and its environment file."""
    out = [f"--cgroup-parent={launch.cgroup_parent}"] if launch.cgroup_parent else []
    if launch.cpus:
        out.append(f"--cpus={launch.cpus}")
    if launch.memory_mb:
        out += [f"--memory={launch.memory_mb}m", f"--memory-swap={launch.memory_mb}m"]
    out += gpus
    out += [f"--volume={source}:{target}:{'ro' if read_only else 'rw'}" for source, target, read_only in launch.mounts]
    out.append(f"--workdir={workdir}")
    if launch.interactive:
        out += ["--interactive", *(["--tty"] if launch.interactive == "pty" else [])]
    if env_file:
        out.append(f"--env-file={env_file}")
    return out


def entered_as_owner(launch: ContainerLaunch, image: str, argv: Sequence[str],
                     entrypoint: Sequence[str]) -> list[str]:
    """A root runtime's `--entrypoint`, image and command: the image's /bin/sh enters the job's working
    directory as the owner (`ENTER_WORKDIR`), then execs the image's entrypoint and the job's argv."""
    return ["--entrypoint=/bin/sh", image, "-c", ENTER_WORKDIR, "corral", launch.workdir, *entrypoint, *argv]


def visible_devices(driver: Driver, gpus: Sequence[int], uuids: Sequence[str] = ()) -> str:
    """CUDA_VISIBLE_DEVICES inside the container: as the container numbers the job's GPUs; MIG slices by their
    UUIDs, which name them inside as outside."""
    if uuids:
        return ",".join(uuids)
    return ",".join(str(i) for i in range(len(gpus))) if driver.visible_renumbered else ",".join(map(str, gpus))


def driver_for(runtime: str, rootless: bool = False) -> Driver:
    """The driver of a runtime by name.

    Raises:
        ValueError: an unknown runtime.
    """
    if runtime == "podman":
        from corral.executor.containers.podman import Podman

        return Podman(rootless=rootless)
    if runtime == "docker":
        from corral.executor.containers.docker import Docker

        return Docker()
    if runtime in ("apptainer", "singularity"):
        from corral.executor.containers.apptainer import Apptainer

        return Apptainer(runtime)
    raise ValueError(f"unknown container runtime {runtime!r} (known: {', '.join(RUNTIMES)})")


def find_runtime(configured: str | None, path: str | None = None) -> tuple[str, str] | None:
    """The runtime jobs' images run with, and its binary: the configured one (a name or a path), else the
    first of `FOUND_ON_PATH` there is; None when there is none.

    Raises:
        ValueError: a configured runtime that is unknown or not installed.
    """
    import shutil  # the server's, once: every supervisor imports this module

    if configured:
        name = os.path.basename(configured)
        if name not in RUNTIMES:
            raise ValueError(f"[containers] runtime = {configured!r} is not one of {', '.join(RUNTIMES)}")
        binary = configured if os.path.isabs(configured) else shutil.which(configured, path=path)
        if not binary or not os.access(binary, os.X_OK):
            raise ValueError(f"[containers] runtime = {configured!r}: {name} is not installed here")
        return name, binary
    for name in FOUND_ON_PATH:
        binary = shutil.which(name, path=path)
        if binary:
            return name, binary
    return None


def runtime_environment(server_env: Mapping[str, str]) -> dict[str, str]:
    """The runtime's own environment, from the server's."""
    return {key: server_env[key] for key in RUNTIME_ENV_KEYS if key in server_env}
