"""Every API request's caller: learned from the kernel, a token or the dashboard's session; then admitted and rate limited.

ASGI middleware, just inside the body limit. The order of evidence:

1. `Authorization: Bearer <token>`: an API token (`corral token create`), whoever sends it; or the same
   token as `X-API-Key: <token>` (the tracker client sends its key so).
2. The `corral_session` cookie: a dashboard session (`corral.core.access.sessions`), valid only together with
   its key in the `X-Corral-Session` header, which the dashboard's page alone holds (a cookie reaches
   every port of its host; the key does not). A cookie without its key is refused, never ignored;
   a key without its cookie is nothing. A server on another port may also *set* cookies for this
   host, so each `corral_session` the browser sends is tried with the key: a planted one cannot lock
   the dashboard out, and (lacking the page's key) cannot log it in as someone else either.
3. The connection's peer, as the kernel names it (`corral.server.peers`): the Unix socket's
   SO_PEERCRED, or the socket table for TCP from this machine. Not for a request that a proxy
   forwarded (it would name the proxy's user), nor for a Host that is not this server
   (a DNS-rebinding page in a local browser would otherwise act as that browser's user).

Anything else is 401. Each peer (a local user, else a remote address) may fail only
`[auth] unauthenticated_burst` times at once and `unauthenticated_per_s` times a second on average;
beyond that its requests are answered 429 before any credential is looked up in the database
(a flood of made-up tokens costs the database nothing, and nobody else anything). A connection
over its peer's cap (`corral.server.peers`) is answered 429 and closed.

Changes (POST, PATCH, DELETE) from a page of another origin are refused whatever the credential:
a local browser is logged in by who runs it, so a foreign page must not borrow that. Paths outside
/api (the dashboard's files) need no caller, nor do the paths the routers declare open (health, the login,
the Slurm webhook with its own secret); the tracker client's routes (`api/compat/tracker_client.py`: under
/tracker, and its POSTs at the root) need one as /api does. `api/app.py` gathers the routers' declarations
into the `GuardedPaths` it gives the middleware.

Tokens and sessions are looked up at most every `CREDENTIAL_CACHE_S` per credential, but their
expiry is compared on every use; revoking a token or logging out clears the cache at once.
"""

from __future__ import annotations

import pwd
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from corral.api.errors import error_response
from corral.core.access.identity import AccessPolicy, Caller, scope_covers
from corral.core.access.ratelimit import RateLimiter
from corral.core.access.sessions import (
    DEFAULT_SESSION_HOURS, SESSION_COOKIE, SESSION_HEADER, DashboardSession, looks_like_session_part, session_expiry,
)
from corral.core.access.tokens import looks_like_token
from corral.errors import CorralError, Forbidden, RateLimited, Unauthenticated
from corral.server.peers import PEER_KEY, PEER_KIND, PEER_REFUSED, PEER_UID, settle_peer

CALLER = "corral.caller"
CREDENTIAL_CACHE_S = 10.0  # a lookup is reused this long (revoking or logging out clears it); expiry is checked every use
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
    session_hours: float = DEFAULT_SESSION_HOURS
    """How long a dashboard login lasts (never past the token it was made with)."""
    unauthenticated_per_s: float = 5.0
    """Each peer's requests a second that bring no valid credential (0: no limit); beyond, 429 without a lookup."""
    unauthenticated_burst: float = 50.0
    max_connections_per_user: int = 256
    """Connections each peer (local uid, else remote address) may hold open at once (0: no limit)."""
    max_streams_per_user: int = 16
    """Event streams (`GET /api/v1/events`: the dashboard's live view, log follow) each user may hold (0: no limit)."""


@dataclass(frozen=True)
class GuardedPaths:
    """Which requests need a caller, as the routers declare them: `api/app.py` gathers their declarations."""

    prefixes: tuple[str, ...]
    """Every request under these needs one (the API's, the tracker client's under its prefix)."""
    changes: tuple[str, ...] = ()
    """Only changes (not GET or HEAD) under these: routes at the root, among the dashboard's GET pages."""
    open: tuple[str, ...] = ()
    """Paths under those whose routes need no caller, or check their own credential: an origin check only."""

    def need_caller(self, scope: Scope) -> bool:
        path = scope["path"]
        if path.startswith(self.prefixes):
            return True
        return scope["method"] not in ("GET", "HEAD") and path.startswith(self.changes)


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

    def __init__(self, app: ASGIApp, identifier: Identifier, paths: GuardedPaths) -> None:
        self.app = app
        self.identifier = identifier
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await settle_peer(scope)
        refused = scope.get(PEER_REFUSED)
        if refused:  # this connection is over its peer's cap: answered, then closed
            response = error_response(RateLimited(refused, 1.0))
            response.headers["Connection"] = "close"
            await response(scope, receive, send)
            return
        if not self.paths.need_caller(scope):
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith(self.paths.open):
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
            await error_response(exc)(scope, receive, send)
            return
        scope[CALLER] = caller
        await self.app(scope, receive, send)


@dataclass(frozen=True, slots=True)
class _Known:
    """What the database said of a credential, and when; its expiry is compared on each use regardless."""

    caller: Caller | None  # None: unknown, revoked or expired
    checked: float
    expires: float


class Identifier:
    """What the middleware and the login routes (`api/login.py`) share: the evidence, the credential cache, the rate limits."""

    def __init__(self, *, policy: AccessPolicy, tokens: Any, sessions: Any, settings: AuthSettings, listen_host: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.policy = policy
        self.tokens = tokens
        self.sessions = sessions
        self.settings = settings
        self.clock = clock
        self.limiter = RateLimiter(settings.rate_per_s, max(settings.burst, 1.0), clock) if settings.rate_per_s > 0 else None
        self.strangers = (RateLimiter(settings.unauthenticated_per_s, max(settings.unauthenticated_burst, 1.0), clock)
                          if settings.unauthenticated_per_s > 0 else None)
        self._names: dict[int, str | None] = {}
        self._known: dict[tuple[str, ...], _Known] = {}
        self._hosts = frozenset({"localhost", "127.0.0.1", "[::1]", listen_host, f"[{listen_host}]", *settings.host_names})

    def clear_token_cache(self) -> None:
        """Forget every looked-up token and session: a revocation or a logout takes effect at once."""
        self._known.clear()

    def admit(self, scope: Scope) -> Caller:
        """The caller of a request that may go on.

        Raises:
            Unauthenticated, Forbidden, RateLimited: it may not.
        """
        headers = dict(scope["headers"])
        self._check_origin(scope["method"], headers)
        peer = peer_of(scope)
        try:
            caller = self.identify(scope, headers, peer)
        except Unauthenticated:
            self._charge(peer)
            raise
        self.policy.admit(caller)
        self._limit(caller)
        return caller

    def identify(self, scope: Scope, headers: dict[bytes, bytes], peer: str | None = None) -> Caller:
        """The caller, from a token, the dashboard's session, or the connection's peer.

        Args:
            peer: whom a database lookup counts against (`peer_of`); None: nobody's, never refused.

        Raises:
            Unauthenticated: no credential, or a bad one.
            RateLimited: `peer` has failed too often to be worth a database lookup now.
        """
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if auth:
            scheme, _, secret = auth.partition(" ")
            if scheme.lower() != "bearer" or not secret.strip():
                raise Unauthenticated("the Authorization header must be 'Bearer <token>' (make one: corral token create)")
            return self.token_caller(secret.strip(), peer)
        api_key = headers.get(b"x-api-key", b"").decode("latin-1").strip()
        if api_key:  # the same token as a header of its own, as the tracker client sends it
            return self.token_caller(api_key, peer)
        cookies = _cookies(headers.get(b"cookie", b""), SESSION_COOKIE)
        if cookies:
            return self.session_caller(cookies, headers.get(SESSION_HEADER.encode(), b"").decode("latin-1").strip(), peer)
        uid, kind = scope.get(PEER_UID), scope.get(PEER_KIND)
        if uid is not None and kind is not None:
            self._check_local(headers, tcp=kind == "local")
            user = self._user_name(uid)
            return Caller(user, self.policy.scope_of(user), kind)
        raise Unauthenticated("who is calling? From another machine, send an API token: Authorization: Bearer <token> "
                              "(make one on the server's machine with `corral token create`), or log in to the dashboard")

    def still_holds(self, scope: Scope) -> bool:
        """Whether the credential of a request that is still answering (an event stream) is still good."""
        caller = scope.get(CALLER)
        if caller is None or caller.via not in ("token", "session"):
            return True  # the kernel's word does not lapse
        try:
            self.identify(scope, dict(scope["headers"]))
        except CorralError:
            return False
        return True

    def token_caller(self, secret: str, peer: str | None = None) -> Caller:
        """The caller an API token speaks for.

        Raises:
            Unauthenticated: not a token, or one unknown, revoked or expired.
        """
        if not looks_like_token(secret):
            if looks_like_session_part(secret):
                raise Unauthenticated("a dashboard session is not an API token and works only in the dashboard: "
                                      "send an API token (make one with `corral token create`)")
            raise Unauthenticated("this is not an API token (a token starts with corral_); "
                                  "make one with `corral token create`")
        caller = self._remember(("token", secret), lambda now: self._token_record(secret, now), peer)
        if caller is None:
            raise Unauthenticated("this token is unknown, revoked or expired (make a new one with `corral token create`)")
        return caller

    def session_caller(self, cookies: list[str], key: str, peer: str | None = None) -> Caller:
        """The caller a dashboard session speaks for: one of the request's session cookies and its key together.

        Raises:
            Unauthenticated: the cookie is a token, the key is missing, or the session has ended.
        """
        candidates = [cookie for cookie in cookies if not looks_like_token(cookie)]
        if not candidates:
            raise Unauthenticated("an API token is no dashboard session: send it as Authorization: Bearer <token>, "
                                  "or log in to the dashboard with it")
        if not key:
            raise Unauthenticated("a dashboard session needs its key, which only the dashboard's page holds: "
                                  "log in to the dashboard again")
        for cookie in candidates:
            caller = self._remember(("session", cookie, key), lambda now: self._session_record(cookie, key, now), peer)
            if caller is not None:
                return caller
        raise Unauthenticated("this dashboard session has ended (logged out, expired, or its token revoked): "
                              "log in again")

    async def open_session(self, secret: str, peer: str | None = None) -> tuple[DashboardSession, str, str]:
        """Log the dashboard in with an API token: a new session, its cookie and its key.

        Raises:
            Unauthenticated: not a live token. Forbidden: its user may not use this server.
            RateLimited: too many logins.
        """
        if not looks_like_token(secret):
            self._charge(peer)
            raise Unauthenticated("this is not an API token (a token starts with corral_): "
                                  "make one with `corral token create --scope read`")
        now = self.clock()
        self._gate(peer)
        token = self.tokens.lookup(secret, now)
        if token is None:
            self._charge(peer)
            raise Unauthenticated("this token is unknown, revoked or expired (make a new one with `corral token create`)")
        caller = Caller(token.user, self._capped(token.user, token.scope), "session", token.id)
        self.policy.admit(caller)
        self._limit(caller)  # each login is a row: a flood of them is slowed like any other request
        expires = session_expiry(now, token.expires, self.settings.session_hours)
        return await run_in_threadpool(self.sessions.create, token.user, caller.scope, token.id, expires, now)

    async def end_session(self, headers: dict[bytes, bytes]) -> bool:
        """Log out the session this request's cookie and key name; whether one was running."""
        key = headers.get(SESSION_HEADER.encode(), b"").decode("latin-1").strip()
        cookies = _cookies(headers.get(b"cookie", b""), SESSION_COOKIE) if key else []
        ended = False
        for cookie in cookies:
            ended = await run_in_threadpool(self.sessions.end, cookie, key, self.clock()) or ended
        self.clear_token_cache()
        return ended

    def _remember(self, key: tuple[str, ...], fetch: Callable[[float], tuple[Caller | None, float]],
                  peer: str | None = None) -> Caller | None:
        now = self.clock()
        known = self._known.get(key)
        if known is None or now - known.checked > CREDENTIAL_CACHE_S:
            self._gate(peer)  # a peer that keeps failing is refused before the database is asked
            caller, expires = fetch(now)
            if len(self._known) > 10_000:
                self._known.clear()
            known = self._known[key] = _Known(caller, now, expires)
        if known.caller is None or now >= known.expires:
            return None
        return known.caller

    def _token_record(self, secret: str, now: float) -> tuple[Caller | None, float]:
        record = self.tokens.lookup(secret, now)
        if record is None:
            return None, now
        return Caller(record.user, self._capped(record.user, record.scope), "token", record.id), record.expires

    def _session_record(self, cookie: str, key: str, now: float) -> tuple[Caller | None, float]:
        record = self.sessions.lookup(cookie, key, now)
        if record is None:
            return None, now
        return Caller(record.user, self._capped(record.user, record.scope), "session", record.token_id), record.expires

    def _capped(self, user: str, scope: str) -> str:
        ceiling = self.policy.scope_of(user)
        # an admin credential of someone no longer an admin: what they may still do
        return scope if scope_covers(ceiling, scope) else ceiling

    def _limit(self, caller: Caller) -> None:
        if self.limiter is None or caller.is_admin:
            return
        wait = self.limiter.take(caller.user)
        if wait:
            raise RateLimited(f"too many requests from {caller.user} (the server allows "
                              f"{self.settings.rate_per_s:g} a second); try again in {wait:.1f} s", wait)

    def _gate(self, peer: str | None) -> None:
        """Refuse a lookup for `peer` while its failures are used up (spends nothing)."""
        if self.strangers is not None and peer is not None:
            wait = self.strangers.wait(peer)
            if wait:
                raise RateLimited(self._strangers_message(peer, wait), wait)

    def _charge(self, peer: str | None) -> None:
        """Count a failed request against `peer`; RateLimited once its failures are used up."""
        if self.strangers is not None and peer is not None:
            wait = self.strangers.take(peer)
            if wait:
                raise RateLimited(self._strangers_message(peer, wait), wait) from None

    def _strangers_message(self, peer: str, wait: float) -> str:
        return (f"too many requests without a valid credential from {peer} (the server takes "
                f"{self.settings.unauthenticated_per_s:g} a second after a burst of {self.settings.unauthenticated_burst:g}: "
                f"[auth] unauthenticated_per_s, unauthenticated_burst); try again in {wait:.1f} s with a valid token")

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


def peer_of(scope: Scope) -> str | None:
    """Whom a request's failures count against: its connection's peer (local uid, else address)."""
    key = scope.get(PEER_KEY)
    if key is not None:
        return str(key)
    client = scope.get("client")
    return f"ip:{client[0]}" if client else None


def _cookies(header: bytes, name: str, most: int = 8) -> list[str]:
    """The values of the cookies called `name`, in the browser's order; a few at most (each costs a lookup)."""
    values = []
    for part in header.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            values.append(value)
    return values[:most]


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


# -- who am I --------------------------------------------------------------------------------------

router = APIRouter(prefix="/api/v1", tags=["identity"])


@router.get("/whoami", summary="Who the server takes the caller for, and what they may do")
async def whoami(request: Request) -> dict[str, object]:
    caller = caller_of(request)
    policy = policy_of(request)
    return {"user": caller.user, "scope": caller.scope, "via": caller.via, "admin": caller.is_admin,
            "personal_queue_of": policy.owner}
