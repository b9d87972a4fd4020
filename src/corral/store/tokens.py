"""Reading and writing API tokens: only their hashes are kept. Every method is one transaction."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, RowMapping, insert, select, update

from corral.core.access.tokens import ApiToken, check_name, check_token_scope, hash_secret, new_secret
from corral.errors import NotFound
from corral.store.schema import api_tokens

_RECORD = (api_tokens.c.id, api_tokens.c.user, api_tokens.c.name, api_tokens.c.scope, api_tokens.c.created,
           api_tokens.c.expires, api_tokens.c.revoked, api_tokens.c.created_by)


class TokenStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(self, user: str, name: str, scope: str, expires: float, created_by: str,
               now: float) -> tuple[ApiToken, str]:
        """Make a token for `user`; returns its record and its secret, which nothing keeps.

        Raises:
            InvalidRequest: a bad name or scope.
        """
        check_name(name)
        check_token_scope(scope)
        secret = new_secret()
        row = {"user": user, "name": name, "scope": scope, "secret_hash": hash_secret(secret), "created": now,
               "expires": expires, "revoked": None, "created_by": created_by}
        with self.engine.begin() as conn:
            token_id = int(conn.execute(insert(api_tokens).values(row).returning(api_tokens.c.id)).scalar_one())
        return _record({"id": token_id, **row}), secret

    def lookup(self, secret: str, now: float) -> ApiToken | None:
        """The token this secret is, if it is known, not revoked and not expired at `now`."""
        query = select(*_RECORD).where(api_tokens.c.secret_hash == hash_secret(secret), api_tokens.c.revoked.is_(None),
                                       api_tokens.c.expires > now)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else _record(row._mapping)

    def get(self, token_id: int) -> ApiToken:
        """Raises NotFound for an unknown id."""
        with self.engine.connect() as conn:
            row = conn.execute(select(*_RECORD).where(api_tokens.c.id == token_id)).first()
        if row is None:
            raise NotFound(f"no API token {token_id}; `corral token list` shows yours")
        return _record(row._mapping)

    def list(self, user: str | None = None) -> list[ApiToken]:
        """One user's tokens (None: everybody's), newest first, revoked and expired ones included."""
        query = select(*_RECORD)
        if user is not None:
            query = query.where(api_tokens.c.user == user)
        with self.engine.connect() as conn:
            return [_record(r._mapping) for r in conn.execute(query.order_by(api_tokens.c.id.desc()))]

    def revoke(self, token_id: int, now: float) -> ApiToken:
        """Revoke a token from `now` on; revoking it again keeps the first time.

        Raises:
            NotFound: no token has this id.
        """
        with self.engine.begin() as conn:
            conn.execute(update(api_tokens).where(api_tokens.c.id == token_id, api_tokens.c.revoked.is_(None))
                         .values(revoked=now))
            row = conn.execute(select(*_RECORD).where(api_tokens.c.id == token_id)).first()
        if row is None:
            raise NotFound(f"no API token {token_id}; `corral token list` shows yours")
        return _record(row._mapping)


def _record(row: RowMapping | dict[str, Any]) -> ApiToken:
    return ApiToken(id=int(row["id"]), user=row["user"], name=row["name"], scope=row["scope"],
                    created=float(row["created"]), expires=float(row["expires"]),
                    revoked=None if row["revoked"] is None else float(row["revoked"]), created_by=row["created_by"])
