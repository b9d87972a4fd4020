"""What a job spec runs: an argv or a batch script, with its arguments, and the job's name and comment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from corral.core.dialects import sbatch
from corral.core.access.bodies import check_text
from corral.core.jobspec.job_spec import MAX_COMMENT, MAX_NAME
from corral.errors import InvalidRequest

_INTERPRETERS = {"python", "python3", "bash", "sh", "zsh", "torchrun", "uv", "accelerate", "deepspeed", "srun"}


def split_command(given: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None, tuple[str, ...]]:
    """(argv, script, script_args): exactly one of `command` and `script`, checked."""
    command = given.get("command")
    script = given.get("script")
    if (command is None) == (script is None):
        raise InvalidRequest("command", "give exactly one of command (an argv list) or script (a batch script's text)")
    args = _str_list(given.get("script_args", []), "script_args")
    if script is not None:
        if not isinstance(script, str) or not script.strip():
            raise InvalidRequest("script", "must be the non-empty text of a batch script")
        if "\0" in script:
            raise InvalidRequest("script", "must be text, found a NUL byte")
        sbatch.check_shebang(script)
        return (), script, args
    argv = _str_list(command, "command")
    if not argv or not argv[0]:
        raise InvalidRequest("command", "must not be empty", 'give the program and its arguments, e.g. ["python", "train.py"]')
    if args:
        raise InvalidRequest("script_args", "only applies to a script", "append the arguments to command instead")
    return argv, None, ()


def _str_list(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise InvalidRequest(name, "must be a list of strings", 'e.g. ["python", "train.py", "--lr", "0.1"]')
    for item in value:
        if not isinstance(item, str):
            raise InvalidRequest(name, f"must be a list of strings, found {item!r}")
        if "\0" in item:
            raise InvalidRequest(name, "an argument contains a NUL byte")
    return tuple(value)


def job_name(value: Any, command: tuple[str, ...], script_name: Any) -> str:
    """The given name, checked; by default the script's file name or the program (the script for an interpreter)."""
    if value is None:
        if not command:
            return os.path.basename(str(script_name or "script"))[:MAX_NAME] or "script"
        name = os.path.basename(command[0])
        if name in _INTERPRETERS:
            # `python train.py` is better named train.py; `sh -c "..."` stays sh
            args = list(command[1:])
            index = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
            if index is not None and (index == 0 or args[index - 1] != "-c"):
                name = os.path.basename(args[index])
        return name[:MAX_NAME] or "job"
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("name", "must be a non-empty string")
    if len(value) > MAX_NAME:
        raise InvalidRequest("name", f"is {len(value)} characters; the limit is {MAX_NAME}")
    return check_text(value, "name")


def job_comment(value: Any) -> str | None:
    """sbatch's --comment, checked as a name is: shown with the job, as it is."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("comment", "must be text")
    if len(value) > MAX_COMMENT:
        raise InvalidRequest("comment", f"is {len(value)} characters; the limit is {MAX_COMMENT}")
    return check_text(value, "comment") or None
