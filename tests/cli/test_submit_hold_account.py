"""`corral submit -H` and `-A`: sbatch's spellings, on corral's own submit."""

from __future__ import annotations

import json

from tests.cli.test_cli import run  # noqa: F401 - the fixture: a server and the CLI against it
from tests.helpers import wait_for


def test_submit_held_waits_until_released(run):  # noqa: F811
    job = json.loads(run("submit", "--json", "-H", "--", "true").output)
    assert job["held"] is True
    shown = json.loads(run("show", str(job["id"]), "--json").output)
    assert (shown["state"], shown["reason"]) == ("PENDING", "JobHeldUser")
    assert run("release", str(job["id"])).exit_code == 0
    assert wait_for(lambda: json.loads(run("show", str(job["id"]), "--json").output)["state"] == "COMPLETED", timeout=30)


def test_submit_account_is_sent_and_named_when_unknown(run):  # noqa: F811
    result = run("submit", "-A", "nosuch", "--", "true")
    assert result.exit_code == 1
    assert "account" in result.output and "nosuch" in result.output
    result = run("submit", "--account=nosuch", "--", "true")
    assert result.exit_code == 1 and "nosuch" in result.output
