"""MLflow's request bodies, checked, and its values translated to corral's: pure.

The limits are MLflow's own (`mlflow.utils.validation`): a batch holds at most 1,000 metrics, 100
params and 100 tags (1,000 items in all); keys are at most 250 characters, param values 6,000 and tag
values 8,000. int64 fields may come as JSON numbers or as strings of digits (protobuf's JSON form),
doubles as numbers or "NaN", "Infinity", "-Infinity". Every fault is an `InvalidRequest` naming the
field as MLflow names it; the MLflow routes answer it INVALID_PARAMETER_VALUE (400).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.core.tracking.metric_series import Points
from corral.errors import InvalidRequest

MAX_METRICS, MAX_PARAMS, MAX_TAGS, MAX_ITEMS = 1000, 100, 100, 1000
MAX_KEY, MAX_PARAM_VALUE, MAX_TAG_VALUE = 250, 6000, 8000
MAX_RESULTS = 50_000
DEFAULT_EXPERIMENT_ID = "0"
"""MLflow's default experiment: corral's project `default`."""
DEFAULT_PROJECT = "default"

STATUS_TO_STATE = {"RUNNING": "running", "SCHEDULED": "running", "FINISHED": "finished", "FAILED": "failed",
                   "KILLED": "crashed"}
"""MLflow's run statuses as corral's run states (KILLED: its process was stopped, corral's crashed)."""
STATE_TO_STATUS = {"running": "RUNNING", "finished": "FINISHED", "failed": "FAILED", "crashed": "KILLED"}
VIEW_TYPES = {"ACTIVE_ONLY": ("active",), "DELETED_ONLY": ("deleted",), "ALL": ("active", "deleted"),
              "1": ("active",), "2": ("deleted",), "3": ("active", "deleted")}
_NUMBER_TYPES, _INT = {float, int}, {int}  # exact types: a bool is not a number here
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@dataclass(frozen=True)
class MetricPoint:
    key: str
    value: float
    timestamp_ms: int
    step: int


def text(body: Mapping[str, Any], name: str, *, required: bool = False, limit: int = MAX_KEY) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise InvalidRequest(name, "missing", f"give {name}")
        return None
    if not isinstance(value, str):
        raise InvalidRequest(name, f"{value!r} is not a string")
    if required and not value:
        raise InvalidRequest(name, "is empty", f"give {name}")
    if len(value) > limit or "\x00" in value:
        raise InvalidRequest(name, f"is {len(value)} characters or holds NUL", f"at most {limit} characters, no NUL")
    return value


def key(value: Any, name: str) -> str:
    """A metric, param or tag key: 1-250 printable characters, without a path's `..` (MLflow's rule too)."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_KEY or not value.isprintable():
        raise InvalidRequest(name, f"{value!r} is not a key", f"use 1-{MAX_KEY} printable characters")
    if ".." in value.split("/") or value.startswith("/"):
        raise InvalidRequest(name, f"{value!r} is not a key", "a key is a relative name without '..'")
    return value


def value_text(value: Any, name: str, limit: int) -> str:
    """A param or tag value: MLflow sends strings; a number is taken as its text."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidRequest(name, f"{value!r} is not a string")
    value = str(value)
    if len(value) > limit or "\x00" in value:
        raise InvalidRequest(name, f"is {len(value)} characters or holds NUL", f"at most {limit} characters, no NUL")
    return value


def integer(value: Any, name: str, default: int | None = None, low: int = 0) -> int:
    if value is None or value == "":
        if default is None:
            raise InvalidRequest(name, "missing", f"give {name}")
        return default
    if isinstance(value, str) and value.lstrip("-").isdigit() and value.isascii():
        value = int(value)
    if type(value) is not int or not low <= value < 2**63:
        raise InvalidRequest(name, f"{value!r} is not a whole number", f"give an integer from {low} to 2**63-1")
    return value


def double(value: Any, name: str) -> float:
    if isinstance(value, str) and value in _NONFINITE:
        return _NONFINITE[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidRequest(name, f"{value!r} is not a number", 'give a number, "NaN", "Infinity" or "-Infinity"')
    try:
        return float(value)
    except OverflowError:
        raise InvalidRequest(name, f"{value!r} is not a 64-bit float") from None


def metric(item: Any, name: str) -> MetricPoint:
    if not isinstance(item, dict):
        raise InvalidRequest(name, "must be an object", '{"key": "loss", "value": 0.5, "timestamp": 1700000000000, "step": 0}')
    if "value" not in item:
        raise InvalidRequest(f"{name}.value", "missing", "give the metric's value")
    return MetricPoint(key(item.get("key"), f"{name}.key"), double(item["value"], f"{name}.value"),
                       integer(item.get("timestamp"), f"{name}.timestamp"), integer(item.get("step"), f"{name}.step", 0))


def pairs(items: Any, name: str, limit: int, value_limit: int) -> list[tuple[str, str]]:
    """`[{"key": ..., "value": ...}, ...]` (params, tags) as (key, value) pairs."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise InvalidRequest(name, "must be a list", 'e.g. [{"key": "k", "value": "v"}]')
    if len(items) > limit:
        raise InvalidRequest(name, f"{len(items)} given", f"at most {limit} per request, as MLflow allows")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidRequest(f"{name}[{i}]", "must be an object", '{"key": "k", "value": "v"}')
        out.append((key(item.get("key"), f"{name}[{i}].key"), value_text(item.get("value"), f"{name}[{i}].value", value_limit)))
    return out


def batch(body: Mapping[str, Any]) -> tuple[dict[str, Points], list[tuple[str, str]], list[tuple[str, str]]]:
    """LogBatch's metrics (per key, in step order), params and tags, within MLflow's limits."""
    metrics = body.get("metrics") or []
    if not isinstance(metrics, list):
        raise InvalidRequest("metrics", "must be a list")
    if len(metrics) > MAX_METRICS:
        raise InvalidRequest("metrics", f"{len(metrics)} given", f"at most {MAX_METRICS} per request, as MLflow allows")
    series = _columns(metrics)
    if series is None:  # something is off: each point checked alone, for an error that names it
        series = by_key([metric(m, f"metrics[{i}]") for i, m in enumerate(metrics)])
    points = series
    params = pairs(body.get("params"), "params", MAX_PARAMS, MAX_PARAM_VALUE)
    tags = pairs(body.get("tags"), "tags", MAX_TAGS, MAX_TAG_VALUE)
    if len(metrics) + len(params) + len(tags) > MAX_ITEMS:
        raise InvalidRequest("body", "more than 1000 metrics, params and tags in all", "split the batch")
    return points, params, tags


def by_key(points: list[MetricPoint]) -> dict[str, Points]:
    """Points per key, in step order (a stable sort: among points of one step, the order sent)."""
    grouped: dict[str, list[MetricPoint]] = {}
    for p in points:
        grouped.setdefault(p.key, []).append(p)
    out = {}
    for name, items in grouped.items():
        items.sort(key=lambda p: p.step)
        out[name] = Points(np.array([p.step for p in items], np.int64), np.array([p.value for p in items], np.float64),
                           np.array([p.timestamp_ms / 1000 for p in items], np.float64))
    return out


def _columns(metrics: list[Any]) -> dict[str, Points] | None:
    """The common case at column speed (a batch of 1,000 points in well under a millisecond): plain
    numbers, steps and timestamps as integers, keys that pass `key`. None: anything else."""
    try:
        names = [m["key"] for m in metrics]
        values = [m["value"] for m in metrics]
        stamps = [m["timestamp"] for m in metrics]
        steps = [m.get("step", 0) for m in metrics]
    except (TypeError, KeyError, AttributeError):
        return None
    if not metrics:
        return {}
    if not (set(map(type, values)) <= _NUMBER_TYPES and set(map(type, stamps)) == _INT and set(map(type, steps)) == _INT):
        return None
    try:
        for name in set(names):
            key(name, "metrics.key")
        value_array = np.array(values, np.float64)
        step_array = np.array(steps, np.int64)
        time_array = np.array(stamps, np.int64)
    except (InvalidRequest, OverflowError, ValueError):
        return None
    if len(step_array) and (step_array.min() < 0 or time_array.min() < 0):
        return None
    positions: dict[str, list[int]] = {}
    for i, name in enumerate(names):  # a dict of positions: a fifth of what comparing an object array per key costs
        positions.setdefault(name, []).append(i)
    out = {}
    for name, where in positions.items():
        at = np.array(where, np.intp)
        steps_of = step_array[at]
        order = np.argsort(steps_of, kind="stable")
        at = at[order]
        out[name] = Points(steps_of[order], value_array[at], time_array[at] / 1000)
    return out


def status(value: Any, name: str = "status") -> str | None:
    """An MLflow status as corral's run state, or None where none was given."""
    if value is None:
        return None
    if value not in STATUS_TO_STATE:
        raise InvalidRequest(name, f"{value!r} is not a run status", f"use one of {', '.join(STATUS_TO_STATE)}")
    return STATUS_TO_STATE[value]


def view_type(value: Any, name: str) -> tuple[str, ...]:
    found = VIEW_TYPES.get(str(value) if value is not None else "ACTIVE_ONLY")
    if found is None:
        raise InvalidRequest(name, f"{value!r} is not a view type", "use ACTIVE_ONLY, DELETED_ONLY or ALL")
    return found


def max_results(value: Any, default: int, limit: int = MAX_RESULTS) -> int:
    count = integer(value, "max_results", default, low=1)
    if count > limit:
        raise InvalidRequest("max_results", f"{count} is too many", f"ask for at most {limit:,}")
    return count


def page_token(value: Any) -> int:
    """The offset a page token (MLflow's form: base64 of `{"offset": N}`) stands for; 0 without one."""
    if value in (None, ""):
        return 0
    try:
        decoded = json.loads(base64.b64decode(str(value), validate=True))
        offset = decoded["offset"]
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise InvalidRequest("page_token", "is not a page token of this server", "pass next_page_token as given") from None
    if type(offset) is not int or not 0 <= offset < 2**62:
        raise InvalidRequest("page_token", "is not a page token of this server", "pass next_page_token as given")
    return offset


def next_page_token(offset: int) -> str:
    return base64.b64encode(json.dumps({"offset": offset}).encode()).decode()


def experiment_id(value: Any, name: str = "experiment_id") -> str:
    """An experiment id as given: digits (a project's id; "0" the default project's)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.isascii() or not value.isdigit() or len(value) > 18:
        raise InvalidRequest(name, f"{value!r} is not an experiment id", "give an id that create or get-by-name answered")
    return value
