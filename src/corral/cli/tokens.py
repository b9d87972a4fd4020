"""`corral token create | list | revoke`: API tokens for callers on other machines.

Registered on the main group by `corral.cli.main`; each command makes one call to the client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from corral.cli.connect import client_for
from corral.cli.terminal import escaped, json_text, print_json


@click.group()
def token() -> None:
    """API tokens, for the SDK, the dashboard or an agent on another machine."""


@token.command("create")
@click.option("--name", help="What the token is for, e.g. laptop-sdk (letters, digits, '-', '_', '.') [default: token].")
@click.option("--scope", type=click.Choice(["read", "submit", "admin"]), default="submit", show_default=True,
              help="read: see the queue and runs; submit: also submit and manage your jobs; admin: everything.")
@click.option("--expires", default="30d", show_default=True, help="Lifetime: 90m, 12h, 30d, 8w; at most 365d.")
@click.option("--user", help="Make it for another user (needs admin) [default: you].")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def token_create(ctx: click.Context, name: str | None, scope: str, expires: str, user: str | None, as_json: bool) -> None:
    """Make a token. Its secret is printed now and never again: the server keeps only its hash."""
    made = client_for(ctx).create_token(scope=scope, expires=expires, name=name, user=user)
    if as_json:
        print_json(made)
        return
    # The secret alone on stdout, so `TOKEN=$(corral token create)` captures just it.
    click.echo(made["token"])
    click.echo(f"token {made['id']} ({made['name']}): {made['scope']} scope for {made['user']}, "
               f"expires {_local(made['expires'])}", err=True)
    click.echo("This secret will not be shown again: store it now (revoke it with "
               f"`corral token revoke {made['id']}`).", err=True)
    click.echo(f"Use it:  export CORRAL_TOKEN={made['token']}", err=True)
    click.echo("    or send the header  Authorization: Bearer $CORRAL_TOKEN", err=True)


@token.command("list")
@click.option("-a", "--all", "show_all", is_flag=True, help="Every user's tokens (needs admin).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def token_list(ctx: click.Context, show_all: bool, as_json: bool) -> None:
    """Your tokens, newest first, with whether each is active, expired or revoked (never their secrets)."""
    found = client_for(ctx).tokens(all=show_all)
    click.echo(json_text(found) if as_json else tokens_table(found))


@token.command("revoke")
@click.argument("token_id", type=click.IntRange(1, 2**31 - 1))
@click.pass_context
def token_revoke(ctx: click.Context, token_id: int) -> None:
    """Revoke a token: it stops working at once."""
    gone = client_for(ctx).revoke_token(token_id)
    if isinstance(gone, Mapping):
        click.echo(f"token {token_id} ({gone['name']}, {gone['user']}) revoked")
    else:
        click.echo(f"token {token_id} revoked")


@escaped
def tokens_table(tokens: Sequence[Mapping[str, Any]]) -> str:
    from corral.cli.format import table

    if not tokens:
        return "no API tokens (make one: corral token create --name laptop)"
    rows = [[str(t["id"]), t["user"], t["name"], t["scope"], _local(t["created"]), _local(t["expires"]),
             str(t.get("state", "-"))] for t in tokens]
    return table(["ID", "USER", "NAME", "SCOPE", "CREATED", "EXPIRES", "STATE"], rows)


def _local(iso: str | None) -> str:
    from corral.cli.format import local_time

    return local_time(iso)
