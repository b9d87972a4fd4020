"""The client a command talks through, made from the global --home / --url options."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from corral.client import Client


def client_for(ctx: click.Context, timeout: float | None = None) -> Client:
    """A client for the server of --home / --url; `timeout` (seconds) bounds each request, else the client's default."""
    from corral.client import Client

    if timeout is None:
        return Client(ctx.obj["url"], home=ctx.obj["home"])
    return Client(ctx.obj["url"], home=ctx.obj["home"], timeout=timeout)


def _given(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None and param.name is not None:
        ctx.ensure_object(dict)[param.name] = value  # the group's dict, shared down the commands: given here, it wins


_HOME = "The server's state directory (as the global --home) [default: ~/.corral]."
_URL = "Talk to the server at this URL instead of the home's (as the global --url)."


def take_server_options(command: click.Command, *, url: bool = True) -> None:
    """Let `command` (and, for a group, each of its commands) take --home and --url after its name, as `corral up
    --home DIR` does: `corral down --home DIR` stops the server that `corral up --home DIR` started. A command
    that declares one itself (`up`'s --home) keeps its own."""
    names = {name for param in command.params for name in getattr(param, "opts", ())}
    if "--home" not in names:
        command.params.append(click.Option(["--home"], expose_value=False, callback=_given, help=_HOME))
    if url and "--url" not in names:
        command.params.append(click.Option(["--url"], expose_value=False, callback=_given, help=_URL))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            take_server_options(sub, url=url)
