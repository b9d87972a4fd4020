"""Every API request's caller: learned from the kernel, a token or the dashboard's cookie; then admitted and rate limited.

ASGI middleware, just inside the body limit. The order of evidence:

1. `Authorization: Bearer <token>`: an API token (`corral token create`), whoever sends it.
2. The `corral_session` cookie: a token the dashboard's login stored (HttpOnly, SameSite=Strict).
3. The connection's peer, as the kernel names it (`corral.server.peers`): the Unix socket's
   SO_PEERCRED, or the socket table for TCP from this machine. Not for a request that a proxy
   forwarded (it would name the proxy's user), nor for a Host that is not this server
   (a DNS-rebinding page in a local browser would otherwise act as that browser's user).

Anything else is 401. Changes (POST, PATCH, DELETE) from a page of another origin are refused
whatever the credential: a local browser is logged in by who runs it, so a foreign page must
not borrow that. Paths outside /api (the dashboard's files), health and the Slurm webhook
(its own secret) need no caller.
"""

from __future__ import annotations

import json
import pwd
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from corral.api.errors import error_response
from corral.core.identity import AccessPolicy, Caller, scope_covers
from corral.core.ratelimit import RateLimiter
from corral.errors import CorralError, Forbidden, RateLimited, Unauthenticated
from corral.server.peers import PEER_KIND, PEER_UID

CALLER = "corral.caller"
SESSION_COOKIE = "corral_session"
TOKEN_CACHE_S = 10.0  # a revoked token stops working at once (the cache is cleared); an expired one within this
_OPEN_PATHS = ("/api/v1/health", "/api/v1/webhooks/", "/api/v1/session")
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_FORWARDED = (b"forwarded", b"x-forwarded-for", b"x-real-ip")


@dataclass(frozen=True)
class AuthSettings:
    """`[auth]` in the server's config."""

    trust_local: bool = True
    """Callers on this machine are who the kernel says; off behind a local reverse proxy that forwards others."""
    rate_per_s: float = 50.0
    """Each non-admin user's sustained requests a second (0: no limit); admins are never slowed."""
    burst: float = 500.0
    host_names: tuple[str, ...] = ()
    """Host headers a local browser may use besides localhost and the listen address (the machine's names)."""


def caller_of(request: Request) -> Caller:
    """The request's caller (set by the middleware)."""
    caller = request.scope.get(CALLER)
    if caller is None:
        raise Unauthenticated("this request needs a caller: a local connection or an API token")
    return caller


def policy_of(request: Request) -> AccessPolicy:
    return request.app.state.policy


class Authenticate:
    """The middleware: identify, admit, rate limit; the caller goes into the scope for the routes."""

    def __init__(self, app: ASGIApp, identifier: Identifier) -> None:
        self.app = app
        self.identifier = identifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith(_OPEN_PATHS):
            try:
                self.identifier.check_origin(scope)  # a login from another site's page is refused too
            except CorralError as exc:
                await error_response(exc)(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        try:
            caller = self.identifier.admit(scope)
        except CorralError as exc:
            response = error_response(exc)
            if isinstance(exc, RateLimited):
                response.headers["Retry-After"] = str(max(1, round(exc.retry_after + 0.5)))
            await response(scope, receive, send)
            return
        scope[CALLER] = caller
        await self.app(scope, receive, send)


class Identifier:
    """What the middleware and the login route share: the evidence, the token cache, the rate limits."""

    def __init__(self, *, policy: AccessPolicy, tokens: Any, settings: AuthSettings, listen_host: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.policy = policy
        self.tokens = tokens
        self.settings = settings
        self.clock = clock
        self.limiter = RateLimiter(settings.rate_per_s, max(settings.burst, 1.0), clock) if settings.rate_per_s > 0 else None
        self._names: dict[int, str | None] = {}
        self._token_cache: dict[str, tuple[Caller | None, float]] = {}
        self._hosts = frozenset({"localhost", "127.0.0.1", "[::1]", listen_host, f"[{listen_host}]", *settings.host_names})

    def clear_token_cache(self) -> None:
        self._token_cache.clear()

    def admit(self, scope: Scope) -> Caller:
        """The caller of a request that may go on.

        Raises:
            Unauthenticated, Forbidden, RateLimited: it may not.
        """
        headers = dict(scope["headers"])
        self._check_origin(scope["method"], headers)
        caller = self.identify(scope, headers)
        self.policy.admit(caller)
        if self.limiter is not None and not caller.is_admin:
            wait = self.limiter.take(caller.user)
            if wait:
                raise RateLimited(f"too many requests from {caller.user} (the server allows "
                                  f"{self.settings.rate_per_s:g} a second); try again in {wait:.1f} s", wait)
        return caller

    def identify(self, scope: Scope, headers: dict[bytes, bytes]) -> Caller:
        """The caller, from a token, the session cookie, or the connection's peer.

        Raises:
            Unauthenticated: no credential, or a bad one.
        """
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if auth:
            scheme, _, secret = auth.partition(" ")
            if scheme.lower() != "bearer" or not secret.strip():
                raise Unauthenticated("the Authorization header must be 'Bearer <token>' (make one: corral token create)")
            return self.token_caller(secret.strip(), "token")
        session = _cookie(headers.get(b"cookie", b""), SESSION_COOKIE)
        if session:
            return self.token_caller(session, "session")
        uid, kind = scope.get(PEER_UID), scope.get(PEER_KIND)
        if uid is not None and kind is not None:
            self._check_local(headers, tcp=kind == "local")
            user = self._user_name(uid)
            return Caller(user, self.policy.scope_of(user), kind)
        raise Unauthenticated("who is calling? From another machine, send an API token: Authorization: Bearer <token> "
                              "(make one on the server's machine with `corral token create`), or log in to the dashboard")

    def token_caller(self, secret: str, via: str, login: bool = False) -> Caller:
        """The caller a token (or a session's token) speaks for.

        Raises:
            Unauthenticated: the token is unknown, revoked or expired.
        """
        now = self.clock()
        cached = self._token_cache.get(secret)
        if cached is None or now - cached[1] > TOKEN_CACHE_S:
            record = self.tokens.lookup(secret, now)
            holder = None
            if record is not None:
                scope = record.scope
                ceiling = self.policy.scope_of(record.user)
                if not scope_covers(ceiling, scope):
                    scope = ceiling  # an admin token of someone no longer an admin: what they may still do
                holder = Caller(record.user, scope, via, record.id)
            if len(self._token_cache) > 10_000:
                self._token_cache.clear()
            cached = self._token_cache[secret] = (holder, now)
        if cached[0] is None:
            what = "session has ended; log in again" if via == "session" and not login else \
                "token is unknown, revoked or expired"
            raise Unauthenticated(f"this {what} (make a new one with `corral token create`)")
        return replace(cached[0], via=via)

    def _check_local(self, headers: dict[bytes, bytes], tcp: bool) -> None:
        if tcp and not self.settings.trust_local:
            raise Unauthenticated("this server does not trust local connections ([auth] trust_local = false); "
                                  "send an API token: Authorization: Bearer <token>")
        if any(name in headers for name in _FORWARDED):
            raise Unauthenticated("a forwarded request names the proxy, not its sender: send an API token")
        host = _host_name(headers.get(b"host", b"").decode("latin-1"))
        if tcp and host and host not in self._hosts:
            raise Forbidden(f"Host {host!r} is not this server's: open the dashboard at http://localhost or the "
                            "address corral listens on (or add the name to [auth] host_names)")

    def check_origin(self, scope: Scope) -> None:
        self._check_origin(scope["method"], dict(scope["headers"]))

    def _check_origin(self, method: str, headers: dict[bytes, bytes]) -> None:
        if method not in _UNSAFE:
            return
        origin = headers.get(b"origin")
        if origin is None:  # not a browser: a browser names the page's origin on every change it sends
            return
        origin_host = origin.decode("latin-1").partition("://")[2]
        if origin_host != headers.get(b"host", b"").decode("latin-1"):
            raise Forbidden(f"a page from {origin.decode('latin-1')} may not change things on this server")

    def _user_name(self, uid: int) -> str:
        if uid not in self._names:
            try:
                self._names[uid] = pwd.getpwuid(uid).pw_name
            except KeyError:
                self._names[uid] = None
        name = self._names[uid]
        if name is None:
            raise Unauthenticated(f"uid {uid} has no user name on this machine; use an API token")
        return name


def _cookie(header: bytes, name: str) -> str | None:
    for part in header.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            return value
    return None


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


# -- who am I, and the dashboard's session ----------------------------------------------------------

router = APIRouter(prefix="/api/v1", tags=["identity"])


@router.get("/whoami", summary="Who the server takes the caller for, and what they may do")
async def whoami(request: Request) -> dict[str, object]:
    caller = caller_of(request)
    policy = policy_of(request)
    return {"user": caller.user, "scope": caller.scope, "via": caller.via, "admin": caller.is_admin,
            "personal_queue_of": policy.owner}


@router.post("/session", summary="Log the dashboard in with an API token (sets an HttpOnly cookie)",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                 "type": "object", "required": ["token"], "properties": {"token": {"type": "string"}}}}}}})
async def log_in(request: Request) -> Response:
    from corral.api.jobs import json_object
    from corral.errors import InvalidRequest

    body = json_object(await request.body())
    token = body.get("token")
    if not isinstance(token, str) or not token.strip() or len(token) > 200:
        raise InvalidRequest("token", "is missing", "paste a token from `corral token create --scope read`")
    auth: Identifier = request.app.state.identifier
    caller = auth.token_caller(token.strip(), "session", login=True)
    request.app.state.policy.admit(caller)
    record = request.app.state.tokens.lookup(token.strip(), auth.clock())
    lifetime = max(1, int(record.expires - auth.clock())) if record is not None else None
    response = Response(json.dumps({"user": caller.user, "scope": caller.scope}), media_type="application/json")
    response.set_cookie(SESSION_COOKIE, token.strip(), max_age=lifetime, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")
    return response


@router.delete("/session", status_code=204, summary="Log the dashboard out")
async def log_out() -> Response:
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
