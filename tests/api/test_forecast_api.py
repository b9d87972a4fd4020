"""POST /api/v1/forecast against a live server: a submit's body, answered with when it would start; nothing submitted."""

from __future__ import annotations

import pytest

from tests.api.test_jobs_api import call
from tests.helpers import wait_for


@pytest.fixture
def busy(server_factory, short_tmp):
    """A server with 4 GPUs, all held for 10 minutes by a running job."""
    server = server_factory()
    status, job, _ = call(server, "POST", "/api/v1/jobs", {"command": ["sleep", "300"], "gpus": 4, "time": "10",
                                                          "workdir": short_tmp})
    assert status == 201, job
    wait_for(lambda: call(server, "GET", f"/api/v1/jobs/{job['id']}")[1]["state"] == "RUNNING")
    return server, job


def test_an_idle_machine_starts_it_now_and_nothing_is_submitted(server, short_tmp):
    """On SQLite and on PostgreSQL: the id it says the job would get is the one the submit then gets."""
    status, answer, _ = call(server, "POST", "/api/v1/forecast", {"command": ["true"], "gpus": 2, "time": "30",
                                                                  "workdir": short_tmp})
    assert status == 200, answer
    assert answer["start"] == answer["now"] and answer["start_in_s"] == 0 and answer["code"] == "None"
    assert answer["gpus"] == [0, 1] and answer["node"] and answer["partition"] == "default"
    assert answer["job_id"] == 1 and answer["blockers"] == [] and answer["time_limit_s"] == 1800
    assert call(server, "GET", "/api/v1/jobs")[1]["jobs"] == []  # nothing submitted
    status, job, _ = call(server, "POST", "/api/v1/jobs", {"command": ["true"], "workdir": short_tmp})
    assert job["id"] == answer["job_id"]  # the id it said the job would get


def test_behind_a_running_job_it_starts_at_that_jobs_time_limit_and_names_it(busy, short_tmp):
    server, running = busy
    status, answer, _ = call(server, "POST", "/api/v1/forecast", {"command": ["true"], "gpus": 1, "time": "5",
                                                                  "workdir": short_tmp})
    assert status == 200, answer
    assert 500 < answer["start_in_s"] <= 600 and answer["code"] == "Resources"
    [blocker] = answer["blockers"]
    assert (blocker["job_id"], blocker["kind"]) == (running["id"], "running") and blocker["end"] == answer["start"]
    assert answer["job_id"] == running["id"] + 1


def test_unsatisfiable_is_answered_with_the_most_gpus_that_run(server_factory, short_tmp):
    server = server_factory()
    status, answer, _ = call(server, "POST", "/api/v1/forecast", {"command": ["true"], "gpus": 9, "workdir": short_tmp})
    assert status == 200, answer
    assert answer["start"] is None and answer["code"] == "Unsatisfiable" and "largest node has 4" in answer["reason"]
    assert [(a["change"], a["gpus"], a["option"], a["start_in_s"]) for a in answer["alternatives"]] == [
        ("gpus", 4, "--gpus=4", 0)]


@pytest.mark.parametrize("body, field", [
    ({"command": ["true"], "gpus": -1}, "gpus"),
    ({"command": ["true"], "bogus": 1}, "bogus"),
    ({"command": ["true"], "time": "soon"}, "time"),
    ({}, "command"),
])
def test_bad_input_is_refused_as_a_submit_refuses_it(server_factory, short_tmp, body, field):
    server = server_factory()
    body = {**body, "workdir": short_tmp} if body else body
    status, answer, _ = call(server, "POST", "/api/v1/forecast", body)
    submitted = call(server, "POST", "/api/v1/jobs", body)
    assert status == submitted[0] == 422
    assert answer["error"]["field"] == field and answer == submitted[1]


def test_the_forecast_is_in_the_openapi_document(server_factory):
    server = server_factory()
    document = call(server, "GET", "/openapi.json")[1]
    operation = document["paths"]["/api/v1/forecast"]["post"]
    assert "requestBody" in operation and "ForecastOut" in str(operation["responses"]["200"])
