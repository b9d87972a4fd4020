"""`corral resubmit` and `corral sweep` against a live server: through click (CliRunner) and as the real program."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from tests.api.test_relaunch_api import owners_hostname_job


@pytest.fixture
def run(server_factory):
    server = server_factory()

    def invoke(*args: str):
        return CliRunner().invoke(cli, ["--home", server.home, *args], catch_exceptions=False)

    invoke.server = server
    return invoke


def test_resubmit_with_sets_and_submit_options_makes_a_linked_rerun(run, short_tmp, monkeypatch):
    monkeypatch.chdir(short_tmp)
    first = run("submit", "--parsable", "-t", "10", "--", "sh", "-c", "echo lr=$LR")
    assert first.exit_code == 0, first.output
    job_id = first.output.strip()
    assert run("wait", job_id).exit_code == 0
    again = run("resubmit", job_id, "--set", "env.LR=3e-4", "--set", "time=5:00", "--label", "try=2", "--json")
    assert again.exit_code == 0, again.output
    job = json.loads(again.output)
    assert (job["parent"], job["time_limit_s"], job["labels"]) == (int(job_id), 300, {"try": "2"})
    assert run("wait", str(job["id"])).exit_code == 0
    assert run("logs", str(job["id"])).output.strip() == "lr=3e-4"
    shown = run("show", str(job["id"]), "--json")
    assert json.loads(shown.output)["parent"] == int(job_id)
    bad = run("resubmit", job_id, "--set", "gpus=lots")
    assert bad.exit_code == 1 and "gpus" in bad.output
    changed = run("resubmit", job_id, "--parsable", "--", "sh", "-c", "echo changed")
    assert changed.exit_code == 0, changed.output
    assert run("wait", changed.output.strip()).exit_code == 0
    assert run("logs", changed.output.strip()).output.strip() == "changed"


def test_sweep_runs_a_grid_and_sweep_show_lists_every_task(run, short_tmp, monkeypatch):
    monkeypatch.chdir(short_tmp)
    started = run("sweep", "--param", "lr=1e-4,3e-4", "--param", "bs=32,64", "--max-concurrent", "2", "--parsable",
                  "--", "sh", "-c", "echo {lr} $SWEEP_BS")
    assert started.exit_code == 0, started.output
    sweep_id = started.output.strip()
    assert run("wait", sweep_id).exit_code == 0
    assert run("logs", f"{sweep_id}_3").output.strip() == "3e-4 64"
    shown = run("sweep", "show", sweep_id, "--sort", "bs")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert "grid" in lines[0] and "at most 2 at once" in lines[0]
    rows = [line.split() for line in lines if line.startswith(f"{sweep_id}_")]
    assert [r[1:4] for r in rows] == [["1e-4", "32", "COMPLETED"], ["3e-4", "32", "COMPLETED"],
                                      ["1e-4", "64", "COMPLETED"], ["3e-4", "64", "COMPLETED"]]
    bad = run("sweep", "--param", "lr=1,2", "--", "echo", "{bs}")
    assert bad.exit_code == 1 and "{bs}" in bad.output


def test_the_real_program_runs_sweep_and_resubmit(server_factory, short_tmp):
    server = server_factory()
    env = {**os.environ, "CORRAL_HOME": server.home}
    corral = [sys.executable, "-m", "corral.cli"]
    out = subprocess.run([*corral, "sweep", "--param", "n=int:1:9", "--samples", "3", "--seed", "1", "--json", "--",
                          "echo", "{n}"], cwd=short_tmp, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["method"] == "random" and answer["seed"] == 1 and len(answer["tasks"]) == 3
    again = subprocess.run([*corral, "resubmit", str(answer["id"]), "--parsable"], cwd=short_tmp, env=env,
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    shown = subprocess.run([*corral, "sweep", "show", again.stdout.strip(), "--json"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr  # a sweep run again whole is a sweep again
    assert [t["values"] for t in json.loads(shown.stdout)["tasks"]] == answer["tasks"]


def _corral_at_a_terminal(argv: list[str], env: dict[str, str], answer: bytes) -> subprocess.CompletedProcess[str]:
    """The real program with a terminal for stdin, `answer` typed into it."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(argv, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        os.close(slave)
        os.write(master, answer)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(master)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_an_admins_resubmit_of_anothers_job_says_whose_it_is_and_runs_it_as_them(server_factory, os_users, shared_dir):
    alice = os_users[0]
    server = server_factory(gpus=1, home=os.path.join(shared_dir, "home"))
    first = owners_hostname_job(server, shared_dir, alice)
    env = {**os.environ, "CORRAL_HOME": server.home}  # root, on the socket: an admin
    corral = [sys.executable, "-m", "corral.cli"]
    ref = str(first.job_id)

    refused = subprocess.run([*corral, "resubmit", ref], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 1 and refused.stdout == ""
    assert f"job {ref} is {alice}'s: it runs again as {alice}" in refused.stderr and "--yes" in refused.stderr
    declined = _corral_at_a_terminal([*corral, "resubmit", ref], env, b"n\n")
    assert declined.returncode == 1 and f"Run it again as {alice}? [y/N]" in declined.stderr, declined.stderr
    assert "not run again" in declined.stderr

    typed = _corral_at_a_terminal([*corral, "resubmit", ref], env, b"y\n")
    assert typed.returncode == 0, typed.stderr
    assert typed.stdout.strip() == f"Submitted batch job {first.job_id + 1} (a rerun of job {ref}, as {alice})"
    flagged = subprocess.run([*corral, "resubmit", ref, "--yes", "--parsable"], env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=60)
    assert flagged.returncode == 0, flagged.stderr
    assert flagged.stdout.strip() == str(first.job_id + 2) and f"running it again as {alice}" in flagged.stderr
    with server.client() as client:
        for job_id in (first.job_id + 1, first.job_id + 2):
            job = client.wait(job_id, timeout=60)
            assert (job["state"], job["user"], job["parent"]) == ("COMPLETED", alice, first.job_id)
    assert first.ran_as() == [first.uid] * 3  # the owner's fake hostname, as the owner: never uid 0
    shown = subprocess.run([*corral, "show", str(first.job_id + 1)], env=env, capture_output=True, text=True,
                           timeout=60)
    assert f"run again (of job {ref}) by root" in shown.stdout, shown.stdout
