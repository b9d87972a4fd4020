"""Parsing and checking a metrics batch (POST /api/v1/runs/{run}/metrics) into arrays.

Two shapes are accepted (docs/tracking-api.md): per-key columns, as JSON lists or as base64
of packed little-endian arrays (what the SDK sends: exact, NaN-safe, and decoded at memory
speed), or rows `{"key", "step", "value", "time"}`. Every mistake names its field.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.errors import InvalidRequest
from corral.core.tracking.metric_series import Points

MAX_POINTS_PER_BATCH = 1_000_000
MAX_STEP = 2**62
BATCH_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SPECIAL = {"NaN": math.nan, "nan": math.nan, "Infinity": math.inf, "-Infinity": -math.inf, "inf": math.inf,
            "-inf": -math.inf}


@dataclass(frozen=True)
class MetricsBatch:
    batch_id: str | None
    series: dict[str, Points]  # key -> its points, in the order they were sent

    @property
    def points(self) -> int:
        return sum(len(p) for p in self.series.values())


def parse_metrics_batch(body: Any, now: float) -> MetricsBatch:
    """Check a decoded JSON body and turn it into arrays.

    Raises:
        InvalidRequest: the field at fault, and what it should be.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("body", "must be a JSON object", 'send {"batch_id": ..., "metrics": [...]}')
    unknown = set(body) - {"batch_id", "metrics", "points"}
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "unknown field", "a batch has batch_id, and metrics or points")
    batch_id = body.get("batch_id")
    if batch_id is not None and (not isinstance(batch_id, str) or not BATCH_ID.fullmatch(batch_id)):
        raise InvalidRequest("batch_id", f"{batch_id!r} is not a batch id", "use 1-64 letters, digits, _ or -")
    parts: dict[str, list[Points]] = {}
    if "metrics" in body:
        metrics = body["metrics"]
        if not isinstance(metrics, list):
            raise InvalidRequest("metrics", "must be a list of series", 'e.g. [{"key": "loss", "steps": [0], "values": [1.5]}]')
        for i, entry in enumerate(metrics):
            key, points = _series(entry, f"metrics[{i}]", now)
            parts.setdefault(key, []).append(points)
    if "points" in body:
        rows = body["points"]
        if not isinstance(rows, list):
            raise InvalidRequest("points", "must be a list of points", 'e.g. [{"key": "loss", "step": 0, "value": 1.5}]')
        for key, points in _rows(rows, now).items():
            parts.setdefault(key, []).append(points)
    series = {key: _concat(chunks) for key, chunks in parts.items()}
    total = sum(len(p) for p in series.values())
    if total > MAX_POINTS_PER_BATCH:
        raise InvalidRequest("metrics" if "metrics" in body else "points", f"{total} points in one batch",
                             f"send at most {MAX_POINTS_PER_BATCH:,} per request")
    return MetricsBatch(batch_id, series)


def check_key(key: Any, field: str) -> str:
    if not isinstance(key, str) or not 0 < len(key) <= 250 or not key.isprintable():
        raise InvalidRequest(field, f"{key!r} is not a metric key", "use 1-250 printable characters, e.g. train/loss")
    return key


def _series(entry: Any, field: str, now: float) -> tuple[str, Points]:
    if not isinstance(entry, dict):
        raise InvalidRequest(field, "must be an object", 'e.g. {"key": "loss", "steps": [0, 1], "values": [1.5, 1.2]}')
    unknown = set(entry) - {"key", "steps", "values", "times", "steps_i64", "values_f64", "times_f64"}
    if unknown:
        raise InvalidRequest(f"{field}.{sorted(unknown)[0]}", "unknown field",
                             "a series has key, steps or steps_i64, values or values_f64, and optionally times or times_f64")
    key = check_key(entry.get("key"), f"{field}.key")
    steps = _column(entry, "steps", "steps_i64", "<i8", field, _int_list)
    values = _column(entry, "values", "values_f64", "<f8", field, _float_list)
    if steps is None or values is None:
        raise InvalidRequest(field, "needs both steps and values", "give steps (or steps_i64) and values (or values_f64)")
    sent = {name: packed if packed in entry else name
            for name, packed in (("steps", "steps_i64"), ("values", "values_f64"), ("times", "times_f64"))}
    if len(steps) != len(values):
        raise InvalidRequest(f"{field}.{sent['values']}", f"has {len(values)} values for {len(steps)} steps",
                             "give one value per step")
    times = _column(entry, "times", "times_f64", "<f8", field, _time_list)
    if times is None:
        times = np.full(len(steps), now)
    elif len(times) != len(steps):
        raise InvalidRequest(f"{field}.{sent['times']}", f"has {len(times)} times for {len(steps)} steps",
                             "give one time per step, or none")
    _check_steps(steps, f"{field}.{sent['steps']}")
    if len(times) and not np.isfinite(times).all():
        raise InvalidRequest(f"{field}.{sent['times']}", "holds a value that is not a finite number", "give Unix times in seconds")
    return key, Points(steps, values, times)


def _column(entry: dict[str, Any], name: str, packed: str, dtype: str, field: str,
            from_list: Callable[[list[Any], str], np.ndarray]) -> np.ndarray | None:
    if name in entry and packed in entry:
        raise InvalidRequest(f"{field}.{packed}", f"given together with {name}", "give one of the two")
    if packed in entry:
        text = entry[packed]
        try:
            raw = base64.b64decode(text, validate=True) if isinstance(text, str) else None
        except (binascii.Error, ValueError):
            raw = None
        if raw is None or len(raw) % 8:
            raise InvalidRequest(f"{field}.{packed}", "is not base64 of 8-byte little-endian numbers",
                                 "encode the packed array with base64 (standard alphabet, padded)")
        return np.frombuffer(raw, dtype).astype(dtype[1:], copy=False)
    if name in entry:
        if not isinstance(entry[name], list):
            raise InvalidRequest(f"{field}.{name}", "must be a list", f"e.g. {name}: [0, 1, 2]")
        return from_list(entry[name], f"{field}.{name}")
    return None


def _int_list(items: list[Any], field: str) -> np.ndarray:
    if not all(type(v) is int for v in items):
        raise InvalidRequest(field, "holds something other than a whole number", "steps are integers >= 0")
    try:
        return np.array(items, dtype=np.int64)
    except OverflowError:
        raise InvalidRequest(field, "holds a step too large", f"steps are below {MAX_STEP}") from None


def _float_list(items: list[Any], field: str) -> np.ndarray:
    try:
        if all(type(v) in (float, int) for v in items):
            return np.array(items, dtype=np.float64)
        return np.array([_float(v, field) for v in items], dtype=np.float64)
    except OverflowError:
        raise InvalidRequest(field, "holds a number too large for a 64-bit float") from None


def _float(value: Any, field: str) -> float:
    if value is None:
        return math.nan
    if type(value) in (float, int):
        return float(value)
    if isinstance(value, str) and value in _SPECIAL:
        return _SPECIAL[value]
    raise InvalidRequest(field, f"holds {value!r}, not a number", 'values are numbers, null, "NaN", "Infinity" or "-Infinity"')


def _time_list(items: list[Any], field: str) -> np.ndarray:
    if not all(type(v) in (float, int) for v in items):
        raise InvalidRequest(field, "holds something other than a number", "times are Unix times in seconds")
    return np.array(items, dtype=np.float64)


def _check_steps(steps: np.ndarray, field: str) -> None:
    if len(steps) and (steps.min() < 0 or steps.max() >= MAX_STEP):
        raise InvalidRequest(field, "holds a step out of range", f"steps are integers from 0 to {MAX_STEP - 1}")


def _rows(rows: list[Any], now: float) -> dict[str, Points]:
    grouped: dict[str, tuple[list[int], list[float], list[float]]] = {}
    for i, row in enumerate(rows):
        field = f"points[{i}]"
        if not isinstance(row, dict) or not {"key", "step", "value"} <= set(row) or set(row) - {"key", "step", "value", "time"}:
            raise InvalidRequest(field, "must be an object with key, step, value and optionally time",
                                 'e.g. {"key": "loss", "step": 0, "value": 1.5}')
        key = check_key(row["key"], f"{field}.key")
        step, time_ = row["step"], row.get("time", now)
        if type(step) is not int or not 0 <= step < MAX_STEP:
            raise InvalidRequest(f"{field}.step", f"{step!r} is not a step", "steps are integers >= 0")
        if type(time_) not in (int, float) or not math.isfinite(time_):
            raise InvalidRequest(f"{field}.time", f"{time_!r} is not a time", "times are Unix times in seconds")
        steps, values, times = grouped.setdefault(key, ([], [], []))
        steps.append(step)
        values.append(_float(row["value"], f"{field}.value"))
        times.append(float(time_))
    return {
        key: Points(np.array(s, np.int64), np.array(v, np.float64), np.array(t, np.float64))
        for key, (s, v, t) in grouped.items()
    }


def _concat(parts: list[Points]) -> Points:
    if len(parts) == 1:
        return parts[0]
    return Points(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("steps", "values", "times")))


def increasing_only(points: Points, last_step: int | None) -> Points:
    """The points whose step is above every step before it (and above `last_step`, the
    series' last stored step): a series never holds a step twice, nor goes back."""
    if not len(points):
        return points
    floor = -1 if last_step is None else last_step
    previous = np.maximum.accumulate(np.r_[floor, points.steps[:-1]])
    keep = points.steps > previous
    return points if keep.all() else points.take(keep)
