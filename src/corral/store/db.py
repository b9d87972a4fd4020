"""Opening the database: SQLite in the home (WAL) or PostgreSQL by URL."""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import CursorResult, Engine, create_engine, event

from corral.errors import InvalidRequest
from corral.home import HomeLayout


def database_url(db: str | None, home: str) -> str:
    """The SQLAlchemy URL for `--db` (None: SQLite in the home); bare postgresql:// uses psycopg 3."""
    if not db:
        return "sqlite:///" + HomeLayout(os.path.abspath(home)).database
    for prefix in ("postgresql://", "postgres://"):
        if db.startswith(prefix):
            return "postgresql+psycopg://" + db[len(prefix):]
    if db.startswith(("sqlite:", "postgresql+")):
        return db
    raise InvalidRequest("db", f"unsupported database URL {db!r}", "use postgresql://user@host/dbname, or omit --db for SQLite")


def open_engine(url: str) -> Engine:
    """An engine with corral's settings: for SQLite, WAL and a full sync on commit."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit the API has acknowledged survives a power cut, not only a crash.
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5)


def inserted_id(result: CursorResult[Any]) -> int:
    """The primary key an INSERT of one row made."""
    key = result.inserted_primary_key
    if key is None:  # an executemany, or a table without a primary key: a mistake in the caller
        raise TypeError("inserted_id takes the result of an INSERT of one row")
    return int(key[0])
