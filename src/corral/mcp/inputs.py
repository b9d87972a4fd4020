"""Checks on tool input that a JSON schema cannot express: job references, and where a log file
may be written; and the name a job gets from its command. Each failure is an `InvalidRequest` naming the tool's argument and what to give.
"""

from __future__ import annotations

import json
import os
import re
import shlex

from corral.core.jobspec.paths import expand_pattern
from corral.errors import InvalidRequest

MAX_ID = 2**31 - 1
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
JOB_REF_HELP = "give a job number like 12, or 12_3 for task 3 of array 12"
_JOB_REF = re.compile(r"^([0-9]{1,10})(?:_([0-9]{1,10}))?$")
_GIVEN_CHARS = 40


def job_ref(value: int | str, field: str) -> str:
    """`value` as the reference corral's API takes: `"12"`, or `"12_3"` for task 3 of array 12.

    Raises:
        InvalidRequest: `value` is not one (a bool, a number out of range, any other text).
    """
    text = str(value) if isinstance(value, int | str) and not isinstance(value, bool) else ""
    match = _JOB_REF.match(text)
    if not match or not 1 <= int(match.group(1)) <= MAX_ID or int(match.group(2) or 0) > MAX_ID:
        raise InvalidRequest(field, f"{JOB_REF_HELP}, got {_given(value)}")
    return text


def given_id(ref: str) -> int | str:
    """A checked reference as an agent reads it back: `12` (a number), or `"12_3"`."""
    return int(ref) if ref.isdigit() else ref


def log_file_place(log_file: str, *, workdir: str, home: str | None, name: str, user: str) -> str:
    """Where a job's `log_file` pattern writes (relative to `workdir`), with `..` and symlinks resolved.

    A job's log file is opened for writing, truncating what is there: it must lie inside the
    job's working directory or corral's home, so a mistyped or hostile path cannot overwrite a
    file elsewhere.

    Raises:
        InvalidRequest: on `log_file`, when it would be written anywhere else.
    """
    if not log_file.strip() or "\0" in log_file:
        raise InvalidRequest("log_file", "must be a file path", 'e.g. "train-%j.log" in the working directory')
    # the server fills the pattern in the same way; the job id and node only ever add digits or a name
    expanded = expand_pattern(log_file, job_id=1, name=name, user=user, node="node", workdir=workdir)
    place = os.path.realpath(expanded)
    roots = [os.path.realpath(root) for root in (workdir, home) if root]
    if not any(place != root and os.path.commonpath([place, root]) == root for root in roots):
        raise InvalidRequest(
            "log_file", f"{_given(log_file)} would be written at {place}, outside the working directory "
            f"{workdir}" + (f" and corral's home {home}" if home else ""),
            'use a path under the working directory, e.g. "train-%j.log" or "logs/%x-%j.log"')
    return place


def _given(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _GIVEN_CHARS else f"{text[:_GIVEN_CHARS]}…"


def job_name_of(command: str) -> str:
    """`python train.py --lr 3` -> `train.py`; `torchrun ... train.py` -> `train.py`; else the program."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and _ASSIGNMENT.match(words[0]):
        words.pop(0)
    if not words:
        return "job"
    name = os.path.basename(words[0])
    if name in ("python", "python3", "torchrun", "accelerate", "deepspeed", "uv", "bash", "sh"):
        rest = [w for w in words[1:] if not w.startswith("-") and w != "run" and w != "launch"]
        if rest:
            return os.path.basename(rest[0])[:200] or name
    return name[:200] or "job"
