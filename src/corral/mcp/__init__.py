"""`corral mcp`: corral's GPU-job tools for AI agents, over the Model Context Protocol.

    from corral.mcp.server import build_server, serve_stdio
    serve_stdio(build_server(lambda token, timeout=None: Client(home="~/.corral", token=token)))

`tools` holds the tools (independent of the MCP SDK), `server` registers them on the SDK's
`MCPServer` and serves them; `credentials` says whose token a call uses (over HTTP, the request's),
`clients` keeps a corral client per token. Importing this package imports none of them.
"""

from __future__ import annotations
