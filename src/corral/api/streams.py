"""Each user's long-lived streams, capped: `GET /api/v1/events` (the dashboard's live view, a job's log
followed live) holds a connection and a subscription as long as it is open, so one user opening
hundreds must not tie up the server for everybody else.

ASGI middleware inside `Authenticate` (it needs the caller): a stream beyond the caller's
`[auth] max_streams_per_user` is answered 429, naming the limit and the key that raises it;
a stream's slot is given back when its response ends, however it ends.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from corral.api.errors import error_response
from corral.api.identity import CALLER
from corral.core.access.caps import ConcurrencyCap
from corral.errors import RateLimited

STREAM_PATHS = ("/api/v1/events",)
RETRY_S = 5.0


class StreamCap:
    """The middleware: at most `limit` concurrent streams per user (0: no limit)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.streams = ConcurrencyCap(limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = scope.get(CALLER) if scope["type"] == "http" else None
        if caller is None or scope["path"] not in STREAM_PATHS:
            await self.app(scope, receive, send)
            return
        if not self.streams.acquire(caller.user):
            limit = self.streams.limit
            error = RateLimited(f"{caller.user} already has {limit} event streams open (live dashboard pages, "
                                f"followed logs), the most each user may ([auth] max_streams_per_user = {limit}); "
                                "close some, or ask an admin to raise it", RETRY_S)
            await error_response(error)(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.streams.release(caller.user)
