"""The dashboard's login sessions as data: their two secrets, how they are hashed, and how long they live (pure).

A browser sends a host's cookies to every port of that host, so whatever the session cookie
holds, a page on another port (another user's TensorBoard on localhost:9555) sees it. A session
is therefore two random halves: the *cookie* (HttpOnly, SameSite=Strict), and the *key*, which the
login answers in its body; the dashboard keeps it in localStorage, which belongs to one origin
(scheme, host and port), and sends it as the `X-Corral-Session` header. The server accepts the
session only with both, and keeps only the SHA-256 of the pair. Neither half is an API token:
a session is made from one, lives at most `session_hours` (never past its token), and ends when
its user logs out or its token is revoked.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from corral.core.units.iso_times import iso_utc

SESSION_COOKIE = "corral_session"
SESSION_HEADER = "x-corral-session"  # as ASGI names headers: lower case
COOKIE_PREFIX = "corral-session_"
KEY_PREFIX = "corral-session-key_"
DEFAULT_SESSION_HOURS = 8.0
MAX_SESSION_HOURS = 7 * 24.0


def new_session_secrets() -> tuple[str, str]:
    """A fresh session's cookie and key: each a recognisable prefix and 256 random bits."""
    return COOKIE_PREFIX + secrets.token_urlsafe(32), KEY_PREFIX + secrets.token_urlsafe(32)


def hash_session(cookie: str, key: str) -> str:
    """The hex SHA-256 of a session's two halves: what the database keeps and looks sessions up by.

    One hash of the pair, so that neither half alone finds (or even narrows) anything; a fast
    hash suffices for 512 random bits (see `corral.core.access.tokens.hash_secret`).
    """
    return hashlib.sha256(f"{cookie}\n{key}".encode("utf-8")).hexdigest()


def looks_like_session_part(text: str) -> bool:
    """Whether `text` is (or starts like) one half of a dashboard session, for a helpful refusal."""
    return text.startswith((COOKIE_PREFIX, KEY_PREFIX))


def session_expiry(now: float, token_expires: float, hours: float) -> float:
    """When a session opened at `now` ends: after `hours`, and never after the token it was made from."""
    return min(now + hours * 3600.0, token_expires)


@dataclass(frozen=True, slots=True)
class DashboardSession:
    """A session as the server keeps it: whose, what it may do, from which token, and when it ends."""

    id: int
    user: str
    scope: str
    """The login token's scope when the session was made (capped by what its user may hold), never more."""
    token_id: int
    created: float
    expires: float
    ended: float | None
    """When its user logged out; None while it runs."""

    def to_dict(self) -> dict[str, object]:
        """The record for an API answer, times in ISO 8601 UTC; never a secret."""
        return {"user": self.user, "scope": self.scope, "token_id": self.token_id, "created": iso_utc(self.created),
                "expires": iso_utc(self.expires)}
