"""`corral mcp`: corral's GPU-job tools for AI agents, over the Model Context Protocol.

    from corral.mcp.server import build_server, serve_stdio
    serve_stdio(build_server(lambda: Client(home="~/.corral")))

`tools` holds the tools (independent of the MCP SDK), `server` registers them on the SDK's
`MCPServer` and serves them. Importing this package imports neither.
"""

from __future__ import annotations
