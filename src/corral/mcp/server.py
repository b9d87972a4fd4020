"""The MCP server: corral's tools on the official SDK's `MCPServer`, over stdio or streamable HTTP.

Every tool error reaches the agent as a tool result with `isError` and one line it can act on:
bad arguments as `field: must be ..., got ...`, corral's own errors with their message (a refusal
names who may do it, or the scope it needs), and anything unexpected as the SDK's `Error executing
tool NAME` (the traceback stays in our log).

Over HTTP every request must carry the agent's corral API token, and each tool call is made to corral
with it (`corral.mcp.credentials`); over stdio the tools act as whoever started `corral mcp`.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError

from corral import __version__
from corral.errors import CorralError
from corral.mcp.arguments import describe_errors, unknown_arguments
from corral.mcp.clients import ClientPool
from corral.mcp.credentials import AGENT_TOKEN, RequireToken, TokenCheck, request_token
from corral.mcp.descriptions import INSTRUCTIONS, TOOLS
from corral.mcp.tools import CorralTools

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context

    from corral.client import Client

READS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
RUNS_CODE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
"""Submitting runs the agent's command on GPUs as the user: it may change or delete anything that user may,
so a client should ask before each call as it would before a shell command."""
STOPS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
ADDS_RULE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
CHANGES_MACHINE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                  open_world_hint=False)
"""Draining and resuming change where everybody's jobs may run (admins only); nothing is lost, and it is undone."""

TOOL_TABLE: tuple[tuple[str, str, ToolAnnotations], ...] = (
    ("create_gpu_job", "Create a GPU job", RUNS_CODE),
    ("forecast_gpu_job", "Forecast a GPU job's start", READS),
    ("view_gpu_job", "View a GPU job", READS),
    ("stop_gpu_job", "Stop a GPU job", STOPS),
    ("workload_submit", "Submit a workload", RUNS_CODE),
    ("workload_get", "Get a workload", READS),
    ("workload_logs", "Read a workload's logs", READS),
    ("metrics_query", "Query a workload's metrics", READS),
    ("alert_create", "Create an alert", ADDS_RULE),
    ("list_gpus", "List GPUs", READS),
    ("drain_gpus", "Drain GPUs (admins)", CHANGES_MACHINE),
    ("resume_gpus", "Resume drained GPUs (admins)", CHANGES_MACHINE),
    ("queue", "Show the queue", READS),
    ("list_runs", "List tracked runs", READS),
    ("run_metrics", "A run's tracked metrics", READS),
    ("recommend_resources", "Recommend GPUs for a model", READS),
    ("diagnose_job", "Diagnose a job", READS),
    ("job_efficiency", "A job's efficiency", READS),
)
"""Each tool: its name (also the CorralTools method), title, and what it does to the world."""


class CorralMCPServer(MCPServer):
    """An MCPServer whose tool errors name the argument and what it allows, and whose tools call corral
    with the token of the HTTP request they came in (see `corral.mcp.credentials`)."""

    def __init__(self, tools: CorralTools, connect: Callable[..., Client]) -> None:
        super().__init__(name="corral", title="corral GPU jobs", instructions=INSTRUCTIONS, version=__version__,
                         log_level="WARNING")
        for name, title, hints in TOOL_TABLE:
            self.add_tool(getattr(tools, name), name=name, title=title, description=TOOLS[name],
                          annotations=hints, structured_output=True)
        self._schemas: dict[str, dict[str, Any]] | None = None
        self.token_check = TokenCheck(connect)
        """Asks corral whether it takes an HTTP request's token (`serve_http`)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        schema = (await self._input_schemas()).get(name)
        if schema is not None:
            unknown = unknown_arguments(arguments, schema)
            if unknown:
                raise ToolError(unknown)
        try:
            token = request_token(_http_request(context))
        except CorralError as exc:
            raise ToolError(exc.message) from None
        # the tool runs in a worker thread, which sees this value: anyio copies the context into it
        reset = AGENT_TOKEN.set(token)
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and schema is not None:
                raise ToolError(describe_errors(cause, schema)) from None
            if isinstance(cause, CorralError):
                raise ToolError(cause.message) from None
            raise
        finally:
            AGENT_TOKEN.reset(reset)
        if isinstance(result, CallToolResult) and result.structured_content is not None and not result.is_error:
            # the text an agent reads: the same JSON without the SDK's indentation, a third fewer tokens
            text = json.dumps(result.structured_content, ensure_ascii=False)
            result.content = [TextContent(type="text", text=text)]
        return result

    async def _input_schemas(self) -> dict[str, dict[str, Any]]:
        if self._schemas is None:
            self._schemas = {tool.name: dict(tool.input_schema) for tool in await self.list_tools()}
        return self._schemas


def _http_request(context: Context | None) -> Any:
    """The HTTP request a tool call came in (a Starlette request); None over stdio."""
    if context is None:
        return None
    try:
        return context.request_context.request
    except ValueError:  # a call made outside any request
        return None


def build_server(connect: Callable[..., Client], cwd: str | None = None, *, tokens_required: bool = False
                 ) -> CorralMCPServer:
    """The MCP server for the corral server `connect` reaches; relative paths start at `cwd`.

    Args:
        connect: `connect(token, timeout=None)` makes a client that calls corral with `token` (None:
            the credential of whoever runs `corral mcp`), waiting `timeout` seconds (None: its default).
        tokens_required: refuse a tool call that came without an agent's token (serving HTTP).
    """
    tools = CorralTools(ClientPool(connect), cwd, tokens_required=tokens_required)
    return CorralMCPServer(tools, connect)


def serve_stdio(server: MCPServer) -> None:
    """Serve one client on stdin/stdout until it closes them."""
    server.run("stdio")


def serve_http(server: CorralMCPServer, host: str, port: int, announce: Callable[[str], None]) -> None:
    """Serve streamable HTTP at `http://host:port/mcp` until interrupted; `announce` gets the URL.

    Every request must carry a corral API token that corral takes, else it is answered 401 (build the
    server with `tokens_required`). The socket is bound and listening before `announce` is called, so
    port 0 (a free port) works and a client may connect as soon as it reads the URL.

    Raises:
        CorralError: cannot listen there, saying whether --host or --port is at fault.
    """
    import anyio
    import uvicorn

    sock = listen(host, port)
    bound = sock.getsockname()[1]
    app = RequireToken(server.streamable_http_app(host=host, transport_security=transport_security(host)),
                       server.token_check)
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address, not a name that resolved to one
    announce(f"http://{shown}:{bound}/mcp")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket listening on `host`:`port` (0: a free port).

    Raises:
        CorralError: naming --host when no address of this machine is `host`, else --port.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise CorralError(f"cannot listen on {host}: {getattr(exc, 'strerror', None) or exc}; give --host an "
                          "address of this machine (127.0.0.1, the default, or 0.0.0.0 for all)") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            raise CorralError(f"cannot listen on {host}: {exc.strerror or exc}; give --host an address of this "
                              "machine (127.0.0.1, the default, or 0.0.0.0 for all)") from None
        raise CorralError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port "
                          "(0 picks a free one)") from None
    sock.listen(128)
    return sock


def transport_security(host: str) -> TransportSecuritySettings:
    """DNS-rebinding protection for a loopback `host`: requests must name a loopback host (and origin).

    A page in the user's browser can reach a loopback port under a hostname it controls; checking
    Host and Origin refuses it (the page would need a token too, but need not learn that the port is
    there). Any other host was chosen to be reached from elsewhere (by any name), so the check is off
    there; `corral mcp` warns that tokens then cross the network in plain HTTP.
    """
    if not is_loopback(host):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = ["127.0.0.1", "localhost", "[::1]"]
    shown = f"[{host}]" if ":" in host else host
    if shown not in names:
        names.append(shown)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=[f"{name}:*" for name in names],
                                     allowed_origins=[f"http://{name}:*" for name in names])


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine's loopback: `localhost`, 127.0.0.0/8 or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
