"""Turning logged dicts into the API's columnar metric batches.

`run.log` hands over step, time and dict untouched; here, in the sender's thread, they
become per-key columns of packed little-endian int64 steps and float64 values and times, base64
encoded (exact, NaN-safe, and a fraction of the size of JSON numbers). Standard library only:
`import corral` must not pull in numpy.
"""

from __future__ import annotations

import base64
import bisect
import sys
import uuid
from array import array
from collections.abc import Callable, Iterable
from itertools import accumulate, chain
from operator import itemgetter
from typing import Any

MAX_BATCH_POINTS = 100_000
MAX_STEP = 2**62        # the server's bound on steps
MAX_KEY_LENGTH = 250    # and on metric keys (printable characters)
NAN = float("nan")

class _Group:
    """The records of one batch that logged the same keys, in the same order.

    A training loop logs the same dict shape at every step, so a record costs three C-level
    appends: its step, its time, and its values (`array.extend(dict.values())` converts
    floats, ints, bools, and numpy or torch scalars through __float__, without a Python loop).
    Values are interleaved (key 0, key 1, ..., key 0, ...) and split per key when sealed.
    """

    __slots__ = ("keys", "width", "seqs", "steps", "values", "times")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.width = len(keys)
        self.seqs = array("q")  # the record's position in the batch: orders a key logged by several groups
        self.steps = array("q")
        self.values = array("d")
        self.times = array("d")


class ColumnBuilder:
    """Accumulates logged records into columns, sealed into batches of at most `max_points` points.

    `ready` holds the sealed batches as `(batch, points, last_step)`, where `last_step` is the
    highest step logged so far (a spooled run resumed offline continues after it).
    """

    def __init__(self, max_points: int = MAX_BATCH_POINTS, warn: Callable[[str, str], None] | None = None) -> None:
        self.max_points = max_points
        self._warn = warn or (lambda key, message: None)
        self._groups: dict[tuple[Any, ...], _Group] = {}
        self._key_owner: dict[str, _Group] = {}
        self._shared: set[str] = set()  # keys that more than one group of this batch holds
        self._seq = 0
        self.points = 0
        self.last_step = -1
        self.ready: list[tuple[dict[str, Any], int, int]] = []

    def extend(self, steps: list[Any], times: list[float], datas: list[Any]) -> None:
        """Add many `run.log` calls at once (the sender's path): C-level loops, not one per record.

        Falls back to `add`, record by record, for anything the fast path cannot take.
        """
        if len(steps) < 16:
            for step, when, data in zip(steps, times, datas):
                self.add(step, when, data)
            return
        try:
            widths = list(map(len, datas))
        except TypeError:
            widths = None
        if widths is None:
            for step, when, data in zip(steps, times, datas):
                self.add(step, when, data)
            return
        ends = list(accumulate(widths))  # ends[i]: points in records 0..i
        start, end = 0, len(steps)
        while start < end:
            # as many records as fit in the current batch
            before = ends[start - 1] if start else 0
            stop = bisect.bisect_right(ends, before + self.max_points - self.points, start, end)
            if stop == start:
                if self.points:
                    self.seal()
                    continue
                stop = start + 1  # a single record wider than a batch goes alone
            self._extend_fitting(steps[start:stop], times[start:stop], datas[start:stop])
            start = stop
            if self.points >= self.max_points:
                self.seal()

    def _extend_fitting(self, steps: list[Any], times: list[float], datas: list[Any]) -> None:
        first = tuple(datas[0])
        # the common case, checked without keeping a tuple per record alive (the GC would scan them)
        if all(map(first.__eq__, map(tuple, datas))):
            if self._extend_shape(first, steps, times, datas):
                return
        else:
            shapes = list(map(tuple, datas))
            buckets: dict[tuple[Any, ...], list[int]] = {}
            for index, shape in enumerate(shapes):
                bucket = buckets.get(shape)
                if bucket is None:
                    buckets[shape] = [index]
                else:
                    bucket.append(index)
            if len(buckets) <= len(shapes) // 4:
                base = self._seq
                done: list[int] = []
                for shape, indices in buckets.items():
                    pick = itemgetter(*indices) if len(indices) > 1 else (lambda seq, i=indices[0]: (seq[i],))
                    if self._extend_shape(shape, pick(steps), pick(times), pick(datas), [base + i for i in indices]):
                        done.extend(indices)
                self._seq = base + len(steps)
                if len(done) == len(steps):
                    return
                left = sorted(set(range(len(steps))) - set(done))
                for i in left:  # in log order, each at its own seq
                    self._add_at(steps[i], times[i], datas[i], base + i)
                return
        for step, when, data in zip(steps, times, datas):
            self.add(step, when, data)

    def _extend_shape(self, shape: tuple[Any, ...], steps: Any, times: Any, datas: Any,
                      seqs: list[int] | None = None) -> bool:
        """Append records that all logged the keys `shape`; False (nothing added) if one will not convert."""
        group = self._groups.get(shape) or self._open_group(shape)
        if group is None:
            return False
        sizes = (len(group.steps), len(group.times), len(group.values))
        try:
            group.steps.extend(steps)
            group.times.extend(times)
            group.values.extend(chain.from_iterable(map(dict.values, datas)))
        except (TypeError, ValueError, OverflowError, RuntimeError):
            del group.steps[sizes[0]:], group.times[sizes[1]:], group.values[sizes[2]:]
            return False
        if seqs is None:
            group.seqs.extend(range(self._seq, self._seq + len(steps)))
            self._seq += len(steps)
        else:
            group.seqs.extend(seqs)
        self.points += group.width * len(steps)
        return True

    def _add_at(self, step: Any, when: float, data: Any, seq: int) -> None:
        saved, self._seq = self._seq, seq
        self.add(step, when, data)
        self._seq = max(saved, self._seq)

    def add(self, step: Any, when: float, data: Any) -> None:
        """Add one `run.log` call's values; what is not a number is dropped, with one warning."""
        try:
            if self.points + len(data) > self.max_points:
                self.seal()
            keys = tuple(data)
            group = self._groups.get(keys)
        except TypeError:
            group = None
        if group is None:
            group = self._open_group(data)
            if group is None:
                self._add_converted(step, when, data)
                return
        values = group.values
        filled = len(values)
        try:
            group.steps.append(step)
            values.extend(data.values())
        except (TypeError, ValueError, OverflowError, AttributeError, RuntimeError):
            # a value float() would not take in C (None, a string, a tensor): roll back, go slow
            if len(group.steps) > len(group.times):
                group.steps.pop()
            del values[filled:]
            self._add_converted(step, when, data)
            return
        group.times.append(when)
        group.seqs.append(self._seq)
        self._seq += 1
        self.points += group.width

    def seal(self) -> None:
        """Move the accumulated points, if any, into `ready` as one batch request."""
        if not self.points:
            return
        metrics: list[dict[str, Any]] = []
        shared: dict[str, list[tuple[array, array, array, array]]] = {}
        points = 0
        for group in self._groups.values():
            if not group.steps:
                continue
            if min(group.steps) < 0 or max(group.steps) >= MAX_STEP:
                _drop_bad_steps(group)
                self._warn("step", f"dropped log calls with a step below 0 or above {MAX_STEP}")
                if not group.steps:
                    continue
            self.last_step = max(self.last_step, max(group.steps))
            steps, times = _pack(group.steps), _pack(group.times)
            width = group.width
            for i, key in enumerate(group.keys):
                values = group.values[i::width] if width > 1 else group.values
                points += len(values)
                if key in self._shared:
                    shared.setdefault(key, []).append((group.seqs, group.steps, values, group.times))
                else:
                    metrics.append({"key": key, "steps_i64": steps, "values_f64": _pack(values), "times_f64": times})
        for key, parts in shared.items():
            merged_steps, merged_values, merged_times = _merge_in_log_order(parts)
            metrics.append({"key": key, "steps_i64": _pack(merged_steps), "values_f64": _pack(merged_values),
                            "times_f64": _pack(merged_times)})
        if metrics:
            self.ready.append(({"batch_id": uuid.uuid4().hex, "metrics": metrics}, points, self.last_step))
        self._groups, self._key_owner, self._shared = {}, {}, set()
        self._seq = self.points = 0

    def take_ready(self) -> list[tuple[dict[str, Any], int, int]]:
        ready, self.ready = self.ready, []
        return ready

    def _open_group(self, data: Any) -> _Group | None:
        """A group for these keys (a dict or a tuple of its keys); None when they are not all strings."""
        try:
            keys = tuple(data)
        except TypeError:
            return None
        if not keys or not all(type(k) is str and 0 < len(k) <= MAX_KEY_LENGTH and k.isprintable() for k in keys):
            return None
        group = self._groups[keys] = _Group(keys)
        for key in keys:
            if key in self._key_owner:
                self._shared.add(key)
            else:
                self._key_owner[key] = group
        return group

    def _add_converted(self, step: Any, when: float, data: Any) -> None:
        """The slow path: convert the step, the keys and each value in Python, then add the clean dict."""
        try:
            step = int(step)
        except (TypeError, ValueError):
            self._warn("step", f"dropped a log call whose step {step!r} is not an integer")
            return
        if not 0 <= step < MAX_STEP:
            self._warn("step", f"dropped a log call with step {step}: steps are 0 to {MAX_STEP - 1}")
            return
        try:
            items = list(data.items())
        except AttributeError:
            self._warn("data", f"dropped a log call whose data is a {type(data).__name__}, not a dict")
            return
        clean: dict[str, float] = {}
        for key, value in items:
            number = value if type(value) is float else _to_float(value)
            if number is None:
                self._warn(f"value:{key}", f"dropped a value of key {key!r}: a {type(value).__name__} is not a number")
                continue
            key = key if type(key) is str else str(key)
            if not (0 < len(key) <= MAX_KEY_LENGTH and key.isprintable()):
                self._warn(f"key:{key}", f"dropped values of key {key!r}: a key is 1-{MAX_KEY_LENGTH} printable characters")
                continue
            clean[key] = number
        if clean:
            self.add(step, when, clean)


def _drop_bad_steps(group: _Group) -> None:
    keep = [i for i, step in enumerate(group.steps) if 0 <= step < MAX_STEP]
    width = group.width
    group.seqs = array("q", (group.seqs[i] for i in keep))
    group.steps = array("q", (group.steps[i] for i in keep))
    group.times = array("d", (group.times[i] for i in keep))
    group.values = array("d", (group.values[i * width + k] for i in keep for k in range(width)))


def _merge_in_log_order(parts: list[tuple[array, array, array, array]]) -> tuple[array, array, array]:
    """One key's points from several groups, in the order they were logged (seq)."""
    rows = sorted((seq, step, value, when) for seqs, steps, values, times in parts
                  for seq, step, value, when in zip(seqs, steps, values, times))
    return array("q", (r[1] for r in rows)), array("d", (r[2] for r in rows)), array("d", (r[3] for r in rows))


def chunk_records(records: Iterable[tuple[Any, float, Any]], max_points: int = MAX_BATCH_POINTS) -> list[dict[str, Any]]:
    """Encode `(step, time, dict)` records into batches of at most `max_points` points, as the sender does."""
    builder = ColumnBuilder(max_points)
    rows = list(records)
    builder.extend([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
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
