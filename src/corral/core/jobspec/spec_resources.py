"""A job spec's resources: nodes' worth of GPUs, CPUs, memory, time, and a ClassAd's requirements.

Each parser reads one field (or the spellings of one setting) of a submit request and
raises InvalidRequest naming it; `corral.core.jobspec.spec` composes them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from corral.core.dialects import classad
from corral.core.jobspec.job_spec import MAX_GPUS, MAX_MB, MAX_TIME_S, NAME_PATTERN
from corral.core.units.units import is_number, parse_duration_s, parse_memory_mb
from corral.errors import InvalidRequest


def int_in(value: Any, name: str, low: int, high: int) -> int:
    """A whole number (or its text) between `low` and `high`, for field `name`."""
    if isinstance(value, bool):
        raise InvalidRequest(name, f"must be a whole number, got {value!r}")
    if isinstance(value, str):
        value = value.strip()
        if not re.fullmatch(r"-?[0-9]{1,18}", value):
            raise InvalidRequest(name, f"must be a whole number, got {value!r:.60}")
        value = int(value)
    if not isinstance(value, int):
        raise InvalidRequest(name, f"must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise InvalidRequest(name, f"must be between {low} and {high}, got {value}")
    return value


def parse_gpu_request(text: str, name: str) -> tuple[str | None, int]:
    """`2` -> (None, 2); `a100:2` -> ("a100", 2); `gpu:a100:2` (gres) -> ("a100", 2)."""
    parts = [p.strip() for p in str(text).split(":")]
    if name == "gres":
        if parts[0] != "gpu":
            raise InvalidRequest("gres", f"only gpu resources are supported, got {text!r}", "write gpu:N or gpu:TYPE:N")
        parts = parts[1:] or ["1"]
    hint = "write gpu:N or gpu:TYPE:N" if name == "gres" else "write N or TYPE:N"
    if len(parts) == 1 and not is_number(parts[0]):
        if not (any(c.isalpha() for c in parts[0]) and NAME_PATTERN.match(parts[0])):  # `-1`, `2.5`: a bad count
            # (a type may start with a digit: MIG profiles such as `1g.10gb`)
            raise InvalidRequest(name, f"cannot read {text!r:.60} as a GPU request", hint)
        parts = [parts[0], "1"]  # `gpu:a100` and `--gpus=a100` mean one of that type
    if len(parts) > 2 or not is_number(parts[-1]):
        raise InvalidRequest(name, f"cannot read {text!r:.60} as a GPU request", hint)
    gpu_type = parts[0] if len(parts) == 2 else None
    return gpu_type, int_in(int(parts[-1]), name, 0, MAX_GPUS)


def parse_gpus(fields: Mapping[str, Any]) -> tuple[str | None, int]:
    """The GPU type and count from `gres`, `gpus` and `gpu_type`, the later overriding the earlier."""
    gpu_type: str | None = None
    gpus = 0
    if "gres" in fields:
        gres = str(fields["gres"])
        if "," in gres:
            raise InvalidRequest("gres", f"only one gpu resource is supported, got {gres!r}", "write gpu:N or gpu:TYPE:N")
        gpu_type, gpus = parse_gpu_request(gres, "gres")
    if "gpus" in fields:
        raw = fields["gpus"]
        if isinstance(raw, int):  # a bool too: int_in refuses it
            gpus = int_in(raw, "gpus", 0, MAX_GPUS)
            gpu_type = gpu_type if "gres" in fields else None
        else:
            typed, gpus = parse_gpu_request(str(raw), "gpus")
            gpu_type = typed or gpu_type
    if "gpu_type" in fields:
        gpu_type = str(fields["gpu_type"]).strip()
    if gpu_type is not None and not NAME_PATTERN.match(gpu_type):
        raise InvalidRequest("gpu_type", f"{gpu_type!r} is not a GPU type name", "e.g. A100, H100, a100-80g")
    if gpus == 0 and gpu_type is not None:
        raise InvalidRequest("gpu_type", "is set but no GPUs were requested", "add --gpus N")
    return gpu_type, gpus


def size_or_none(fields: Mapping[str, Any], text_key: str, mb_key: str) -> int | None:
    """A size given as text (`text_key`, e.g. 40G) or in megabytes (`mb_key`); None if neither."""
    if text_key in fields and mb_key in fields:
        raise InvalidRequest(text_key, f"give {text_key} or {mb_key}, not both")
    if mb_key in fields:
        return int_in(fields[mb_key], mb_key, 0, MAX_MB)
    if text_key in fields:
        return _bounded_mb(parse_memory_mb(fields[text_key], field=text_key), text_key)
    return None


def _bounded_mb(mb: int, name: str) -> int:
    if mb > MAX_MB:
        raise InvalidRequest(name, f"{mb} MB is more than any machine has", "ask for at most 2047T")
    return mb


def parse_mem(fields: Mapping[str, Any], cpus: int, gpus: int) -> int:
    """Host memory in MB from whichever one spelling is given (per node, per CPU or per GPU); 0 if none."""
    given = [k for k in ("mem", "mem_mb", "mem_per_cpu", "mem_per_gpu") if k in fields]
    if len(given) > 1:
        raise InvalidRequest(given[1], f"conflicts with {given[0]}", "give one way of asking for memory")
    if not given:
        return 0
    key = given[0]
    if key == "mem_mb":
        return int_in(fields[key], key, 0, MAX_MB)
    mb = parse_memory_mb(fields[key], field=key)
    if key == "mem_per_cpu":
        mb *= cpus
    elif key == "mem_per_gpu":
        if gpus == 0:
            raise InvalidRequest("mem_per_gpu", "needs a GPU request", "use --mem instead, or add --gpus N")
        mb *= gpus
    return _bounded_mb(mb, key)


def parse_time_limit(fields: Mapping[str, Any]) -> int | None:
    """The time limit in seconds from `time` or `time_limit_s`; None for no limit."""
    if "time" in fields and "time_limit_s" in fields:
        raise InvalidRequest("time", "give time or time_limit_s, not both")
    seconds: int | None
    if "time_limit_s" in fields:
        seconds = int_in(fields["time_limit_s"], "time_limit_s", 1, MAX_TIME_S)
    elif "time" in fields:
        seconds = parse_duration_s(fields["time"], field="time")
    else:
        return None
    if seconds is None:
        return None
    if seconds > MAX_TIME_S:
        raise InvalidRequest("time", f"must be at most 365 days, got {seconds} s", "use UNLIMITED for no limit")
    return seconds


def parse_requirements(value: Any, gpus: int) -> str | None:
    """A ClassAd requirements expression, whitespace folded, checked against the GPU request."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("requirements", "must be the text of a ClassAd expression", "e.g. (CUDACapability >= 7.0)")
    text = " ".join(value.split())
    if len(text) > 4000:
        raise InvalidRequest("requirements", f"is {len(text)} characters; corral takes up to 4000", "shorten it")
    expr = classad.parse(text)
    if classad.uses_gpu(expr) and gpus == 0:
        raise InvalidRequest(
            "requirements", f"{text} names GPU properties, but the job asks for no GPU", "add request_gpus (--gpus N)",
        )
    return text
