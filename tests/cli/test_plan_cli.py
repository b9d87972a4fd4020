"""`corral plan` against a live server: when a job would start, why, and what would start it sooner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from tests.helpers import wait_for


@pytest.fixture
def run(server_factory, short_tmp, monkeypatch):
    server = server_factory()
    monkeypatch.chdir(short_tmp)

    def invoke(*args: str):
        return CliRunner().invoke(cli, ["--home", server.home, *args], catch_exceptions=False)

    invoke.server = server
    return invoke


def test_on_an_idle_machine_it_would_start_now_and_nothing_is_submitted(run):
    result = run("plan", "-G", "2", "-t", "30", "--", "python", "train.py")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Job 1 would start now on ") and "(GPUs 0,1)" in result.output
    assert "time limit 30:00" in result.output
    assert run.server.client().queue() == []


def test_behind_a_running_job_it_names_the_job_and_offers_a_shorter_time(run):
    client = run.server.client()
    running = run("submit", "--parsable", "-G", "2", "-t", "60", "--", "sleep", "300").output.strip()
    waiting = run("submit", "--parsable", "-G", "4", "-t", "60", "--", "true").output.strip()  # reserved at +1h
    wait_for(lambda: client.get(running)["state"] == "RUNNING")
    result = run("plan", "-G", "2", "-t", "2h", "--wrap", "python train.py")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"Job {int(waiting) + 1} would start at ") and "(in 1:59:" in lines[0]
    assert lines[1].startswith(f"Why: its GPUs are reserved for job {waiting} ") and "1 more job holds" in lines[1]
    assert lines[2] == "Ahead of it in the queue: 1 pending job."
    assert lines[3] == "Held by:" and lines[4].split()[:3] == ["JOB", "USER", "KIND"]
    assert [(line.split()[0], line.split()[2]) for line in lines[5:7]] == [(running, "running"), (waiting, "reserved")]
    assert "Sooner:" in lines and any(line.strip().startswith("--time=59") and "starts now" in line for line in lines)

    as_json = json.loads(run("plan", "-G", "2", "-t", "2h", "--json", "--", "true").output)
    assert {b["job_id"] for b in as_json["blockers"]} == {int(running), int(waiting)}
    assert as_json["alternatives"][0]["option"] == "--time=59" and as_json["alternatives"][0]["start_in_s"] == 0


def test_a_job_no_node_could_run_is_said_never_to_start_and_bad_input_fails_as_submit(run):
    result = run("plan", "-G", "9", "--", "true")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Job 1 would not start as things stand: gpus: requested 9 GPUs")
    assert "--gpus=4  starts now" in result.output
    bad = run("plan", "--time", "soon", "--", "true")
    assert bad.exit_code == 1 and bad.output.startswith("corral: error: time:")
