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
