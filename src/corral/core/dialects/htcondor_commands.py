"""The HTCondor submit commands corral reads, each value checked and turned into its request field.

One function per command (or pair of commands): `executable`, `initialdir`, `split_arguments`,
`environment`, `export` (getenv), `batch_name`, `resources`, `log_files` (output, error), `log_pattern`,
`requirements`. `corral.core.dialects.htcondor.condor_request` calls them in turn.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from corral.core.dialects import classad
from corral.core.dialects.htcondor_macros import CLUSTER, PLACEHOLDER, TASK
from corral.core.dialects.htcondor_submit_file import ENV_NAME
from corral.core.units.units import is_number, parse_memory_mb
from corral.errors import InvalidRequest

if TYPE_CHECKING:
    from corral.core.dialects.htcondor_macros import Macros

_SPACE = " \t\r\n"


def initialdir(values: dict[str, str], macros: Macros) -> str | None:
    key = "initialdir" if "initialdir" in values else "initial_dir" if "initial_dir" in values else None
    if key is None:
        return None
    return macros.expand(key).strip() or None


def executable(macros: Macros, initialdir: str | None) -> str:
    """The path to run from the job's working directory (initialdir)."""
    path = macros.expand("executable").strip()
    if not path:
        raise InvalidRequest("executable", "is empty", "say which program to run: executable = /path/to/program")
    if path.startswith("/"):
        return path
    # HTCondor takes a relative executable from the submit directory even when initialdir is set.
    if initialdir is None:
        return path if "/" in path else "./" + path  # `run.sh` is the file here, never a search of PATH
    parts = [p for p in initialdir.split("/") if p not in ("", ".")]
    if initialdir.startswith("/") or ".." in parts:
        raise InvalidRequest(
            "executable",
            f"{path!r} is relative to the submit directory, which corral cannot find from initialdir {initialdir!r}",
            "give the executable's absolute path",
        )
    return "../" * len(parts) + path if parts else (path if "/" in path else "./" + path)


def split_arguments(text: str) -> list[str]:
    text = text.strip()
    if text.startswith('"'):
        return _split_quoted(_unquote(text, "arguments"), "arguments")
    words: list[str] = []
    current: list[str] = []
    in_word = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and text[i + 1 : i + 2] == '"':
            current.append('"')
            in_word = True
            i += 2
            continue
        if char == '"':
            raise InvalidRequest(
                "arguments", f"unescaped double quote in {text!r}",
                'write \\" for a double quote, or put all the arguments in double quotes (the new syntax)',
            )
        if char in _SPACE:
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
        else:
            current.append(char)
            in_word = True
        i += 1
    if in_word:
        words.append("".join(current))
    return words


def _unquote(text: str, key: str) -> str:
    """The new syntax: the text inside the outer double quotes, each "" made one "."""
    out: list[str] = []
    i = 1
    while i < len(text):
        char = text[i]
        if char == '"':
            if text[i + 1 : i + 2] == '"':
                out.append('"')
                i += 2
                continue
            rest = text[i + 1 :].strip()
            if rest:
                raise InvalidRequest(key, f"text after the closing double quote: {rest!r}", 'write "" for a " inside')
            return "".join(out)
        out.append(char)
        i += 1
    raise InvalidRequest(key, "the opening double quote is never closed", 'end the value with "')


def _split_quoted(text: str, key: str) -> list[str]:
    """Words split at spaces and tabs; '...' keeps spaces, and '' inside it is a '."""
    words: list[str] = []
    current: list[str] = []
    in_word = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == "'":
            in_word = True  # '' makes an empty argument
            start = i
            i += 1
            while True:
                end = text.find("'", i)
                if end < 0:
                    raise InvalidRequest(
                        key, f"unbalanced single quote at {text[start:]!r}",
                        "close it; '' is a ' inside",
                    )
                current.append(text[i:end])
                if text[end + 1 : end + 2] == "'":
                    current.append("'")
                    i = end + 2
                    continue
                i = end + 1
                break
        elif char in _SPACE:
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            i += 1
        else:
            current.append(char)
            in_word = True
            i += 1
    if in_word:
        words.append("".join(current))
    return words


def environment(macros: Macros) -> tuple[dict[str, str], dict[str, str]]:
    """(fixed variables, variables that hold $(Cluster) or $(Process) and are set at run time)."""
    text = macros.expand("environment", run_time=True).strip()
    if text.startswith('"'):
        entries = _split_quoted(_unquote(text, "environment"), "environment")
    else:
        entries = [entry for entry in text.split(";") if entry]
    fixed: dict[str, str] = {}
    per_job: dict[str, str] = {}
    for entry in entries:
        name, has_value, value = entry.partition("=")
        if not has_value:
            raise InvalidRequest("environment", f"{entry!r} has no =", "write NAME=value")
        if not ENV_NAME.match(name):
            raise InvalidRequest("environment", f"{name!r} is not a variable name", "use letters, digits and _")
        fixed.pop(name, None)
        per_job.pop(name, None)
        (per_job if PLACEHOLDER.search(value) else fixed)[name] = value
    return fixed, per_job


def export(macros: Macros) -> str:
    text = macros.expand("getenv").strip()
    flag = text.lower()
    if flag in ("true", "t", "yes", "1", "*"):
        return "ALL"
    if flag in ("false", "f", "no", "0", ""):
        return "NONE"
    names = [name for name in re.split(r"[\s,]+", text) if name]
    for name in names:
        if not ENV_NAME.match(name):
            raise InvalidRequest(
                "getenv", f"{name!r} is not a variable name",
                "list names; patterns and -NAME are not supported",
            )
    return ",".join(["NONE", *names])


def batch_name(values: dict[str, str], macros: Macros) -> str | None:
    if "batch_name" in values:
        text = macros.expand("batch_name").strip()
        return (text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text) or None
    if "+jobbatchname" in values:
        text = macros.expand("+jobbatchname").strip()
        if not (len(text) >= 2 and text[0] == text[-1] == '"'):
            raise InvalidRequest("+JobBatchName", f"must be a quoted string, got {text!r}", 'write +JobBatchName = "x"')
        return re.sub(r"\\(.)", r"\1", text[1:-1]) or None
    return None


def resources(values: dict[str, str], macros: Macros) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "request_gpus" in values:
        out["gpus"] = _whole_number(macros.expand("request_gpus"), "request_gpus", 0)
    if "request_cpus" in values:
        out["cpus"] = _whole_number(macros.expand("request_cpus"), "request_cpus", 1)
    if "request_memory" in values:
        out["mem_mb"] = _megabytes(macros.expand("request_memory"), "request_memory")
    if "gpus_minimum_memory" in values:
        out["gpu_mem_mb"] = _megabytes(macros.expand("gpus_minimum_memory"), "gpus_minimum_memory")
    limits = [
        _whole_number(macros.expand(key), key, 1)
        for key in ("allowed_execute_duration", "allowed_job_duration") if key in values
    ]
    if limits:
        out["time_limit_s"] = min(limits)
    return out


def _whole_number(text: str, key: str, low: int) -> int:
    text = text.strip()
    if not is_number(text) or int(text) < low:
        raise InvalidRequest(
            key, f"must be a whole number of at least {low}, got {text!r}",
            "write a number, not an expression",
        )
    return int(text)


def _megabytes(text: str, key: str) -> int:
    try:
        return parse_memory_mb(text.strip(), field=key)
    except InvalidRequest:
        raise InvalidRequest(
            key, f"cannot read {text.strip()!r} as a size",
            "write MB or a unit, not an expression: 4096, 4096M, 4G, 4GB"
        ) from None


def log_files(values: dict[str, str], macros: Macros, *, array: bool) -> dict[str, str]:
    paths = {
        field: log_pattern(macros.expand(key, run_time=True).strip(), array=array)
        for key, field in (("output", "stdout"), ("error", "stderr"))
        if key in values and values[key].strip()
    }
    if paths:  # HTCondor sends the stream the file does not name to /dev/null
        paths.setdefault("stdout", "/dev/null")
        paths.setdefault("stderr", "/dev/null")
    return paths


def log_pattern(path: str, *, array: bool) -> str:
    """An HTCondor path as a corral pattern: % doubled, $(Cluster)/$(Process) made %A/%a (or %j)."""
    pieces = []
    for piece in PLACEHOLDER.split(path):
        if piece == CLUSTER:
            pieces.append("%A" if array else "%j")
        elif piece == TASK:
            pieces.append("%a")
        else:
            pieces.append(piece.replace("%", "%%"))
    pattern = "".join(pieces)
    return "./" + pattern if pattern.startswith("~") else pattern  # HTCondor has no ~ expansion


def requirements(values: dict[str, str], macros: Macros) -> str | None:
    """requirements, require_gpus and the gpus_ capability bounds as one expression, checked here."""
    parts: list[str] = []
    for key in ("requirements", "require_gpus"):
        if key in values and macros.expand(key).strip():
            text = " ".join(macros.expand(key).split())
            classad.parse(text, key)
            parts.append(f"({text})")
    for key, operator in (("gpus_minimum_capability", ">="), ("gpus_maximum_capability", "<=")):
        if key in values:
            text = macros.expand(key).strip()
            if not is_number(text) and not re.fullmatch(r"\d+\.\d+|\d+", text):
                raise InvalidRequest(key, f"must be a compute capability such as 7.0, got {text!r}", "write a number")
            parts.append(f"(Capability {operator} {text})")
    return " && ".join(parts) or None

