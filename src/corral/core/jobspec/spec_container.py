"""A job's container: the image it runs in and Pyxis's companions (`--container-mounts`,
`--container-workdir`, `--container-env`, `--no-container-mount-home`, `--container-remap-root`).

Pure values and their checks. Where the image runs is the executor's business
(`corral.executor.containers`) on corral's own machine, Pyxis's on a Slurm cluster; both read this.
"""

from __future__ import annotations

import os.path
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.jobspec.job_spec import CONTAINER_FIELDS
from corral.core.jobspec.spec_queue import yes_no
from corral.errors import InvalidRequest

MAX_IMAGE = 512
MAX_MOUNTS = 64
MAX_PATH = 4096
# archives a runtime loads from a file: the transport (as Podman and skopeo spell it) and the path after it
ARCHIVE_TRANSPORTS = ("docker-archive:", "oci-archive:")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IMAGE_HINT = ("e.g. nvcr.io/nvidia/pytorch:24.01-py3, localhost/test:1, docker://ubuntu:22.04, "
               "docker-archive:/path/image.tar, oci-archive:/path/image.tar or /path/image.sif")


@dataclass(frozen=True, slots=True)
class Mount:
    """A host path seen inside the container (Pyxis's `SRC:DST[:ro]`)."""

    source: str
    target: str
    read_only: bool = False

    def text(self) -> str:
        return f"{self.source}:{self.target}{':ro' if self.read_only else ''}"


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """The image a job runs in, and what it sees of the host besides the job's own places."""

    image: str
    """As given (a registry reference, `docker://...`, Pyxis's `registry#image`), or an archive's
    `docker-archive:/abs.tar`, `oci-archive:/abs.tar`, or an absolute `.sif` path."""
    mounts: tuple[Mount, ...] = ()
    workdir: str | None = None
    """Where the job starts inside (None: its working directory, which is mounted at the same path)."""
    env: tuple[str, ...] = ()
    """Variables whose host (job) value wins over the image's, as Pyxis's --container-env."""
    mount_home: bool = True
    """The owner's home mounted at the same path (Pyxis's default; --no-container-mount-home drops it)."""
    remap_root: bool = False
    """The owner appears as root inside (a user namespace mapping root to the owner, never host root)."""

    @property
    def archive(self) -> str | None:
        """The file an archive or `.sif` image is read from, or None for an image by name."""
        for transport in ARCHIVE_TRANSPORTS:
            if self.image.startswith(transport):
                return self.image[len(transport):]
        return self.image if self.image.startswith("/") else None

    def to_dict(self) -> dict[str, Any]:
        return {"image": self.image, "mounts": [m.text() for m in self.mounts], "workdir": self.workdir,
                "env": list(self.env), "mount_home": self.mount_home, "remap_root": self.remap_root}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContainerSpec:
        """Read back what `to_dict` gave (the store's JSON)."""
        return cls(image=str(data["image"]), mounts=parse_mounts(data.get("mounts") or []),
                   workdir=data.get("workdir"), env=tuple(data.get("env") or ()),
                   mount_home=bool(data.get("mount_home", True)), remap_root=bool(data.get("remap_root", False)))


def container_spec(fields: Mapping[str, Any], workdir: str) -> ContainerSpec | None:
    """The request's container, or None when it names no image (its companions alone are refused).

    Relative archive paths are taken against `workdir`, as a relative path in a batch script is.

    Raises:
        InvalidRequest: naming the field and the fix.
    """
    image = fields.get("image")
    if image is None or image == "":
        given = sorted(k for k in CONTAINER_FIELDS - {"image"} if fields.get(k) not in (None, "", [], ()))
        if given:
            raise InvalidRequest(given[0], "applies to a job that runs in a container image",
                                 "add --container-image IMAGE, or drop the option")
        return None
    return ContainerSpec(
        image=check_image(image, workdir),
        mounts=parse_mounts(fields.get("container_mounts") or []),
        workdir=_absolute(fields.get("container_workdir"), "container_workdir"),
        env=_env_names(fields.get("container_env")),
        mount_home=yes_no(fields.get("container_mount_home", True), "container_mount_home"),
        remap_root=yes_no(fields.get("container_remap_root", False), "container_remap_root"),
    )


def check_image(image: Any, workdir: str = "/") -> str:
    """The image reference, checked (an archive's relative path made absolute against `workdir`).

    Raises:
        InvalidRequest: field `image`.
    """
    if not isinstance(image, str) or not image or len(image) > MAX_IMAGE or not image.isprintable() or any(
            c.isspace() for c in image) or image.startswith("-"):
        raise InvalidRequest("image", f"{str(image)[:80]!r} is not an image reference", _IMAGE_HINT)
    for transport in ARCHIVE_TRANSPORTS:
        if image.startswith(transport):
            path = image[len(transport):].partition(":")[0]  # docker-archive:PATH[:REFERENCE]
            if not path:
                raise InvalidRequest("image", f"{image!r} names no archive file", _IMAGE_HINT)
            return transport + os.path.normpath(os.path.join(workdir, path)) + image[len(transport) + len(path):]
    if image.endswith(".sif") and "/" in image and not image.startswith("docker://"):
        return os.path.normpath(os.path.join(workdir, image))
    return image


def parse_mounts(value: Any) -> tuple[Mount, ...]:
    """Pyxis's `SRC:DST[:ro|rw],...` (text, or a list of such items); `SRC` alone mounts at the same path.

    Raises:
        InvalidRequest: field `container_mounts`.
    """
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
        raise InvalidRequest("container_mounts", "must be text SRC:DST[:ro],... or a list of such items",
                             "e.g. /data:/data:ro,/scratch/me:/scratch")
    mounts = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        parts = item.split(":")
        mode = parts.pop() if len(parts) == 3 or (len(parts) == 2 and parts[1] in ("ro", "rw")) else "rw"
        if mode not in ("ro", "rw") or len(parts) > 2:
            raise InvalidRequest("container_mounts", f"{item!r} is not SRC:DST[:ro]",
                                 "e.g. /data:/data:ro (the flag is ro or rw)")
        source = _absolute(parts[0], "container_mounts")
        target = _absolute(parts[1] if len(parts) == 2 else parts[0], "container_mounts")
        assert source is not None and target is not None
        mounts.append(Mount(source, target, mode == "ro"))
    if len(mounts) > MAX_MOUNTS:
        raise InvalidRequest("container_mounts", f"{len(mounts)} mounts; at most {MAX_MOUNTS}",
                             "mount a common parent directory instead")
    return tuple(mounts)


def _absolute(value: Any, field: str) -> str | None:
    if value is None or value == "":
        return None
    if (not isinstance(value, str) or not value.startswith("/") or len(value) > MAX_PATH or not value.isprintable()
            or "," in value):
        raise InvalidRequest(field, f"{str(value)[:80]!r} is not an absolute path", "e.g. /data or /workspace")
    return os.path.normpath(value)


def _env_names(value: Any) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) and _ENV_NAME.match(n.strip())
                                                      for n in names):
        raise InvalidRequest("container_env", f"{value!r} is not a list of variable names",
                             "e.g. NCCL_DEBUG,WANDB_MODE")
    return tuple(n.strip() for n in names)
