"""`corral plan` against a live server: when a job would start, why, and what would start it sooner."""

from __future__ import annotations

import getpass
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
    assert result.output.startswith("It would start now on ") and "(GPUs 0,1)" in result.output
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
    assert lines[0].startswith("It would start at ") and "(in 1:59:" in lines[0]
    assert lines[1].startswith(f"Why: its GPUs are reserved for job {waiting} ") and "1 more job holds" in lines[1]
    assert lines[2] == "Waits for: GPUs."
    assert lines[3] == "Ahead of it in the queue: 1 pending job."
    assert lines[4] == "Held by:" and lines[5].split()[:3] == ["JOB", "USER", "KIND"]
    assert [(line.split()[0], line.split()[2]) for line in lines[6:8]] == [(running, "running"), (waiting, "reserved")]
    assert "Sooner:" in lines and any(line.strip().startswith("--time=59") and "starts now" in line for line in lines)

    as_json = json.loads(run("plan", "-G", "2", "-t", "2h", "--json", "--", "true").output)
    assert {b["job_id"] for b in as_json["blockers"]} == {int(running), int(waiting)}
    assert as_json["alternatives"][0]["option"] == "--time=59" and as_json["alternatives"][0]["start_in_s"] == 0


def test_a_job_no_node_could_run_is_said_never_to_start_and_bad_input_fails_as_submit(run):
    result = run("plan", "-G", "9", "--", "true")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("It would not start as things stand: gpus: requested 9 GPUs")
    assert "--gpus=4  starts now" in result.output
    bad = run("plan", "--time", "soon", "--", "true")
    assert bad.exit_code == 1 and bad.output.startswith("corral: error: time:")


def test_where_cpus_decide_the_start_it_names_them_and_the_job_holding_them_and_gives_no_id(server_factory, short_tmp,
                                                                                          monkeypatch):
    """Its GPUs are free at +60 min, but the job holding the CPUs it needs keeps them until +65: that is the one."""
    server = server_factory(extra=["--cpus", "2"])
    monkeypatch.chdir(short_tmp)

    def corral(*args: str):
        return CliRunner().invoke(cli, ["--home", server.home, *args], catch_exceptions=False)

    client = server.client()
    gpus = corral("submit", "--parsable", "-G", "4", "-c", "1", "-t", "60", "--", "sleep", "300").output.strip()
    cpus = corral("submit", "--parsable", "-c", "1", "-t", "65", "--", "sleep", "300").output.strip()
    wait_for(lambda: {client.get(gpus)["state"], client.get(cpus)["state"]} == {"RUNNING"})
    result = corral("plan", "-G", "1", "-c", "2", "-t", "10", "--", "true")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("It would start at ") and "(in 1:04:" in lines[0] and "Job " not in lines[0]
    assert lines[1] == (f"Why: the CPUs it needs are held by running job {cpus} ({getpass.getuser()}) until then; "
                        "1 more job holds them before.")
    assert lines[2] == "Waits for: CPUs."
    header = lines[lines.index("Held by:") + 1].split()
    assert header[:6] == ["JOB", "USER", "KIND", "NODE", "GPUS", "CPUS"]
    rows = [line.split() for line in lines[lines.index("Held by:") + 2:lines.index("Held by:") + 4]]
    assert [(row[0], row[5]) for row in rows] == [(gpus, "1"), (cpus, "1")]  # the last to give them back, last
    answer = json.loads(corral("plan", "-G", "1", "-c", "2", "-t", "10", "--json", "--", "true").output)
    assert answer["waits_for"] == ["cpus"] and answer["blockers"][-1]["job_id"] == int(cpus)
    assert answer["blockers"][-1]["end"] == answer["start"]
    for job in (gpus, cpus):
        client.cancel(job)
