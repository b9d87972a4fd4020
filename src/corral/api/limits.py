"""A ceiling on request bodies: one request must not make the server read gigabytes into memory.

ASGI middleware, outermost: a declared `Content-Length` over the limit is answered 413 before
anything is read; a body sent without one (chunked) is counted as it arrives and refused when it
passes the limit. Metric batches are the largest legitimate bodies (a few MB each); the default
leaves room for far larger ones.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corral.api.errors import error_response
from corral.errors import CorralError

DEFAULT_MAX_BODY_MB = 64


class BodyTooLarge(CorralError):
    status = 413
    code = "too_large"


STREAMED_TO_DISK = ("PUT", "/api/2.0/mlflow-artifacts/artifacts/")
"""MLflow's artifact uploads: their handler writes the body to disk as it arrives and holds it to
`[tracking] max_artifact_mb` itself, so a model larger than a request may be logged whole."""


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_MB << 20) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"] == STREAMED_TO_DISK[0]
                                       and scope["path"].startswith(STREAMED_TO_DISK[1])):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        seen = 0
        refused = False

        async def counted() -> Message:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    refused = True
                    raise BodyTooLarge(self._message())
            return message

        try:
            await self.app(scope, counted, send)
        except BodyTooLarge:
            if refused:
                await self._refuse(scope, receive, send)

    def _message(self) -> str:
        return (f"body: the request is larger than the server's limit of {self.max_bytes >> 20} MB "
                "(send metrics in smaller batches)")

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await error_response(BodyTooLarge(self._message()))(scope, receive, send)
