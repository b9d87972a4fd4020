"""Reading and writing the dashboard's sessions: only the hash of their two halves is kept. Each method is one transaction."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, RowMapping, delete, insert, or_, select, update

from corral.core.access.sessions import DashboardSession, hash_session, new_session_secrets
from corral.store.schema import api_tokens, dashboard_sessions

_RECORD = (dashboard_sessions.c.id, dashboard_sessions.c.user, dashboard_sessions.c.scope, dashboard_sessions.c.token_id,
           dashboard_sessions.c.created, dashboard_sessions.c.expires, dashboard_sessions.c.ended)
KEEP_DEAD_S = 86400.0  # an ended or expired session's row is kept a day, then pruned by the next login


class SessionStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(self, user: str, scope: str, token_id: int, expires: float, now: float) -> tuple[DashboardSession, str, str]:
        """Open a session made from token `token_id`; returns its record, its cookie and its key, which nothing keeps.

        Rows of sessions dead for over a day go at the same time, so logins never grow the table without bound.
        """
        cookie, key = new_session_secrets()
        row = {"user": user, "scope": scope, "token_id": token_id, "secret_hash": hash_session(cookie, key),
               "created": now, "expires": expires, "ended": None}
        with self.engine.begin() as conn:
            dead = now - KEEP_DEAD_S
            conn.execute(delete(dashboard_sessions).where(
                or_(dashboard_sessions.c.expires < dead, dashboard_sessions.c.ended < dead)))
            session_id = int(conn.execute(insert(dashboard_sessions).values(row)
                                          .returning(dashboard_sessions.c.id)).scalar_one())
        return _record({"id": session_id, **row}), cookie, key

    def lookup(self, cookie: str, key: str, now: float) -> DashboardSession | None:
        """The session these halves open, if it has not ended or expired at `now` and its token is still live."""
        query = (select(*_RECORD).join(api_tokens, api_tokens.c.id == dashboard_sessions.c.token_id)
                 .where(dashboard_sessions.c.secret_hash == hash_session(cookie, key),
                        dashboard_sessions.c.ended.is_(None), dashboard_sessions.c.expires > now,
                        api_tokens.c.revoked.is_(None), api_tokens.c.expires > now))
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else _record(row._mapping)

    def end(self, cookie: str, key: str, now: float) -> bool:
        """Log a session out from `now` on; whether one was running (ending it again changes nothing)."""
        with self.engine.begin() as conn:
            result = conn.execute(update(dashboard_sessions)
                                  .where(dashboard_sessions.c.secret_hash == hash_session(cookie, key),
                                         dashboard_sessions.c.ended.is_(None))
                                  .values(ended=now))
        return result.rowcount > 0


def _record(row: RowMapping | dict[str, Any]) -> DashboardSession:
    return DashboardSession(id=int(row["id"]), user=row["user"], scope=row["scope"], token_id=int(row["token_id"]),
                            created=float(row["created"]), expires=float(row["expires"]),
                            ended=None if row["ended"] is None else float(row["ended"]))
