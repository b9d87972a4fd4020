"""The CLI under a shared server's rules: another user's job cannot be touched, and the
message says who may (the same check as the API's, printed as the CLI prints errors)."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.client import Client
from tests.helpers import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a shared server runs as root; CI runs as root")


def corral(server, token: str, *args: str, code: int = 0):
    result = CliRunner().invoke(cli, ["--url", server.url, *args], env={"CORRAL_TOKEN": token})
    assert result.exit_code == code, result.output
    return result


def test_a_user_cannot_cancel_hold_or_read_anothers_job_from_the_cli(server_factory, os_users, shared_dir):
    alice, bob = os_users
    server = server_factory(gpus=0, home=os.path.join(shared_dir, "home"))  # a home the users' jobs can reach
    with Client(home=server.home) as root:
        tokens = {user: root.create_token(user=user, scope="submit", expires="1h")["token"] for user in (alice, bob)}
    assert corral(server, tokens[alice], "whoami").output.startswith(f"{alice} (submit), known by an API token")
    submitted = corral(server, tokens[bob], "submit", "--parsable", "--chdir", "/tmp", "--", "sleep", "60").output
    job_id = submitted.strip().split(";")[0]
    for args in (("cancel", job_id), ("hold", job_id), ("logs", job_id), ("update", job_id, "--nice", "5")):
        refused = corral(server, tokens[alice], *args, code=1)
        assert f"only its owner ({bob}) or an admin" in refused.output and f"you are {alice}" in refused.output, args
    assert corral(server, tokens[alice], "show", job_id).exit_code == 0  # everybody sees the queue
    assert corral(server, tokens[bob], "cancel", job_id).output.startswith(f"job {job_id}: cancelled")


def test_an_admin_shares_a_channel_from_the_cli_and_only_a_firings_owner_acknowledges_it(server_factory, os_users,
                                                                                          shared_dir):
    """Issue 15: any user's rule could name an admin's channel, and anyone could acknowledge anyone's firing."""
    alice, bob = os_users
    server = server_factory(gpus=0, home=os.path.join(shared_dir, "home"))
    with Client(home=server.home) as root:
        tokens = {user: root.create_token(user=user, scope="submit", expires="1h")["token"] for user in (alice, bob)}
        admin = root.create_token(scope="admin", expires="1h")["token"]
        root.add_channel("pager", "webhook", url="http://127.0.0.1:9/hook")
    create = ("alert", "create", "alices", "--condition", "state == FAILED", "--channel", "pager")
    refused = corral(server, tokens[alice], *create, code=1)
    assert f"'pager' is not shared with {alice}: an admin must share it" in refused.output
    assert "admin" in corral(server, tokens[alice], "alert", "channel", "share", "pager", "--all", code=1).output
    assert "exactly one of" in corral(server, admin, "alert", "channel", "share", "pager", code=2).output
    shared = corral(server, admin, "alert", "channel", "share", "pager", "--with", f"{bob}, {alice}").output
    assert f"alert channel pager: shared with {alice},{bob}" in shared
    assert "admins only" in corral(server, admin, "alert", "channel", "share", "pager", "--none").output
    assert "everyone" in corral(server, admin, "alert", "channel", "share", "pager", "--all").output
    assert "everyone" in corral(server, tokens[bob], "alert", "channel", "list").output
    assert "alert rule alices" in corral(server, tokens[alice], *create).output

    job = corral(server, tokens[alice], "submit", "--parsable", "--chdir", "/tmp", "--", "false").output.split(";")[0]
    with Client(home=server.home) as root:
        (firing,) = wait_for(lambda: root.alerts(job=int(job)), timeout=60, interval=0.2)
    assert f'"id": {firing["id"]}' in corral(server, tokens[alice], "alert", "list", "--json").output
    assert f'"id": {firing["id"]}' not in corral(server, tokens[bob], "alert", "list", "--json").output
    not_his = corral(server, tokens[bob], "alert", "ack", str(firing["id"]), code=1)
    assert f"only its owner ({alice}) or an admin" in not_his.output and f"you are {bob}" in not_his.output
    assert f"alert {firing['id']} acknowledged" in corral(server, tokens[alice], "alert", "ack", str(firing["id"])).output


def test_run_show_of_anothers_run_shows_the_run_and_says_once_why_its_artifacts_are_not(server_factory, os_users,
                                                                                          shared_dir, tmp_path):
    alice, bob = os_users
    server = server_factory(gpus=0, home=os.path.join(shared_dir, "home"))
    with Client(home=server.home) as root:
        tokens = {user: root.create_token(user=user, scope="submit", expires="1h")["token"] for user in (alice, bob)}
    with Client(server.url, token=tokens[alice]) as as_alice:
        run = as_alice.create_run(project="private-art", name="alices-run")
        as_alice.log_metrics(run["id"], {"batch_id": "b1", "metrics": [{"key": "loss", "steps": [0], "values": [1.0]}]})
        weights = tmp_path / "w.bin"
        weights.write_bytes(b"w" * 100)
        as_alice.upload_artifact(run["id"], str(weights), "model/w.bin", type="model")
    shown = corral(server, tokens[bob], "run", "show", str(run["id"])).output
    assert "alices-run" in shown and "loss" in shown and "model/w.bin" not in shown
    assert f"Artifacts: not shown: only its owner ({alice}) or an admin may list them; you are {bob}" in shown
    assert "listing the artifacts" not in shown and shown.count("only its owner") == 1
    hidden = json.loads(corral(server, tokens[bob], "run", "show", str(run["id"]), "--json").output)
    assert hidden["artifacts"] is None and hidden["artifacts_hidden"].startswith(f"only its owner ({alice})")
    mine = corral(server, tokens[alice], "run", "show", str(run["id"])).output
    assert "model/w.bin" in mine and "not shown" not in mine
