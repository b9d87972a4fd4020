"""Parsing a metrics batch: both shapes give the same arrays, and every mistake names its field."""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from corral.core.tracking.metric_series import Points
from corral.core.tracking.metrics_batch import MAX_POINTS_PER_BATCH, MAX_STEP, increasing_only, parse_metrics_batch
from corral.errors import InvalidRequest

NOW = 1_700_000_000.0


def b64(array: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.asarray(array).astype(dtype).tobytes()).decode()


def assert_points_equal(a: Points, b: Points) -> None:
    assert a.steps.dtype == np.int64 and b.steps.dtype == np.int64
    assert a.steps.tolist() == b.steps.tolist()
    assert a.values.tobytes() == b.values.tobytes() or np.array_equal(a.values, b.values, equal_nan=True)
    assert a.times.tolist() == b.times.tolist()


def field_of(body) -> str:
    with pytest.raises(InvalidRequest) as info:
        parse_metrics_batch(body, NOW)
    assert str(info.value)  # a message, not only a field
    return info.value.field


def test_lists_and_packed_arrays_give_the_same_points():
    steps, values, times = [0, 1, 5], [2.5, -1.0, 1e-300], [NOW, NOW + 1, NOW + 2]
    lists = parse_metrics_batch({"metrics": [{"key": "loss", "steps": steps, "values": values, "times": times}]}, NOW)
    packed = parse_metrics_batch({"metrics": [{"key": "loss", "steps_i64": b64(steps, "<i8"), "values_f64": b64(values, "<f8"),
                                               "times_f64": b64(times, "<f8")}]}, NOW)
    assert_points_equal(lists.series["loss"], packed.series["loss"])
    assert lists.series["loss"].values.tolist() == values
    assert packed.points == 3


def test_times_default_to_the_servers_clock():
    batch = parse_metrics_batch({"points": [{"key": "a", "step": 3, "value": 1}],
                                 "metrics": [{"key": "b", "steps": [1, 2], "values": [1, 2]}]}, NOW)
    assert batch.series["a"].times.tolist() == [NOW]
    assert batch.series["b"].times.tolist() == [NOW, NOW]


def test_nan_infinity_and_null_are_accepted_as_values():
    raw = [1, 2.5, None, "NaN", "nan", "Infinity", "inf", "-Infinity", "-inf"]
    batch = parse_metrics_batch({"metrics": [{"key": "x", "steps": list(range(len(raw))), "values": raw}]}, NOW)
    values = batch.series["x"].values
    assert values[:2].tolist() == [1.0, 2.5]
    assert np.isnan(values[2:5]).all()
    assert values[5:].tolist() == [math.inf, math.inf, -math.inf, -math.inf]
    rows = parse_metrics_batch({"points": [{"key": "x", "step": i, "value": v} for i, v in enumerate(raw)]}, NOW)
    assert_points_equal(rows.series["x"], batch.series["x"])


def test_packed_values_keep_nan_and_infinity_exactly():
    values = np.array([math.nan, math.inf, -math.inf, -0.0, 5e-324])
    batch = parse_metrics_batch({"metrics": [{"key": "x", "steps_i64": b64(np.arange(5), "<i8"),
                                              "values_f64": b64(values, "<f8")}]}, NOW)
    assert batch.series["x"].values.tobytes() == values.tobytes()


def test_a_key_sent_twice_is_one_series_in_the_order_sent():
    batch = parse_metrics_batch({"metrics": [{"key": "a", "steps": [0, 1], "values": [0, 1]},
                                             {"key": "b", "steps": [0], "values": [9]},
                                             {"key": "a", "steps": [2], "values": [2]}],
                                 "points": [{"key": "a", "step": 3, "value": 3}]}, NOW)
    assert batch.series["a"].steps.tolist() == [0, 1, 2, 3]
    assert batch.series["a"].values.tolist() == [0, 1, 2, 3]
    assert batch.points == 5


def test_an_empty_batch_is_valid_and_holds_nothing():
    assert parse_metrics_batch({"batch_id": "b-1"}, NOW).points == 0
    assert parse_metrics_batch({"metrics": [{"key": "a", "steps": [], "values": []}]}, NOW).points == 0


keys_st = st.sampled_from(["loss", "acc", "train/loss", "val loss"])
rows_st = st.lists(st.tuples(keys_st, st.integers(0, MAX_STEP - 1),
                             st.floats(allow_nan=False, allow_infinity=True) | st.none(),
                             st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False)), max_size=40)


@settings(max_examples=100, deadline=None)
@given(rows=rows_st)
def test_row_form_equals_column_form(rows):
    row_batch = parse_metrics_batch({"batch_id": "x", "points": [
        {"key": k, "step": s, "value": v, "time": t} for k, s, v, t in rows]}, NOW)
    columns: dict[str, dict[str, list]] = {}
    for k, s, v, t in rows:
        col = columns.setdefault(k, {"key": k, "steps": [], "values": [], "times": []})
        col["steps"].append(s)
        col["values"].append(v)
        col["times"].append(t)
    col_batch = parse_metrics_batch({"batch_id": "x", "metrics": list(columns.values())}, NOW)
    assert set(row_batch.series) == set(col_batch.series) == set(columns)
    for key in columns:
        assert_points_equal(row_batch.series[key], col_batch.series[key])
    assert row_batch.points == col_batch.points == len(rows)


def test_a_batch_of_exactly_the_limit_is_accepted_and_one_more_is_refused():
    def body(n: int) -> dict:
        return {"metrics": [{"key": "a", "steps_i64": b64(np.arange(n), "<i8"), "values_f64": b64(np.zeros(n), "<f8")}]}

    assert parse_metrics_batch(body(MAX_POINTS_PER_BATCH), NOW).points == MAX_POINTS_PER_BATCH
    assert field_of(body(MAX_POINTS_PER_BATCH + 1)) == "metrics"


def test_too_many_rows_names_points():
    rows = [{"key": "a", "step": i, "value": 0} for i in range(MAX_POINTS_PER_BATCH + 1)]
    assert field_of({"points": rows}) == "points"


S3 = b64([0, 1, 2], "<i8")
V3 = b64([0.0, 1.0, 2.0], "<f8")


BAD_BATCHES = [
    ([], "body"),
    ({"batch_id": "x", "extra": 1}, "extra"),
    ({"batch_id": "has space"}, "batch_id"),
    ({"batch_id": "x" * 65}, "batch_id"),
    ({"batch_id": 7}, "batch_id"),
    ({"metrics": {"key": "a"}}, "metrics"),
    ({"metrics": ["loss"]}, "metrics[0]"),
    ({"metrics": [{"key": "a", "steps": [0], "values": [1], "unit": "s"}]}, "metrics[0].unit"),
    ({"metrics": [{"key": "", "steps": [0], "values": [1]}]}, "metrics[0].key"),
    ({"metrics": [{"key": "a" * 251, "steps": [0], "values": [1]}]}, "metrics[0].key"),
    ({"metrics": [{"key": "a\nb", "steps": [0], "values": [1]}]}, "metrics[0].key"),
    ({"metrics": [{"key": 5, "steps": [0], "values": [1]}]}, "metrics[0].key"),
    ({"metrics": [{"steps": [0], "values": [1]}]}, "metrics[0].key"),
    ({"metrics": [{"key": "a", "steps": [0]}]}, "metrics[0]"),
    ({"metrics": [{"key": "a", "values": [1]}]}, "metrics[0]"),
    ({"metrics": [{"key": "a", "steps": [0, 1.5], "values": [1, 2]}]}, "metrics[0].steps"),
    ({"metrics": [{"key": "a", "steps": [0, "1"], "values": [1, 2]}]}, "metrics[0].steps"),
    ({"metrics": [{"key": "a", "steps": [True], "values": [1]}]}, "metrics[0].steps"),
    ({"metrics": [{"key": "a", "steps": [-1], "values": [1]}]}, "metrics[0].steps"),
    ({"metrics": [{"key": "a", "steps": [MAX_STEP], "values": [1]}]}, "metrics[0].steps"),
    ({"metrics": [{"key": "a", "steps": [2**64], "values": [1]}]}, "metrics[0].steps"),
    ({"metrics": [{"key": "a", "steps": "0,1", "values": [1, 2]}]}, "metrics[0].steps"),
    ({"metrics": [{"key": "a", "steps": [0, 1], "values": [1]}]}, "metrics[0].values"),
    ({"metrics": [{"key": "a", "steps": [0], "values": ["one"]}]}, "metrics[0].values"),
    ({"metrics": [{"key": "a", "steps": [0], "values": [True]}]}, "metrics[0].values"),
    ({"metrics": [{"key": "a", "steps": [0], "values": [[1]]}]}, "metrics[0].values"),
    ({"metrics": [{"key": "a", "steps": [0], "values": [10**400]}]}, "metrics[0].values"),
    ({"metrics": [{"key": "a", "steps": [0, 1], "values": [1, 2], "times": [NOW]}]}, "metrics[0].times"),
    ({"metrics": [{"key": "a", "steps": [0], "values": [1], "times": ["now"]}]}, "metrics[0].times"),
    ({"metrics": [{"key": "a", "steps": [0], "values": [1], "times": [math.nan]}]}, "metrics[0].times"),
    ({"metrics": [{"key": "a", "steps": [0], "values": [1], "times": [math.inf]}]}, "metrics[0].times"),
    ({"metrics": [{"key": "a", "steps": [0], "steps_i64": S3, "values": [1]}]}, "metrics[0].steps_i64"),
    ({"metrics": [{"key": "a", "steps_i64": "not base64!", "values_f64": V3}]}, "metrics[0].steps_i64"),
    ({"metrics": [{"key": "a", "steps_i64": S3[:-4], "values_f64": V3}]}, "metrics[0].steps_i64"),
    ({"metrics": [{"key": "a", "steps_i64": base64.b64encode(b"1234567").decode(), "values": [1]}]}, "metrics[0].steps_i64"),
    ({"metrics": [{"key": "a", "steps_i64": 12, "values_f64": V3}]}, "metrics[0].steps_i64"),
    ({"metrics": [{"key": "a", "steps_i64": S3, "values_f64": base64.b64encode(b"x" * 20).decode()}]}, "metrics[0].values_f64"),
    ({"metrics": [{"key": "a", "steps_i64": S3, "values_f64": V3, "times_f64": "@@@@"}]}, "metrics[0].times_f64"),
    ({"metrics": [{"key": "a", "steps_i64": S3, "values_f64": V3,
                   "times_f64": b64([NOW, math.nan, NOW], "<f8")}]}, "metrics[0].times_f64"),
    ({"metrics": [{"key": "a", "steps_i64": S3, "values_f64": b64([1.0, 2.0], "<f8")}]}, "metrics[0].values_f64"),
    ({"metrics": [{"key": "a", "steps_i64": S3, "values_f64": V3, "times_f64": b64([NOW], "<f8")}]}, "metrics[0].times_f64"),
    ({"metrics": [{"key": "a", "steps_i64": b64([0, -5, 9], "<i8"), "values_f64": V3}]}, "metrics[0].steps_i64"),
    ({"metrics": [{"key": "a", "steps": [0], "values": [1]}, {"key": "b", "steps": [0.5], "values": [1]}]},
     "metrics[1].steps"),
    ({"points": {"key": "a"}}, "points"),
    ({"points": [{"key": "a", "step": 0}]}, "points[0]"),
    ({"points": [{"key": "a", "step": 0, "value": 1, "extra": 1}]}, "points[0]"),
    ({"points": ["a"]}, "points[0]"),
    ({"points": [{"key": "a", "step": 0, "value": 1}, {"key": "", "step": 1, "value": 1}]}, "points[1].key"),
    ({"points": [{"key": "a", "step": 1.0, "value": 1}]}, "points[0].step"),
    ({"points": [{"key": "a", "step": -1, "value": 1}]}, "points[0].step"),
    ({"points": [{"key": "a", "step": MAX_STEP, "value": 1}]}, "points[0].step"),
    ({"points": [{"key": "a", "step": False, "value": 1}]}, "points[0].step"),
    ({"points": [{"key": "a", "step": 0, "value": "x"}]}, "points[0].value"),
    ({"points": [{"key": "a", "step": 0, "value": 1, "time": math.inf}]}, "points[0].time"),
    ({"points": [{"key": "a", "step": 0, "value": 1, "time": math.nan}]}, "points[0].time"),
    ({"points": [{"key": "a", "step": 0, "value": 1, "time": "noon"}]}, "points[0].time"),
    ({"points": [{"key": "a", "step": 0, "value": 1, "time": None}]}, "points[0].time"),
]


@pytest.mark.parametrize("body, field", BAD_BATCHES, ids=[f"{i}:{f}" for i, (_, f) in enumerate(BAD_BATCHES)])
def test_each_bad_input_names_its_field(body, field):
    assert field_of(body) == field


steps_st = hnp.arrays(np.int64, st.integers(0, 60), elements=st.integers(0, 50))


@settings(max_examples=200, deadline=None)
@given(steps=steps_st, last=st.none() | st.integers(-1, 50))
def test_increasing_only_keeps_exactly_the_points_above_every_earlier_step(steps, last):
    points = Points(steps, np.arange(len(steps), dtype=np.float64), np.zeros(len(steps)))
    kept = increasing_only(points, last)
    expected, top = [], (-1 if last is None else last)
    for i, step in enumerate(steps.tolist()):
        if step > top:
            expected.append(i)
            top = step
    assert kept.values.astype(int).tolist() == expected  # the values are the original positions
    assert (np.diff(kept.steps) > 0).all()
    assert last is None or (kept.steps > last).all()


def test_increasing_only_makes_a_relogged_range_store_nothing_twice():
    points = Points(np.arange(0, 20, dtype=np.int64), np.arange(20.0), np.zeros(20))
    kept = increasing_only(points, 9)
    assert kept.steps.tolist() == list(range(10, 20))
    assert len(increasing_only(points, 19)) == 0
    assert increasing_only(points, None) is points
