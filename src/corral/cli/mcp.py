"""`corral mcp`: serve corral's GPU-job tools to AI agents over the Model Context Protocol.

Registered on the main group by `corral.cli.main`. The MCP SDK is imported only when the command
runs, so `corral --help` stays fast.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from corral.cli.connect import client_for
from corral.errors import CorralError

if TYPE_CHECKING:
    from corral.client import Client

STARTUP_PROBE_S = 3.0
"""How long the start-up check waits for the corral server: an MCP client times out its
initialize request, and a server that accepts but never answers must not hold that up."""


@click.command()
@click.option("--http", "use_http", is_flag=True,
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --http: the address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8766, show_default=True,
              help="With --http: the port; 0 picks a free one.")
@click.option("--request-timeout", type=click.FloatRange(0.1, 3600), default=20.0, show_default=True,
              help="Seconds a tool waits for the corral server to answer before it reports an error.")
@click.pass_context
def mcp(ctx: click.Context, use_http: bool, host: str, port: int, request_timeout: float) -> None:
    """Serve corral's GPU-job tools to AI agents (MCP): over stdio, or streamable HTTP with --http.

    The tools act on the corral server of --home (or --url) as the user running this command.
    """
    try:
        from corral.mcp.server import build_server, is_loopback, serve_http, serve_stdio
    except ImportError as exc:
        raise click.ClickException(f"corral mcp needs the MCP SDK ({exc}): pip install 'mcp>=2.3,<3'") from None

    connect = functools.partial(client_for, ctx, timeout=request_timeout)
    server = build_server(connect, cwd=os.getcwd())
    probe = functools.partial(client_for, ctx, timeout=min(STARTUP_PROBE_S, request_timeout))
    click.echo(f"corral mcp: {_target(probe)}", err=True)
    if not use_http:
        serve_stdio(server)
        return

    def announce(url: str) -> None:
        # only once the address is bound: a server that failed to start has exposed nothing
        if not is_loopback(host):
            click.echo(f"corral mcp: warning: listening on {host} without authentication: anyone who can reach it "
                       "can submit and stop jobs as you", err=True)
        click.echo(f"corral mcp: serving MCP (streamable HTTP) at {url}", err=True)

    serve_http(server, host, port, announce)


def _target(connect: Callable[[], Client]) -> str:
    """Which corral server the tools will use, or why none answers yet (the tools say so too)."""
    try:
        with connect() as client:
            health = client.health()
            return f"tools act on the corral server at {client.url} ({health.get('backend', 'local')} backend, " \
                   f"user {health.get('user', '?')})"
    except CorralError as exc:
        return f"warning: {exc.message} (the tools answer with this error until the server answers)"
