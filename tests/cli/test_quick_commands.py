"""`corral submit/queue/show/cancel/hold/release/logs` and `--version` start within twice the interpreter's own
start: the `corral` program runs them without importing anything heavy. Checked on the import graph (what
`python -X importtime` lists), not with a clock."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.cli.test_cli import run  # noqa: F401 - the fixture: a server and the CLI against it
from tests.helpers import wait_for

HEAVY = ("click", "typing", "dataclasses", "http.client", "ssl", "re", "enum", "pydantic", "urllib", "datetime",
         "json", "corral.client", "corral.cli.main")


def _src() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")


def _imported(home: str, *argv: str, stdin: str | None = None) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules `corral --home HOME ARGV` imports (run as the console script runs it), and its result."""
    code = "import sys; from corral.cli.entry import main; sys.argv[0] = 'corral'; main()"
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code, "--home", home, *argv], input=stdin or "",
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": _src(), "CORRAL_URL": ""}, timeout=60)
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    return imported, out


def _heavy(imported: set[str]) -> set[str]:
    return {name for name in imported if name in HEAVY or name.startswith(tuple(h + "." for h in HEAVY))}


def test_the_quick_commands_import_nothing_heavy(run):  # noqa: F811
    home = run.server.home
    job_id = run("submit", "--parsable", "--hold", "--", "true").output.strip()
    other = run("submit", "--parsable", "--hold", "--", "true").output.strip()
    running = run("submit", "--parsable", "-t", "5", "--", "sleep", "120").output.strip()  # it has an expected end
    wait_for(lambda: json.loads(run("show", running, "--json").output)["expected_end"])
    calls = [("submit", "--parsable", "--hold", "--", "true"), ("submit", "--hold", "--wrap", "true"),
             ("submit", "--json", "--hold", "--", "true"), ("queue",), ("queue", "--start"), ("queue", "-t", "pending"),
             ("show", running), ("queue", "-l"), ("queue", "--start", "--long"),
             ("queue", "--json"), ("show", job_id), ("show", "--json", job_id), ("logs", job_id),
             ("logs", "--tail", "5", job_id), ("hold", other), ("release", other), ("cancel", job_id, other, running),
             ("cancel", "4242"), ("show", "4242")]
    for argv in calls:
        imported, out = _imported(home, *argv)
        assert out.returncode in (0, 1), (argv, out.stderr[-2000:])
        assert "corral.cli.jobs" in imported or argv == ("--version",), argv
        assert not _heavy(imported), (argv, sorted(_heavy(imported)))


def test_a_script_on_stdin_and_version_import_nothing_heavy(run):  # noqa: F811
    imported, out = _imported(run.server.home, "submit", "--parsable", "--hold", stdin="#!/bin/sh\ntrue\n")
    assert out.returncode == 0 and out.stdout.strip().isdigit(), out.stderr[-2000:]
    assert not _heavy(imported), sorted(_heavy(imported))
    imported, out = _imported(run.server.home, "--version")
    assert out.returncode == 0 and out.stdout.startswith("corral, version ")
    assert not _heavy(imported), sorted(_heavy(imported))


@pytest.mark.parametrize("argv", [("nodes",), ("submit", "--help"), ("--help",)])
def test_other_command_lines_go_to_click(run, argv):  # noqa: F811
    imported, out = _imported(run.server.home, *argv)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "click" in imported and "corral.cli.main" in imported


def test_without_a_server_the_quick_commands_say_so_in_one_line(short_tmp):
    for argv in (("queue",), ("show", "1"), ("cancel", "1"), ("logs", "1"), ("submit", "--", "true")):
        imported, out = _imported(short_tmp, *argv)
        assert out.returncode == 1, (argv, out.stderr)
        said = [line for line in out.stderr.splitlines() if not line.startswith("import time:")]
        assert len(said) == 1 and "no corral server is running" in said[0], (argv, said)
        assert not _heavy(imported), (argv, sorted(_heavy(imported)))
