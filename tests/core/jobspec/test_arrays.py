"""sbatch's --array forms."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.core.jobspec.arrays import (
    MAX_REF,
    abbreviate_ranges,
    array_state,
    array_summary,
    format_ranges,
    parse_array,
    parse_ranges,
)
from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState
from corral.errors import InvalidRequest
from tests.helpers import make_spec


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


def test_an_arrays_ref_is_at_most_64_characters_and_counts_what_it_leaves_out():
    text = ",".join(str(i) for i in range(0, 200_000, 2)) + "%4"
    job = Job(id=12, spec=make_spec(array=text), state=JobState.PENDING, submit_time=0.0,
              array_pending=list(parse_array(text).task_ids))
    assert len(job.ref) <= MAX_REF and job.ref.startswith("12_[0,2,4,") and job.ref.endswith("%4]")
    assert len(job.to_dict(detail=False)["array"]) <= MAX_REF and job.to_dict()["array"] == text
    for count in range(1, 200):
        ids = list(range(0, 3 * count, 3))
        for limit in (10, 30, 58):
            short = abbreviate_ranges(ids, limit)
            assert len(short) <= limit
            if len(format_ranges(ids)) <= limit:
                assert short == format_ranges(ids)  # nothing to leave out
            else:
                head, _, left = short.rpartition("...+")
                assert len(parse_ranges(head.rstrip(","))) + int(left) == count


def test_an_array_cancelled_while_tasks_remained_is_cancelled_even_if_its_started_tasks_completed():
    done, failed, cancelled = JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED
    assert array_state([done, done], cancelled=True) is cancelled
    assert array_state([], cancelled=True) is cancelled
    assert array_state([done, done], cancelled=False) is done
    assert array_state([done, failed, cancelled], cancelled=False) is failed
    assert array_state([done, cancelled], cancelled=False) is cancelled
    assert array_state([], cancelled=False) is cancelled


def test_an_arrays_summary_counts_its_tasks_by_state_and_names_those_still_waiting():
    states = [JobState.COMPLETED, JobState.FAILED, JobState.COMPLETED, JobState.RUNNING, JobState.PENDING]
    assert array_summary(states, [7, 8, 9, 12]) == {
        "tasks": 9, "ended": 3, "waiting": "7-9,12",
        "states": {"COMPLETED": 2, "FAILED": 1, "RUNNING": 1, "PENDING": 5},
    }
    assert array_summary([], []) == {"tasks": 0, "ended": 0, "states": {}, "waiting": ""}
