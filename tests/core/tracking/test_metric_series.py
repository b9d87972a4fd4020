"""Chunk encoding, block summaries and downsampling of metric series (pure functions)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from corral.core.tracking import metric_series as S

# Values drawn from a small pool repeat often (ties), and include NaN and both infinities.
_POOL = [0.0, -1.5, 2.0, 1e300, -1e300, math.nan, math.inf, -math.inf, 3.25, 3.25]
values_st = st.one_of(st.sampled_from(_POOL), st.floats(allow_nan=True, allow_infinity=True, width=64))


@st.composite
def series_st(draw, min_size: int = 1, max_size: int = 200) -> S.Points:
    """Points in strictly increasing step order (what a stored series is)."""
    n = draw(st.integers(min_size, max_size))
    gaps = draw(hnp.arrays(np.int64, n, elements=st.integers(1, 1000)))
    first = draw(st.integers(0, 2**40))
    steps = first + np.cumsum(gaps) - (gaps[0] if n else 0)
    values = draw(hnp.arrays(np.float64, n, elements=values_st))
    times = 1.7e9 + np.arange(n, dtype=np.float64) / 10
    return S.Points(steps.astype(np.int64), values, times)


def _by_step(points: S.Points) -> dict[int, tuple[float, float]]:
    return {int(s): (float(v), float(t)) for s, v, t in zip(points.steps, points.values, points.times)}


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _assert_real_points(out: S.Points, source: S.Points) -> None:
    known = _by_step(source)
    for step, (value, time_) in _by_step(out).items():
        assert step in known, f"step {step} is not an input point"
        assert _same(known[step][0], value) and known[step][1] == time_


def _downsample_raw(points: S.Points, max_points: int) -> S.Points:
    return S.downsample(points, points.take(slice(0, 1)), points.take(slice(-1, None)), max_points)


@settings(max_examples=150, deadline=None)
@given(points=series_st(), max_points=st.integers(2, 40))
def test_downsample_is_at_most_max_points_of_real_points_in_step_order_with_first_and_last(points, max_points):
    out = _downsample_raw(points, max_points)
    assert 1 <= len(out) <= max_points
    assert (np.diff(out.steps) > 0).all(), "steps must be in order, each once"
    _assert_real_points(out, points)
    assert out.steps[0] == points.steps[0] and out.steps[-1] == points.steps[-1]
    assert _same(float(out.values[0]), float(points.values[0]))
    assert _same(float(out.values[-1]), float(points.values[-1]))


@settings(max_examples=150, deadline=None)
@given(points=series_st(), max_points=st.integers(4, 40))
def test_downsample_keeps_the_global_min_and_max_ignoring_nan(points, max_points):
    out = _downsample_raw(points, max_points)
    values = points.values[~np.isnan(points.values)]
    if len(values):
        kept = set(out.values[~np.isnan(out.values)].tolist())
        assert values.min() in kept and values.max() in kept


@settings(max_examples=120, deadline=None)
@given(points=series_st(min_size=2), max_points=st.integers(4, 30))
def test_downsample_keeps_each_buckets_lowest_and_highest_value(points, max_points):
    """The contract of docs/tracking-api.md, checked against a plain-Python bucketing."""
    out = _downsample_raw(points, max_points)
    s0, s1 = int(points.steps[0]), int(points.steps[-1])
    buckets = (max_points - 2) // 2
    width = (s1 - s0 + 1) / buckets

    def bucket_of(step: int) -> int:
        return min(int((step - s0) / width), buckets - 1)

    expected: dict[int, list[float]] = {}
    for step, value in zip(points.steps.tolist(), points.values.tolist()):
        if not math.isnan(value):
            expected.setdefault(bucket_of(step), []).append(value)
    got: dict[int, set[float]] = {}
    for step, value in zip(out.steps.tolist(), out.values.tolist()):
        got.setdefault(bucket_of(step), set()).add(value)
    for b, values in expected.items():
        assert min(values) in got.get(b, set()), f"bucket {b} lost its lowest value"
        assert max(values) in got.get(b, set()), f"bucket {b} lost its highest value"


def test_downsample_of_a_single_point_is_that_point():
    one = S.Points(np.array([7], np.int64), np.array([math.nan]), np.array([1.0]))
    out = _downsample_raw(one, 2)
    assert out.steps.tolist() == [7] and math.isnan(out.values[0])


def test_downsample_keeps_a_spike_in_a_long_flat_series():
    n = 100_000
    values = np.ones(n)
    values[61_234] = 1e6
    values[12_345] = -1e6
    values[500] = math.nan
    points = S.Points(np.arange(n, dtype=np.int64), values, np.zeros(n))
    out = _downsample_raw(points, 10)
    assert len(out) <= 10
    assert {61_234, 12_345, 0, n - 1} <= set(out.steps.tolist())


@settings(max_examples=120, deadline=None)
@given(points=series_st(), block=st.integers(1, 20))
def test_summarize_keeps_each_blocks_lowest_and_highest_point(points, block):
    out = S.summarize(points, block)
    _assert_real_points(out, points)
    assert (np.diff(out.steps) > 0).all()
    n_blocks = -(-len(points) // block)
    assert len(out) <= 2 * n_blocks
    kept = set(out.steps.tolist())
    for lo in range(0, len(points), block):
        part = points.take(slice(lo, lo + block))
        finite = ~np.isnan(part.values)
        if not finite.any():
            assert int(part.steps[0]) in kept, "an all-NaN block is represented by its first point"
            continue
        values = part.values[finite]
        block_values = {float(v) for s, v in zip(out.steps, out.values) if int(s) in set(part.steps.tolist())}
        assert values.min() in block_values and values.max() in block_values


@settings(max_examples=120, deadline=None)
@given(points=series_st(max_size=500), block=st.integers(1, 16), max_points=st.integers(4, 30))
def test_downsampling_block_summaries_still_keeps_the_global_extremes(points, block, max_points):
    """What a long read does: candidates are the summaries, first and last come from the chunk."""
    summary = S.summarize(points, block)
    out = S.downsample(summary, points.take(slice(0, 1)), points.take(slice(-1, None)), max_points)
    assert len(out) <= max_points
    _assert_real_points(out, points)
    values = points.values[~np.isnan(points.values)]
    if len(values):
        assert values.min() in out.values and values.max() in out.values


@given(points=series_st(min_size=0, max_size=200))
def test_encode_decode_round_trips_bit_for_bit(points):
    data = S.encode(points)
    assert len(data) == 24 * len(points)
    back = S.decode(data)
    assert back.steps.dtype == np.int64 and back.values.dtype == np.float64
    assert back.steps.tobytes() == points.steps.tobytes()
    assert back.values.tobytes() == points.values.tobytes()  # NaN payloads and -0.0 included
    assert back.times.tobytes() == points.times.tobytes()


def test_decode_reads_bytes_from_a_database_buffer():
    points = S.Points(np.array([1, 5], np.int64), np.array([0.5, -2.0]), np.array([10.0, 11.0]))
    back = S.decode(memoryview(bytearray(S.encode(points))))
    assert back.steps.tolist() == [1, 5] and back.values.tolist() == [0.5, -2.0] and back.times.tolist() == [10.0, 11.0]


@given(points=series_st(max_size=100), start=st.none() | st.integers(0, 2**41), end=st.none() | st.integers(0, 2**41))
def test_in_range_is_the_points_with_steps_between_start_and_end_inclusive(points, start, end):
    got = points.in_range(start, end).steps.tolist()
    assert got == [s for s in points.steps.tolist() if (start is None or s >= start) and (end is None or s <= end)]
