"""A job spec's environment (sbatch's --export against the submitter's) and its labels."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from corral.core.access.bodies import check_text
from corral.core.jobspec.job_spec import MAX_ENV_BYTES, MINIMAL_ENV_KEYS
from corral.errors import InvalidRequest

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,62}$")


def _str_map(value: Any, name: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise InvalidRequest(name, "must be an object of string keys and values", '{"KEY": "value"}')
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise InvalidRequest(name, f"entry {k!r} must map a string to a string")
        out[k] = str(v)
    return out


def resolve_environment(fields: Mapping[str, Any], server_env: Mapping[str, str]) -> tuple[dict[str, str], bool]:
    """Resolve sbatch's --export against the submitter's environment (or the server's)."""
    explicit = _str_map(fields.get("env", {}), "env")
    snapshot = _str_map(fields["environment"], "environment") if "environment" in fields else None
    if snapshot is not None:
        # submitted from inside a Slurm allocation: its SLURM_* describe that job, not this one
        snapshot = {k: v for k, v in snapshot.items() if not k.startswith("SLURM_")}
    source = snapshot if snapshot is not None else server_env
    export = str(fields.get("export", "ALL")).strip()
    items = [item.strip() for item in export.split(",") if item.strip()]
    if not items:
        raise InvalidRequest("export", "must not be empty", "use ALL, NONE, or a list like ALL,VAR=value")
    head = items[0].upper()
    env: dict[str, str] = {}
    inherit = False
    if head == "ALL":
        if snapshot is not None:
            env.update(snapshot)
        else:
            inherit = True
        items = items[1:]
    elif head == "NONE":
        env.update({k: source[k] for k in MINIMAL_ENV_KEYS if k in source})
        items = items[1:]
    else:
        env.update({k: source[k] for k in MINIMAL_ENV_KEYS if k in source})
    for item in items:
        key, has_value, value = item.partition("=")
        _check_env_name(key, "export")
        if has_value:
            env[key] = value
        elif key in source:
            env[key] = source[key]
    for key in explicit:
        _check_env_name(key, "env")
    env.update(explicit)
    # Inherited names pass as they are (shells export functions as BASH_FUNC_name%%).
    size = 0
    for key, value in env.items():
        if "\0" in value or "=" in key or "\0" in key:
            raise InvalidRequest("env", f"variable {key!r} holds a NUL byte or its name an =")
        size += len(key) + len(value)
    if size > MAX_ENV_BYTES:
        raise InvalidRequest("env", f"is {size} bytes; the limit is {MAX_ENV_BYTES}", "pass large data in a file")
    return env, inherit


def _check_env_name(key: str, field: str) -> None:
    if not _ENV_KEY.match(key):
        raise InvalidRequest(field, f"{key!r} is not a variable name", "use letters, digits and _, not starting with a digit")


def parse_labels(value: Any) -> dict[str, str]:
    """Labels: short keys, values of at most 256 printable characters."""
    labels = _str_map(value, "labels")
    for key, val in labels.items():
        if not _LABEL_KEY.match(key):
            raise InvalidRequest("labels", f"{key!r} is not a label key", "use up to 63 letters, digits, _ . - /")
        if len(val) > 256:
            raise InvalidRequest("labels", f"value of {key} is longer than 256 characters")
        check_text(val, f"labels.{key}")
    return labels
