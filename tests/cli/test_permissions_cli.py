"""The CLI under a shared server's rules: another user's job cannot be touched, and the
message says who may (the same check as the API's, printed as the CLI prints errors)."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.client import Client

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
    assert "CANCELLED" in corral(server, tokens[bob], "cancel", job_id).output
