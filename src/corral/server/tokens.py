"""API tokens on a caller's behalf: make one (its secret returned once), list them, revoke one.

Who may do what is decided by `corral.core.access.tokens`; the records are `TokenStore`'s. Every method is blocking
(one transaction): the API calls them off the event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from corral.core.access.identity import AccessPolicy, Caller
from corral.core.access.tokens import (
    DEFAULT_EXPIRY, DEFAULT_NAME, ApiToken, authorize_create, authorize_revoke, check_name, check_token_scope,
    check_user, parse_expiry,
)
from corral.errors import Forbidden, InvalidRequest
from corral.store.tokens import TokenStore

TOKEN_FIELDS = ("name", "scope", "expires", "user")


class TokenService:
    def __init__(self, store: TokenStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        # Run after a token is made or revoked: whoever caches credentials (the API's authentication) forgets them.
        self.on_change: list[Callable[[], None]] = []

    def lookup(self, secret: str, now: float) -> ApiToken | None:
        """The live token whose secret this is; None if unknown, revoked or expired."""
        return self.store.lookup(secret, now)

    def create(self, policy: AccessPolicy, caller: Caller, body: Mapping[str, Any]) -> dict[str, object]:
        """Make the token `body` asks for (`name`, `scope`, `expires`, `user`); its record with its secret (`token`).

        Raises:
            InvalidRequest: an unknown field or a bad value, named. Forbidden: the caller may not make it.
        """
        for key in body:
            if key not in TOKEN_FIELDS:
                raise InvalidRequest(key, "unknown field", f"a token takes {', '.join(TOKEN_FIELDS)}")
        now = self.clock()
        name = check_name(body.get("name", DEFAULT_NAME))
        scope = check_token_scope(body.get("scope", "submit"))
        expires = parse_expiry(body.get("expires", DEFAULT_EXPIRY), now)
        user = check_user(body.get("user", caller.user))
        authorize_create(policy, caller, user, scope)
        token, secret = self.store.create(user, name, scope, expires, caller.user, now)
        self._changed()
        return {**token.to_dict(now), "token": secret}

    def list(self, caller: Caller, every_user: bool) -> dict[str, object]:
        """The caller's tokens, newest first (every user's with `every_user`, for admins).

        Raises:
            Forbidden: `every_user` without admin scope.
        """
        if every_user and not caller.is_admin:
            raise Forbidden(f"listing every user's tokens needs admin scope; this credential ({caller.via}) "
                            f"has {caller.scope}")
        tokens = self.store.list(None if every_user else caller.user)
        now = self.clock()
        return {"tokens": [t.to_dict(now) for t in tokens]}

    def revoke(self, policy: AccessPolicy, caller: Caller, token_id: int) -> dict[str, object]:
        """Revoke a token (it stops working at once); its record.

        Raises:
            NotFound: no such token. Forbidden: the caller may not revoke it.
        """
        authorize_revoke(policy, caller, self.store.get(token_id))
        now = self.clock()
        token = self.store.revoke(token_id, now)
        self._changed()
        return token.to_dict(now)

    def _changed(self) -> None:
        for forget in self.on_change:
            forget()
