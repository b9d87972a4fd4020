"""The seed's workload shape (`name`, `image`, `gpus`, `gpuMemoryMb`, `env`, `command`, `args`, ...)
as a corral submit request.

An image runs through Pyxis/enroot on a Slurm backend (`srun --container-image`, in a batch script that
mounts what the job needs), and through the server's container runtime (Podman, Apptainer, Docker) on the
local backend, which takes the image as the job's `image` field.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import StrictFloat, StrictInt, StrictStr
from typing_extensions import TypedDict

from corral.core.jobspec.spec_container import check_image
from corral.errors import InvalidRequest


class EnvVar(TypedDict):
    """One variable in the Kubernetes-style list form of `env`."""

    name: StrictStr
    value: StrictStr


EnvValue = StrictStr | StrictInt | StrictFloat
"""A variable's value as an agent writes it; numbers become their text, and true/false is refused."""

# What a Pyxis container needs to see of the host: corral's home (logs, $CORRAL_CHECKPOINT_DIR)
# and the job's working directory, at the same paths. Fixed text: only the image and the
# command come from the request, and those are quoted.
_MOUNTS = '--container-mounts="${CORRAL_HOME}:${CORRAL_HOME},${PWD}:${PWD}" --container-workdir="${PWD}"'


def env_dict(env: Mapping[str, EnvValue] | Sequence[EnvVar | Mapping[str, Any]] | None) -> dict[str, str] | None:
    """`env` as corral takes it: an object of strings, from an object or a list of {name, value}.

    Raises:
        InvalidRequest: a list item without a name.
    """
    if env is None:
        return None
    if isinstance(env, Mapping):
        return {str(key): _text(value) for key, value in env.items()}
    out: dict[str, str] = {}
    for item in env:
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequest("env", f"list item {dict(item)!r} has no name", 'write {"name": "EPOCHS", "value": "10"}')
        out[name] = _text(item.get("value", ""))
    return out


def pyxis_script(image: str, argv: Sequence[str]) -> str:
    """A batch script that runs `argv` in `image` through Pyxis (`srun --container-image`).

    Raises:
        InvalidRequest: field `image`, when it is not an image reference.
    """
    check_image(image)  # refused here as on the server; Pyxis gets it as written
    command = shlex.join(["srun", f"--container-image={image}"])
    return (
        "#!/bin/bash\n"
        "# corral workload: runs in a container through Pyxis/enroot (the cluster needs the Pyxis plugin)\n"
        f"exec {command} {_MOUNTS} {shlex.join(argv)}\n"
    )


def workload_request(*, backend: str, command: Sequence[str] | None, args: Sequence[str] | None = None,
                     image: str | None = None, name: str | None = None, gpus: int | None = None,
                     gpu_memory_mb: int | None = None,
                     env: Mapping[str, EnvValue] | Sequence[EnvVar | Mapping[str, Any]] | None = None,
                     labels: Mapping[str, str] | None = None, preemptible: bool | None = None,
                     max_runtime_s: int | None = None) -> dict[str, Any]:
    """The fields for `Client.submit` that run this workload on a server with `backend`.

    Raises:
        InvalidRequest: naming the workload's field (`command`, `image`, `env`).
    """
    if not command or not command[0]:
        raise InvalidRequest("command", "is required", 'the program and its arguments as a list, e.g. ["python", "train.py"]')
    argv = [*command, *(args or ())]
    fields: dict[str, Any] = {
        "name": name, "gpus": gpus, "gpu_mem_mb": gpu_memory_mb, "env": env_dict(env),
        "labels": dict(labels) if labels is not None else None, "preemptible": preemptible, "time_limit_s": max_runtime_s,
    }
    if image is not None and backend == "slurm":
        fields["script"] = pyxis_script(image, argv)
        fields["name"] = name or _program(argv)
    else:
        # the local backend runs the image itself (the server refuses it, saying so, without a runtime);
        # a relative archive path is the server's to resolve, against the job's working directory
        if image is not None:
            check_image(image)
        fields["command"] = argv
        fields["image"] = image
    return {key: value for key, value in fields.items() if value is not None}


def _program(argv: Sequence[str]) -> str:
    return argv[0].rsplit("/", 1)[-1] or "workload"


def _text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidRequest("env", f"values must be text or numbers, got {value!r}", 'e.g. {"EPOCHS": "10"}')
    return value if isinstance(value, str) else str(value)
