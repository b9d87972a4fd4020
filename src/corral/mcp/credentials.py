"""Whose credential a tool call uses: over HTTP, the corral API token of the request that carried it.

Over stdio the tools act as whoever started `corral mcp` (the kernel vouches for a local user, or
`$CORRAL_TOKEN` names one). Over HTTP anyone who reaches the port would act as that user, so every
request must carry the agent's own token (`Authorization: Bearer corral_...`), and the tools call
corral with it: corral's own checks (scopes, who may stop a job or read its logs) then apply to the
agent's user, whoever runs `corral mcp`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from corral.core.access.tokens import TOKEN_PREFIX, looks_like_token
from corral.errors import CorralError, Forbidden, Unauthenticated

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from corral.client import Client

AGENT_TOKEN: ContextVar[str | None] = ContextVar("corral_mcp_agent_token", default=None)
"""The token of the HTTP request a tool call came in (None over stdio); set around the call, and seen
by the thread a tool runs in (anyio copies the context into it)."""

HOW_TO_GET_ONE = ("make one on the corral server's machine with `corral token create --scope submit` (as the user the "
                  "agent should act as) and have the MCP client send it with every request: "
                  "Authorization: Bearer corral_...")
NO_TOKEN = ("corral mcp over HTTP acts as the user of each request's corral API token, and this request carries "
            f"none: {HOW_TO_GET_ONE}")
CHECKED_FOR_S = 10.0
"""How long a token corral accepted is taken without asking again (corral itself caches it as long)."""
CHECK_TIMEOUT_S = 3.0
"""How long a check waits for corral: an MCP client times out its initialize request."""
JSONRPC_UNAUTHORIZED = -32001


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header's value; None when there is no header.

    Raises:
        Unauthenticated: another scheme, or a value that is not a corral API token.
    """
    if not authorization:
        return None
    scheme, _, secret = authorization.strip().partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        raise Unauthenticated(f"the Authorization header must be 'Bearer corral_...'; {HOW_TO_GET_ONE}")
    if not looks_like_token(secret):
        raise Unauthenticated(f"the bearer token is not a corral API token ({TOKEN_PREFIX} and 43 characters); "
                              f"{HOW_TO_GET_ONE}")
    return secret


def request_token(request: Any) -> str | None:
    """The corral token of the HTTP request a tool call came in; None for none (or a call over stdio).

    Raises:
        Unauthenticated: the request's Authorization header is not a corral token.
    """
    headers = getattr(request, "headers", None)
    return bearer_token(headers.get("authorization")) if headers is not None else None


class TokenCheck:
    """Whether corral accepts a token, asked of corral itself (`whoami`) and remembered for a while.

    Args:
        connect: makes a client that calls corral with a given token, waiting at most a given time.
        clock: seconds, for how long an answer is remembered.
    """

    def __init__(self, connect: Callable[[str, float], Client], clock: Callable[[], float] = time.monotonic) -> None:
        self._connect = connect
        self._clock = clock
        self._accepted: dict[str, float] = {}
        self._lock = threading.Lock()

    def check(self, token: str) -> None:
        """Return if corral takes `token` (or cannot be asked now: the tools then say why it does not answer).

        Raises:
            Unauthenticated: corral does not know the token (unknown, revoked or expired).
            Forbidden: corral knows it but refuses its user (a personal queue of somebody else).
        """
        now = self._clock()
        with self._lock:
            if now - self._accepted.get(token, -CHECKED_FOR_S - 1) <= CHECKED_FOR_S:
                return
        try:
            with self._connect(token, CHECK_TIMEOUT_S) as client:
                client.whoami()
        except (Unauthenticated, Forbidden):
            with self._lock:
                self._accepted.pop(token, None)
            raise
        except CorralError:
            return  # not reachable, or answering oddly: not the token's fault, and the tools say what is wrong
        with self._lock:
            if len(self._accepted) > 10_000:
                self._accepted.clear()
            self._accepted[token] = now


class RequireToken:
    """ASGI middleware: an HTTP request without a corral API token that corral accepts is answered 401.

    The answer is a JSON-RPC error, which an MCP client shows as it is: what is missing and how to make one.
    """

    def __init__(self, app: ASGIApp, check: TokenCheck) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import anyio

        headers = dict(scope["headers"])
        try:
            token = bearer_token(headers.get(b"authorization", b"").decode("latin-1"))
            if token is None:
                raise Unauthenticated(NO_TOKEN)
            await anyio.to_thread.run_sync(self.check.check, token)
        except (Unauthenticated, Forbidden) as exc:
            await _refuse(exc, send)
            return
        await self.app(scope, receive, send)


async def _refuse(error: CorralError, send: Send) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": JSONRPC_UNAUTHORIZED, "message": error.message,
                                                               "data": {"status": error.status, "code": error.code}}})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if error.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="corral"'))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body.encode()})
