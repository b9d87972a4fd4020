"""Metric series as arrays: chunk encoding, min/max summaries, and downsampling (pure, no I/O).

A series is stored as chunks of points in step order. Each chunk also keeps two levels of
summaries: for every block of LOD1 (and LOD2) consecutive points, the point with the lowest
and the one with the highest value. A downsampled read of a long series reads only the
summaries of the chunks it covers whole; every point it returns is a real point, and every
block's extremes are among the candidates, so no spike disappears.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LOD1 = 64
LOD2 = 4096
CHUNK_TARGET = 65536  # the most points in one chunk
MERGE_BELOW = 8192  # a chunk smaller than this takes in the appends that follow it
_POINT_BYTES = 24  # int64 step, float64 value, float64 time


@dataclass(frozen=True)
class Points:
    """Parallel arrays: steps (int64), values (float64), times (float64)."""

    steps: np.ndarray
    values: np.ndarray
    times: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)

    def take(self, index: np.ndarray | slice) -> Points:
        return Points(self.steps[index], self.values[index], self.times[index])

    def in_range(self, start: int | None, end: int | None) -> Points:
        """The points with start <= step <= end (steps are sorted)."""
        lo = 0 if start is None else int(np.searchsorted(self.steps, start, "left"))
        hi = len(self) if end is None else int(np.searchsorted(self.steps, end, "right"))
        return self.take(slice(lo, hi))


EMPTY = Points(np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, np.float64))


def concat(parts: list[Points]) -> Points:
    if not parts:
        return EMPTY
    if len(parts) == 1:
        return parts[0]
    return Points(
        np.concatenate([p.steps for p in parts]), np.concatenate([p.values for p in parts]),
        np.concatenate([p.times for p in parts]),
    )


def encode(points: Points) -> bytes:
    return b"".join((
        points.steps.astype("<i8", copy=False).tobytes(), points.values.astype("<f8", copy=False).tobytes(),
        points.times.astype("<f8", copy=False).tobytes(),
    ))


def decode(data: bytes) -> Points:
    n = len(data) // _POINT_BYTES
    return Points(
        np.frombuffer(data, "<i8", n, 0), np.frombuffer(data, "<f8", n, 8 * n), np.frombuffer(data, "<f8", n, 16 * n),
    )


def summarize(points: Points, block: int) -> Points:
    """For each block of `block` points (the last may be shorter), its lowest and highest point."""
    n = len(points)
    if n == 0:
        return EMPTY
    full = n // block * block
    picks = []
    if full:
        values = points.values[:full].reshape(-1, block)
        offsets = np.arange(0, full, block)
        # NaN must not win: it is neither a low nor a high (a block of only NaN yields its first point)
        picks.append(offsets + np.argmin(np.where(np.isnan(values), np.inf, values), axis=1))
        picks.append(offsets + np.argmax(np.where(np.isnan(values), -np.inf, values), axis=1))
    if full < n:
        tail = points.values[full:]
        picks.append(np.array([full + int(np.argmin(np.where(np.isnan(tail), np.inf, tail)))]))
        picks.append(np.array([full + int(np.argmax(np.where(np.isnan(tail), -np.inf, tail)))]))
    index = np.unique(np.concatenate(picks))
    return points.take(index)


def downsample(candidates: Points, first: Points, last: Points, max_points: int) -> Points:
    """At most `max_points` points: `first` and `last` (one point each), and for each of
    (max_points - 2) // 2 buckets of equal step width the lowest and highest candidate in it.

    `candidates` may be raw points or block summaries, in any order; the result is in step order.
    """
    s0, s1 = int(first.steps[0]), int(last.steps[0])
    buckets = max(0, (max_points - 2) // 2)
    parts = [first, last]
    if buckets and len(candidates):
        width = (s1 - s0 + 1) / buckets
        bucket = np.minimum(((candidates.steps - s0) / width).astype(np.int64), buckets - 1)
        values = candidates.values
        for key in (values, -values):  # NaN sorts last either way: a bucket shows NaN only if it holds nothing else
            order = np.lexsort((key, bucket))
            sorted_buckets = bucket[order]
            starts = np.flatnonzero(np.r_[True, sorted_buckets[1:] != sorted_buckets[:-1]])
            parts.append(candidates.take(order[starts]))
    merged = concat(parts)
    steps, index = np.unique(merged.steps, return_index=True)  # sorted, each step once
    return merged.take(index)
