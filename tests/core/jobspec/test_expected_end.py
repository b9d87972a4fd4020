"""When a job should end: start + time limit, or its tracked run's ETA where sooner (issue 18, point 2)."""

from __future__ import annotations

from corral.core.jobspec.expected_end import ExpectedEnd, expected_end
from corral.core.units.iso_times import epoch_seconds
from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState
from tests.helpers import make_spec

START = 1_800_000_000.0
HOUR = 3600


def job(state: JobState = JobState.RUNNING, time: str | None = "1:00:00", **fields) -> Job:
    spec = make_spec(**({"time": time} if time else {}))
    started = {"start_time": START} if state is not JobState.PENDING else {}
    return Job(id=7, spec=spec, state=state, submit_time=START - 60, **started, **fields)


def test_a_running_job_ends_by_its_start_plus_its_limit():
    assert expected_end(job()) == ExpectedEnd(START + HOUR, "time_limit")


def test_a_tracked_runs_eta_counts_where_it_comes_sooner_and_never_past_the_limit():
    assert expected_end(job(), eta_end=START + 600) == ExpectedEnd(START + 600, "eta")
    assert expected_end(job(), eta_end=START + 2 * HOUR) == ExpectedEnd(START + HOUR, "time_limit")


def test_without_a_limit_only_an_eta_says_when():
    assert expected_end(job(time=None)) is None
    assert expected_end(job(time=None), eta_end=START + 600) == ExpectedEnd(START + 600, "eta")


def test_a_pending_job_ends_by_its_estimated_start_plus_its_limit_and_an_eta_does_not_count():
    waiting = job(JobState.PENDING, estimated_start=START + 300)
    assert expected_end(waiting, eta_end=START + 400) == ExpectedEnd(START + 300 + HOUR, "time_limit")
    assert expected_end(job(JobState.PENDING)) is None  # no estimated start yet


def test_an_ended_job_expects_no_end():
    for state in (JobState.COMPLETED, JobState.CANCELLED, JobState.TIMEOUT):
        assert expected_end(job(state, end_time=START + 10), eta_end=START + 600) is None


def test_the_job_json_carries_the_time_and_its_grounds():
    fields = job().to_dict(eta_end=START + 600.5)
    assert epoch_seconds(fields["expected_end"]) == START + 600.5 and fields["expected_end_source"] == "eta"
    assert fields["expected_end"].endswith("Z")  # ISO 8601 UTC, as the job's other times
    plain = job().to_dict(detail=False)
    assert epoch_seconds(plain["expected_end"]) == START + HOUR and plain["expected_end_source"] == "time_limit"
    assert {k: job(time=None).to_dict()[k] for k in ("expected_end", "expected_end_source")} == {
        "expected_end": None, "expected_end_source": None}
