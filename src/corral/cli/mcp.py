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

from corral.errors import CorralError, Forbidden, Unauthenticated

if TYPE_CHECKING:
    from corral.client import Client

STARTUP_PROBE_S = 3.0
"""How long the start-up check waits for the corral server: an MCP client times out its
initialize request, and a server that accepts but never answers must not hold that up."""


@click.command()
@click.option("--http", "use_http", is_flag=True,
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; every request must carry the "
                   "agent's corral API token (Authorization: Bearer corral_...).")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --http: the address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8766, show_default=True,
              help="With --http: the port; 0 picks a free one.")
@click.option("--request-timeout", type=click.FloatRange(0.1, 3600), default=20.0, show_default=True,
              help="Seconds a tool waits for the corral server to answer before it reports an error.")
@click.pass_context
def mcp(ctx: click.Context, use_http: bool, host: str, port: int, request_timeout: float) -> None:
    """Serve corral's GPU-job tools to AI agents (MCP): over stdio, or streamable HTTP with --http.

    Over stdio the tools act on the corral server of --home (or --url) as the user running this command
    (or the user of $CORRAL_TOKEN). Over HTTP each request must carry the agent's own API token
    (`corral token create --scope submit`), and the tools act as that token's user.
    """
    try:
        from corral.mcp.server import build_server, is_loopback, serve_http, serve_stdio
    except ImportError as exc:
        raise click.ClickException(f"corral mcp needs the MCP SDK ({exc}): pip install 'mcp>=2.3,<3'") from None

    def connect(token: str | None, timeout: float | None = None) -> Client:
        from corral.client import Client

        return Client(ctx.obj["url"], home=ctx.obj["home"], token=token,
                      timeout=request_timeout if timeout is None else timeout)

    server = build_server(connect, cwd=os.getcwd(), tokens_required=use_http)
    probe = functools.partial(connect, timeout=min(STARTUP_PROBE_S, request_timeout))
    click.echo(f"corral mcp: {_target(probe, use_http)}", err=True)
    if not use_http:
        serve_stdio(server)
        return

    def announce(url: str) -> None:
        # only once the address is bound: a server that failed to start has exposed nothing
        if not is_loopback(host):
            click.echo(f"corral mcp: warning: listening on {host} over plain HTTP: agents' tokens cross the network "
                       "unencrypted; put a TLS proxy in front, or keep --host 127.0.0.1", err=True)
        click.echo("corral mcp: every request must carry the agent's own corral API token, as the header "
                   "Authorization: Bearer corral_... (make one as the agent's user: corral token create --scope submit)",
                   err=True)
        click.echo(f"corral mcp: serving MCP (streamable HTTP) at {url}", err=True)

    serve_http(server, host, port, announce)


def _target(connect: Callable[[str | None], Client], use_http: bool) -> str:
    """Which corral server the tools will use and as whom, or why none answers yet (the tools say so too)."""
    try:
        with connect(None) as client:
            health = client.health()
            where = f"the corral server at {client.url} ({health.get('backend', 'local')} backend)"
            if use_http:
                return f"tools act on {where} as the user of each request's API token"
            try:
                me = client.whoami()
            except (Unauthenticated, Forbidden) as exc:
                return f"warning: {where} refuses this credential: {exc.message}"
            return f"tools act on {where} as user {me.get('user', '?')} ({me.get('scope', '?')} scope, " \
                   f"known by {me.get('via', '?')})"
    except CorralError as exc:
        return f"warning: {exc.message} (the tools answer with this error until the server answers)"
