"""Turning logged dicts into the API's columnar metric batches.

`run.log` hands over `(step, time, dict)` tuples untouched; here, in the sender's thread, they
become per-key columns of packed little-endian int64 steps and float64 values and times, base64
encoded (exact, NaN-safe, and a fraction of the size of JSON numbers). Standard library only:
`import corral` must not pull in numpy.
"""

from __future__ import annotations

import base64
import sys
import uuid
from array import array
from collections.abc import Callable, Iterable
from typing import Any

MAX_BATCH_POINTS = 100_000
NAN = float("nan")

Columns = dict[str, tuple[array, array, array]]
"""key -> (steps 'q', values 'd', times 'd')."""


class ColumnBuilder:
    """Accumulates logged records into columns, sealed into batches of at most `max_points` points.

    `ready` holds the sealed batches as `(batch, points, last_step)`, where `last_step` is the
    highest step logged so far (a spooled run resumed offline continues after it).
    """

    def __init__(self, max_points: int = MAX_BATCH_POINTS, warn: Callable[[str, str], None] | None = None) -> None:
        self.max_points = max_points
        self._warn = warn or (lambda key, message: None)
        self.columns: Columns = {}
        self.points = 0
        self.last_step = -1
        self.ready: list[tuple[dict[str, Any], int, int]] = []

    def add(self, step: Any, when: float, data: Any) -> None:
        """Add one `run.log` call's values; a value that is not a number is dropped (with one warning)."""
        if type(step) is not int:
            try:
                step = int(step)
            except (TypeError, ValueError):
                self._warn("step", f"dropped a log call whose step {step!r} is not an integer")
                return
        if step < 0:
            self._warn("step", f"dropped a log call with negative step {step}")
            return
        try:
            items = data.items()
        except AttributeError:
            self._warn("data", f"dropped a log call whose data is a {type(data).__name__}, not a dict")
            return
        if self.points and self.points + len(data) > self.max_points:
            self.seal()
        columns = self.columns
        added = 0
        for key, value in items:
            if type(value) is not float:
                number = _to_float(value)
                if number is None:
                    self._warn(f"value:{key}", f"dropped a value of key {key!r}: a {type(value).__name__} is not a number")
                    continue
                value = number
            column = columns.get(key)
            if column is None:
                key = key if type(key) is str else str(key)
                column = columns.get(key)
                if column is None:
                    column = columns[key] = (array("q"), array("d"), array("d"))
            column[0].append(step)
            column[1].append(value)
            column[2].append(when)
            added += 1
        self.points += added
        if step > self.last_step:
            self.last_step = step

    def seal(self) -> None:
        """Move the accumulated points, if any, into `ready` as one batch request."""
        if self.points:
            self.ready.append((encode_batch(self.columns), self.points, self.last_step))
            self.columns, self.points = {}, 0

    def take_ready(self) -> list[tuple[dict[str, Any], int, int]]:
        ready, self.ready = self.ready, []
        return ready


def encode_batch(columns: Columns, batch_id: str | None = None) -> dict[str, Any]:
    """The API's `{"batch_id", "metrics": [...]}` with base64 packed columns."""
    return {
        "batch_id": batch_id or uuid.uuid4().hex,
        "metrics": [
            {"key": key, "steps_i64": _pack(steps), "values_f64": _pack(values), "times_f64": _pack(times)}
            for key, (steps, values, times) in columns.items()
        ],
    }


def decode_series(series: dict[str, Any]) -> tuple[list[int], list[float], list[float]]:
    """Steps, values and times of one encoded series (tests and `corral sync` read batches back)."""
    return (_unpack("q", series["steps_i64"]), _unpack("d", series["values_f64"]),
            _unpack("d", series["times_f64"]) if "times_f64" in series else [])


def batch_points(batch: dict[str, Any]) -> int:
    """How many points a columnar batch holds (8 bytes per step)."""
    return sum(len(base64.b64decode(s["steps_i64"])) // 8 for s in batch.get("metrics", ()))


def chunk_records(records: Iterable[tuple[Any, float, Any]], max_points: int = MAX_BATCH_POINTS) -> list[dict[str, Any]]:
    """Encode records into batches of at most `max_points` points (what the sender does, in one go)."""
    builder = ColumnBuilder(max_points)
    for step, when, data in records:
        builder.add(step, when, data)
    builder.seal()
    return [batch for batch, _, _ in builder.take_ready()]


def _to_float(value: Any) -> float | None:
    """ints, bools, numpy and torch scalars (anything with __float__); None -> NaN; else None."""
    if value is None:
        return NAN
    if isinstance(value, (str, bytes)):
        return None  # float("1.5") would work, but a string metric is a mistake worth reporting
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError):  # RuntimeError: a torch tensor of more than one element
        return None


def _pack(column: array) -> str:
    if sys.byteorder == "big":
        column = array(column.typecode, column)
        column.byteswap()
    return base64.b64encode(column.tobytes()).decode("ascii")


def _unpack(typecode: str, text: str) -> list[Any]:
    column = array(typecode)
    column.frombytes(base64.b64decode(text))
    if sys.byteorder == "big":
        column.byteswap()
    return column.tolist()
