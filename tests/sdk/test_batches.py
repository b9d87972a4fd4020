"""Logged dicts become columnar batches: exact packed arrays, per-key log order, bounded size."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.sdk.batches import ColumnBuilder, chunk_records
from tests.sdk.fakes import unpack


def decoded(batches: list[dict]) -> dict[str, list[tuple[int, float, float]]]:
    """key -> (step, value, time) over all batches, in order, decoded with struct."""
    out: dict[str, list] = {}
    for batch in batches:
        for series in batch["metrics"]:
            points = zip(unpack("q", series["steps_i64"]), unpack("d", series["values_f64"]), unpack("d", series["times_f64"]))
            out.setdefault(series["key"], []).extend(points)
    return out


def test_columns_are_base64_of_little_endian_int64_and_float64():
    (batch,) = chunk_records([(7, 1700000000.5, {"loss": 0.25})])
    (series,) = batch["metrics"]
    import base64

    assert base64.b64decode(series["steps_i64"]) == struct.pack("<q", 7)
    assert base64.b64decode(series["values_f64"]) == struct.pack("<d", 0.25)
    assert base64.b64decode(series["times_f64"]) == struct.pack("<d", 1700000000.5)
    assert set(series) == {"key", "steps_i64", "values_f64", "times_f64"}
    assert len(batch["batch_id"]) == 32


def test_each_batch_gets_a_fresh_batch_id():
    batches = chunk_records([(i, 0.0, {"a": 1.0, "b": 2.0}) for i in range(100)], max_points=20)
    ids = [b["batch_id"] for b in batches]
    assert len(ids) == 10 and len(set(ids)) == 10


def test_no_batch_exceeds_the_point_limit_whatever_the_record_widths():
    widths = [1, 3, 7, 2, 5]
    records = [(i, 0.0, {f"k{j}": float(i) for j in range(widths[i % 5])}) for i in range(2000)]
    batches = chunk_records(records, max_points=50)
    sizes = [sum(len(unpack("q", s["steps_i64"])) for s in b["metrics"]) for b in batches]
    assert max(sizes) <= 50
    assert sum(sizes) == sum(widths[i % 5] for i in range(2000))


def test_numbers_of_every_kind_convert_and_none_becomes_nan():
    torch = pytest.importorskip("torch")
    data = {"f": 1.5, "i": 3, "b": True, "np32": np.float32(0.5), "np64": np.int64(9), "t": torch.tensor(2.5),
            "none": None}
    got = decoded(chunk_records([(0, 0.0, data)] * 1 + [(1, 0.0, data)]))
    assert {k: v[0][1] for k, v in got.items() if k != "none"} == {"f": 1.5, "i": 3.0, "b": 1.0, "np32": 0.5,
                                                                    "np64": 9.0, "t": 2.5}
    assert math.isnan(got["none"][0][1]) and got["none"][1][0] == 1


def test_values_that_are_not_numbers_are_dropped_and_reported_by_key():
    warnings: list[tuple[str, str]] = []
    builder = ColumnBuilder(warn=lambda key, message: warnings.append((key, message)))
    records = [(i, 0.0, {"loss": float(i), "name": "abc", "vec": [1, 2]}) for i in range(40)]
    builder.extend([r[0] for r in records], [r[1] for r in records], [r[2] for r in records])
    builder.seal()
    (batch, points, last_step), = builder.take_ready()
    assert set(decoded([batch])) == {"loss"} and points == 40 and last_step == 39
    assert {k for k, _ in warnings} == {"value:name", "value:vec"}


def test_bad_steps_and_keys_are_dropped_not_sent():
    records = [(-1, 0.0, {"a": 1.0}), ("x", 0.0, {"a": 1.0}), (2**62, 0.0, {"a": 1.0}), (5, 0.0, {"a": 2.0}),
               (6, 0.0, {"": 1.0, "b\n": 1.0, "ok": 3.0, 7: 4.0}), (np.int64(8), 0.0, {"a": 3.0})]
    got = decoded(chunk_records(records))
    assert got == {"a": [(5, 2.0, 0.0), (8, 3.0, 0.0)], "ok": [(6, 3.0, 0.0)], "7": [(6, 4.0, 0.0)]}


def test_a_key_logged_in_dicts_of_different_shapes_keeps_log_order():
    # train loss every step, and every 3rd step the same key again with an extra one
    records = []
    for i in range(60):
        records.append((i, float(i), {"loss": float(i)} if i % 3 else {"lr": 0.1, "loss": float(i)}))
    got = decoded(chunk_records(records))
    assert [p[0] for p in got["loss"]] == list(range(60))
    assert [p[0] for p in got["lr"]] == list(range(0, 60, 3))


records_strategy = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=50),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d"]),
                        st.one_of(st.floats(allow_nan=False), st.integers(-10**6, 10**6), st.booleans()),
                        min_size=1, max_size=4),
    ),
    max_size=300,
)


@settings(max_examples=150, deadline=None)
@given(records=records_strategy, max_points=st.integers(min_value=1, max_value=40))
def test_batches_hold_every_point_once_per_key_in_log_order(records, max_points):
    stamped = [(step, float(i), data) for i, (step, data) in enumerate(records)]
    expected: dict[str, list] = {}
    for step, when, data in stamped:
        for key, value in data.items():
            expected.setdefault(key, []).append((step, float(value), when))
    batches = chunk_records(stamped, max_points=max_points)
    assert decoded(batches) == expected
    widest = max((len(data) for _, data in records), default=0)  # one call's values are never split
    for batch in batches:
        assert sum(len(unpack("q", s["steps_i64"])) for s in batch["metrics"]) <= max(max_points, widest)
