"""Expansion of sbatch's filename patterns (`%j`, `%x`, `%A`, `%a`, ...)."""

from __future__ import annotations

import os
import re

from corral.errors import InvalidRequest

_ESCAPE = re.compile(r"%(.)")
_KNOWN = set("jJxAaNnustu%")


def check_pattern(pattern: str, field: str) -> None:
    """Raise InvalidRequest if the pattern holds a `%` escape corral cannot fill."""
    if "\0" in pattern:
        raise InvalidRequest(field, "contains a NUL byte")
    for match in _ESCAPE.finditer(pattern):
        if match.group(1) not in _KNOWN:
            raise InvalidRequest(
                field, f"unknown pattern %{match.group(1)} in {pattern!r}",
                "use %j (job id), %x (name), %A/%a (array job and task), %u (user), %N (node), %% (a %)",
            )
    if _ESCAPE.sub("", pattern).endswith("%"):  # `%%` at the end is a literal %, not a lone one
        raise InvalidRequest(field, f"{pattern!r} ends with a lone %", "write %% for a literal %")


def expand_pattern(
    pattern: str, *, job_id: int, name: str, user: str, node: str, workdir: str,
    array_job_id: int | None = None, array_task_id: int | None = None,
) -> str:
    """The absolute path a pattern names for one job; relative patterns start at `workdir`."""
    values = {
        "j": str(job_id), "J": str(job_id), "x": name.replace("/", "_"), "u": user, "N": node,
        "A": str(array_job_id if array_job_id is not None else job_id),
        "a": str(array_task_id) if array_task_id is not None else "4294967294",  # Slurm's NO_VAL
        "n": "0", "t": "0", "s": "batch", "%": "%",
    }
    # `~` is expanded before the fields are filled in: a job named `~` must not reach a home directory
    path = _ESCAPE.sub(lambda m: values.get(m.group(1), m.group(0)), os.path.expanduser(pattern))
    return os.path.normpath(os.path.join(workdir, path))
