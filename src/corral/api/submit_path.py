"""The hot path: POST /api/v1/jobs answered before the framework's routing layers.

Submitting is what clients do thousands of times a second; FastAPI's routing, dependency
and exception layers cost several times the submit itself. This ASGI middleware answers
exactly that request with the same function the documented route uses
(`corral.api.jobs.submit`) and the same error mapping; every other request goes on.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from corral.api.errors import error_response, unexpected_response
from corral.api.identity import CALLER
from corral.api.jobs import submit
from corral.errors import CorralError
from corral.server.service import JobService

PATH = "/api/v1/jobs"


class SubmitPath:
    def __init__(self, app: ASGIApp, service: JobService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"].rstrip("/") != PATH:
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        try:
            response = await submit(self.service, b"".join(chunks), scope[CALLER])
        except CorralError as exc:
            response = error_response(exc)
        except Exception as exc:  # noqa: BLE001 - the same answer the framework's handler would give
            response = unexpected_response(exc)
        await response(scope, receive, send)
