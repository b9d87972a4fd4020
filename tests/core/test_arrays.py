"""sbatch's --array forms."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.core.arrays import format_ranges, parse_array, parse_ranges
from corral.errors import InvalidRequest


@pytest.mark.parametrize("text, ids, throttle", [
    ("0-3", (0, 1, 2, 3), None),
    ("1,3,5-7", (1, 3, 5, 6, 7), None),
    ("0-20:4", (0, 4, 8, 12, 16, 20), None),
    ("0-9%4", tuple(range(10)), 4),
    ("7", (7,), None),
    ("3,1,3", (1, 3), None),
])
def test_array_forms(text, ids, throttle):
    spec = parse_array(text)
    assert (spec.task_ids, spec.throttle) == (ids, throttle)


@pytest.mark.parametrize("text", ["", "a-b", "5-1", "0-3:0", "0-3%0", "0-3%x", "0-99999999", "0-200000", "1,,2"])
def test_bad_arrays_are_refused_naming_the_field(text):
    with pytest.raises(InvalidRequest) as err:
        parse_array(text)
    assert err.value.field == "array"


def test_ten_thousand_tasks_are_one_spec():
    assert len(parse_array("0-9999%10").task_ids) == 10_000


@given(st.sets(st.integers(0, 500), max_size=60))
def test_ranges_round_trip(ids):
    assert parse_ranges(format_ranges(sorted(ids))) == sorted(ids)


def test_an_array_cancelled_while_tasks_remained_is_cancelled_even_if_its_started_tasks_completed():
    from corral.core.arrays import array_state
    from corral.core.states import JobState

    done, failed, cancelled = JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED
    assert array_state([done, done], cancelled=True) is cancelled
    assert array_state([], cancelled=True) is cancelled
    assert array_state([done, done], cancelled=False) is done
    assert array_state([done, failed, cancelled], cancelled=False) is failed
    assert array_state([done, cancelled], cancelled=False) is cancelled
    assert array_state([], cancelled=False) is cancelled
