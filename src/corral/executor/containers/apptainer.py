"""Apptainer and Singularity: no daemon and no root; the runtime runs as the job's owner, in the job's
cgroup like any of its processes. `.sif` files run as they are; registry images through `docker://`.
GPUs with `--nv`: the host's devices are bound, so CUDA_VISIBLE_DEVICES keeps the host's numbering (the
job's cgroup lets it open its own GPUs alone)."""

from __future__ import annotations

from collections.abc import Sequence

from corral.executor.containers import ContainerLaunch, Driver


class Apptainer(Driver):
    runs_as_owner = True
    visible_renumbered = False
    passes_environment = True
    inspects = False  # it brings a registry image in itself, into the owner's cache

    def __init__(self, name: str = "apptainer") -> None:
        self.name = name

    def reference(self, image: str) -> str:
        if image.startswith("/"):
            return image
        for transport in ("docker-archive:", "oci-archive:"):
            if image.startswith(transport):
                return image
        plain = super().reference(image)
        return f"docker://{plain}"

    def run_argv(self, launch: ContainerLaunch, image: str, argv: Sequence[str], env_file: str | None,
                 entrypoint: Sequence[str] = ()) -> list[str]:
        out = [launch.binary, "exec", "--pwd", launch.workdir]
        if launch.gpu_devices:
            out.append("--nv")
        if launch.remap_root:
            out.append("--fakeroot")
        if not launch.mount_home:
            out.append("--no-home")
        for source, target, read_only in launch.mounts:
            out += ["--bind", f"{source}:{target}:{'ro' if read_only else 'rw'}"]
        if env_file:
            out += ["--env-file", env_file]
        return [*out, image, *argv]
