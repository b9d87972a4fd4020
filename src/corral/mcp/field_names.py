"""Which of a tool's arguments a server error is about: the server names its own fields
(`gpu_mem`, `job_id`), an agent must hear the tool's (`gpu_memory`, `workloadId`)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from corral.errors import Conflict, InvalidRequest, NotFound

_NO_JOB = re.compile(r"^job \S+ does not exist")

JOB_FIELDS = {"command": "command", "script": "script", "workdir": "working_directory", "gpus": "gpus",
               "gpu_mem": "gpu_memory", "gpu_type": "gpu_type", "cpus": "cpus", "mem": "memory", "time": "time_limit",
               "env": "env", "name": "name", "stdout": "log_file", "stderr": "log_file", "labels": "labels",
               "submit_dir": "working_directory", "image": "image", "container_mounts": "image",
               "gpu_share": "share_gpu", "reservation": "reservation"}
WORKLOAD_FIELDS = {"job_id": "workloadId", "gpu_mem": "gpuMemoryMb", "gpu_mem_mb": "gpuMemoryMb",
                    "time_limit_s": "maxRuntimeSeconds", "time": "maxRuntimeSeconds", "script": "image"}

@contextmanager
def fields_named(names: Mapping[str, str], *, job: str | None = None, missing: str | None = None,
                 clash: str | None = None) -> Iterator[None]:
    """Re-raise the server's errors under the tool's own name for the argument at fault.

    Args:
        names: the server's field -> the tool's argument, for InvalidRequest.
        job: the argument that named the job, for `job N does not exist`.
        missing: the argument any other NotFound is about (`channels`, `run`).
        clash: the argument a Conflict is about (`name` of a rule that exists).
    """
    try:
        yield
    except InvalidRequest as exc:
        new = names.get(exc.field)
        if new and new != exc.field:
            prefix = f"{exc.field}:"
            rest = exc.message[len(prefix):] if exc.message.startswith(prefix) else f" {exc.message}"
            exc.message = f"{new}:{rest}"
            exc.args = (exc.message,)
            exc.field = new
        raise
    except NotFound as exc:
        _name_field(exc, job if job and _NO_JOB.match(exc.message) else missing)
        raise
    except Conflict as exc:
        _name_field(exc, clash)
        raise


def _name_field(exc: NotFound | Conflict, field: str | None) -> None:
    if field and not exc.message.startswith(f"{field}:"):
        exc.message = f"{field}: {exc.message}"
        exc.args = (exc.message,)
