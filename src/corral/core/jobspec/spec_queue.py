"""How a job spec waits in the queue: its dependency, array, partition, QoS and account, and yes/no flags."""

from __future__ import annotations

from typing import Any

from corral.core.jobspec.arrays import parse_array
from corral.core.jobspec.dependency import Dependency, parse_dependency
from corral.core.jobspec.job_spec import NAME_PATTERN
from corral.errors import InvalidRequest


def dependency_field(value: Any) -> Dependency | None:
    """The --dependency text, parsed; None if not given or blank."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InvalidRequest("dependency", f"must be text such as afterok:12, got {value!r}")
    return parse_dependency(value)


def array_field(value: Any) -> str | None:
    """The --array text, checked and stripped; None for a single job."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("array", f"must be text such as 0-99%4, got {value!r}")
    parse_array(value)
    return value.strip()


def yes_no(value: Any, field: str) -> bool:
    """A flag given as a bool or as yes/no, true/false, 1/0."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("yes", "true", "1", "no", "false", "0"):
        return value.strip().lower() in ("yes", "true", "1")
    raise InvalidRequest(field, f"must be yes or no, got {value!r}")


def config_name(value: Any, field: str) -> str | None:
    """A partition, QoS or account name, as configured; None if not given."""
    if value is None:
        return None
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise InvalidRequest(field, f"{value!r} is not a {field} name", "use letters, digits, _ . -")
    return value
