"""The client a command talks through, made from the global --home / --url options."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from corral.client import Client


def client_for(ctx: click.Context) -> Client:
    from corral.client import Client

    return Client(ctx.obj["url"], home=ctx.obj["home"])
