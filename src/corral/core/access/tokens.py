"""API tokens as data: their secrets, how they are hashed, named and expire, and their record (pure).

A token is `corral_` followed by 43 URL-safe characters (256 random bits). The server
keeps only its SHA-256, so a stolen database holds nothing that can call the API.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from corral.core.access.identity import SCOPES, AccessPolicy, Caller, check_scope, scope_covers
from corral.core.units.iso_times import iso_utc
from corral.errors import Forbidden, InvalidRequest

TOKEN_PREFIX = "corral_"
_TOKEN = re.compile(r"corral_[A-Za-z0-9_-]{43}")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_EXPIRY = re.compile(r"\s*([0-9]{1,6})\s*(m|h|d|w)\s*")
_SECONDS_PER_UNIT = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_NEVER = ("never", "none", "unlimited", "infinite", "inf", "0")
MAX_LIFETIME_S = 365 * 86400
DEFAULT_EXPIRY = "30d"
DEFAULT_NAME = "token"


def new_secret() -> str:
    """A fresh token: the prefix (so secret scanners and people can tell what it is) and 256 random bits."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def looks_like_token(text: str) -> bool:
    """Whether `text` has a token's shape (checked before any database lookup)."""
    return bool(_TOKEN.fullmatch(text))


def hash_secret(token: str) -> str:
    """The hex SHA-256 of a token: what the database keeps and looks tokens up by.

    A fast hash is right here, as it is for GitHub's tokens: a slow, salted hash (bcrypt,
    argon2) protects passwords, which people choose from a small space an attacker can
    enumerate. A token is 256 random bits, so no amount of hashing speed makes guessing
    feasible, and an unsalted hash lets a request find its token by one indexed lookup.
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_name(name: object) -> str:
    """A token's name: 1 to 64 letters, digits, '-', '_' and '.'.

    Raises:
        InvalidRequest: naming the field and what a name may hold.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidRequest("name", f"{name!r} is not a token name",
                             "use 1 to 64 letters, digits, '-', '_' and '.', e.g. laptop-sdk")
    return name


def check_token_scope(scope: object) -> str:
    """A token's scope: read, submit or admin.

    Raises:
        InvalidRequest: naming the field and the scopes.
    """
    if not isinstance(scope, str):  # a JSON list or object is not even comparable to a scope's name
        raise InvalidRequest("scope", f"must be a string, got {type(scope).__name__}", f"use one of {', '.join(SCOPES)}")
    return check_scope(scope)


def parse_expiry(text: object, now: float) -> float:
    """When a token made at `now` expires, from a lifetime such as `90m`, `12h`, `30d` or `8w`.

    Every token expires, within 365 days: a leaked one stops working on its own.

    Raises:
        InvalidRequest: on field "expires", with the forms that are understood.
    """
    if not isinstance(text, str):
        raise InvalidRequest("expires", f"must be a lifetime such as \"30d\", got {text!r}",
                             "write minutes, hours, days or weeks: 90m, 12h, 30d, 8w")
    if text.strip().lower() in _NEVER:
        raise InvalidRequest("expires", f"{text!r}: every token expires",
                             "give a lifetime of at most 365d, and make a new token when it runs out")
    match = _EXPIRY.fullmatch(text)
    if not match:
        raise InvalidRequest("expires", f"cannot read {text!r} as a lifetime",
                             "write minutes, hours, days or weeks: 90m, 12h, 30d, 8w")
    seconds = int(match.group(1)) * _SECONDS_PER_UNIT[match.group(2)]
    if seconds <= 0:
        raise InvalidRequest("expires", f"{text!r} is no time at all", "give a lifetime such as 30d")
    if seconds > MAX_LIFETIME_S:
        raise InvalidRequest("expires", f"{text!r} is longer than a token may live",
                             "at most 365d; make a new token when it runs out")
    return now + seconds


@dataclass(frozen=True, slots=True)
class ApiToken:
    """A token as the server keeps it: who it speaks for and what it may do, never its secret."""

    id: int
    user: str
    name: str
    scope: str
    created: float
    expires: float
    revoked: float | None
    created_by: str

    def state(self, now: float) -> str:
        """active, expired or revoked (revoked wins: it was a decision, expiry only time)."""
        if self.revoked is not None:
            return "revoked"
        return "active" if now < self.expires else "expired"

    def to_dict(self, now: float | None = None) -> dict[str, object]:
        """The record for an API answer, times in ISO 8601 UTC; with `now`, its state too."""
        out: dict[str, object] = {
            "id": self.id, "user": self.user, "name": self.name, "scope": self.scope, "created": iso_utc(self.created),
            "expires": iso_utc(self.expires), "revoked": iso_utc(self.revoked), "created_by": self.created_by,
        }
        if now is not None:
            out["state"] = self.state(now)
        return out


def check_user(user: object) -> str:
    """A user name a token may speak for (a Unix login's characters, at most 64).

    Raises:
        InvalidRequest: naming the field.
    """
    if not isinstance(user, str) or not _USER.fullmatch(user):
        raise InvalidRequest("user", f"{user!r} is not a user name", "give a login name such as alice")
    return user


def authorize_create(policy: AccessPolicy, caller: Caller, user: str, scope: str) -> None:
    """Whether `caller` may make a token with `scope` for `user`.

    A token never grants more than the credential that made it, nor more than its user
    could have at the machine itself; read-only credentials make none.

    Raises:
        Forbidden: saying which rule refused, and what would be allowed.
    """
    policy.require(caller, "submit", "creating an API token")
    if caller.via in ("token", "session") and not caller.is_admin:
        # else a leaked token could mint itself successors that outlive its revocation
        raise Forbidden("tokens are made on the server's machine (`corral token create` there), or by an admin; "
                        "not with another token")
    if user != caller.user and not caller.is_admin:
        raise Forbidden(f"creating a token for {user} needs admin scope; you are {caller.user} ({caller.scope})")
    if not scope_covers(caller.scope, scope):
        raise Forbidden(f"a {scope} token cannot be made with a {caller.scope} credential ({caller.via}); "
                        f"ask for scope {caller.scope} or lower")
    most = policy.scope_of(user)
    if not scope_covers(most, scope):
        raise Forbidden(f"{user} may hold at most {most} scope, so a {scope} token cannot be made for them")


def authorize_revoke(policy: AccessPolicy, caller: Caller, token: ApiToken) -> None:
    """Whether `caller` may revoke `token`: its owner (with submit scope) or an admin; any token itself.

    Raises:
        Forbidden: someone else's token, or a read-only credential.
    """
    if caller.token_id == token.id or caller.is_admin:
        return  # a token may always give itself up: that only ever takes access away
    if token.user != caller.user:
        raise Forbidden(f"token {token.id} is {token.user}'s; only its owner or an admin may revoke it")
    policy.require(caller, "submit", "revoking an API token")
