"""`corral token create | list | revoke` against a live server, in-process."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from corral.cli.main import cli


@pytest.fixture
def home(server_factory) -> str:
    return server_factory(gpus=0).home


def corral(home: str, *args: str, code: int = 0, token: str | None = None):
    result = CliRunner().invoke(cli, ["--home", home, *args], env={"CORRAL_TOKEN": token})
    assert result.exit_code == code, result.output
    return result


def test_create_prints_the_secret_alone_on_stdout_and_how_to_use_it_once(home):
    made = corral(home, "token", "create", "--name", "laptop", "--user", "alice", "--expires", "12h")
    secret = made.stdout.strip()
    assert secret.startswith("corral_") and "\n" not in secret  # TOKEN=$(corral token create) gets just it
    assert "will not be shown again" in made.stderr
    assert f"export CORRAL_TOKEN={secret}" in made.stderr and "Authorization: Bearer" in made.stderr
    assert "submit scope for alice" in made.stderr

    # the secret works, as alice; the listing never shows it again
    listed = corral(home, "token", "list", token=secret).stdout
    header, row = listed.splitlines()
    assert header.split() == ["ID", "USER", "NAME", "SCOPE", "CREATED", "EXPIRES", "STATE"]
    assert row.split()[1:4] == ["alice", "laptop", "submit"] and row.split()[-1] == "active"
    assert secret not in listed and secret not in corral(home, "token", "list", "--all").stdout
    assert "needs admin" in corral(home, "token", "list", "--all", code=1, token=secret).output


def test_json_create_revoke_and_list_show_each_tokens_state(home):
    made = json.loads(corral(home, "token", "create", "--scope", "read", "--json").stdout)
    assert made["scope"] == "read" and made["user"] == "root" and made["token"].startswith("corral_")
    assert f"token {made['id']} (token, root) revoked" in corral(home, "token", "revoke", str(made["id"])).stdout
    [listed] = json.loads(corral(home, "token", "list", "--json").stdout)
    assert listed["state"] == "revoked" and "token" not in listed
    assert "revoked" in corral(home, "token", "list").stdout.splitlines()[1]
    assert "unknown, revoked or expired" in corral(home, "token", "list", code=1, token=made["token"]).output


def test_bad_input_is_one_line_naming_the_fix(home):
    assert "every token expires" in corral(home, "token", "create", "--expires", "never", code=1).output
    assert "at most 365d" in corral(home, "token", "create", "--expires", "400d", code=1).output
    assert "no API token 999" in corral(home, "token", "revoke", "999", code=1).output
    assert "no API tokens" in corral(home, "token", "list").stdout
