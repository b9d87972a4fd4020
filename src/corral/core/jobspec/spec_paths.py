"""A job spec's places: its working directories, log file patterns and open mode, HTCondor user log and umask.

No I/O: whether a directory may be entered is asked through the caller's `can_enter`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from corral.core.jobspec.paths import check_pattern
from corral.errors import InvalidRequest


def check_directory(value: Any, field: str, user: str, can_enter: Callable[[str], bool] | None) -> str:
    """A directory the user can enter; relative paths have already been joined to the submit directory.

    One answer for "does not exist" and "may not be reached": the second must not reveal the first.
    """
    if not isinstance(value, str) or not value or "\0" in value:
        raise InvalidRequest(field, "must be a directory path")
    if not os.path.isabs(value):
        raise InvalidRequest(field, f"must be an absolute path, got {value!r}")
    if can_enter is not None and not can_enter(value):  # the caller looks, as the user: core does no I/O
        raise InvalidRequest(field, f"{value} is not a directory {user} can enter",
                             "it does not exist, or it is not theirs to reach: create it, or submit from another directory")
    return os.path.normpath(value)


def parse_umask(value: Any) -> int | None:
    """A umask as an octal string ("0022", "027") or an int; None leaves the server's."""
    if value is None:
        return None
    if isinstance(value, str) and re.fullmatch(r"0?[0-7]{1,3}", value):
        return int(value, 8)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o777:
        return value
    raise InvalidRequest("umask", f"{value!r} is not a umask", 'give octal digits such as "0022" or "0077"')


def log_patterns(fields: Mapping[str, Any], log_dir: str) -> tuple[str, str | None]:
    stdout = fields.get("stdout")
    stderr = fields.get("stderr")
    for name, value in (("stdout", stdout), ("stderr", stderr)):
        if value is not None:
            if not isinstance(value, str) or not value.strip():
                raise InvalidRequest(name, "must be a file path pattern", "e.g. logs/%x-%j.out")
            check_pattern(value, name)
    if stdout is None and stderr is None:
        return os.path.join(log_dir, "%j.out"), os.path.join(log_dir, "%j.err")
    if stdout is None:
        return os.path.join(log_dir, "%j.out"), stderr
    return stdout, stderr


def open_mode(value: Any) -> str:
    """sbatch's --open-mode: how the job's log files are opened at its start (truncate unless given)."""
    if value is None:
        return "truncate"
    if value not in ("append", "truncate"):
        raise InvalidRequest("open_mode", f"must be append or truncate, got {value!r}",
                             "append keeps what the files hold; truncate (the default) empties them")
    return str(value)


def parse_user_log(value: Any, workdir: str) -> str | None:
    """An HTCondor user log's path pattern, made absolute against the working directory."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("user_log", "must be a file path", "e.g. job.log")
    check_pattern(value, "user_log")
    return os.path.normpath(os.path.join(workdir, value))
