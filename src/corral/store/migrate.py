"""Bring a database to the newest schema (run by `corral up`).

A new, empty database gets the tables of `schema.py` at once, stamped with the newest revision; one at the
newest revision is left as it is; any other is migrated by Alembic. Importing Alembic and replaying every
revision is most of a server's start-up otherwise. `tests/store/test_fresh_schema.py` holds the two ways to
the same schema.
"""

from __future__ import annotations

import os

from sqlalchemy import Column, Connection, Engine, MetaData, PrimaryKeyConstraint, String, Table, inspect

MIGRATIONS_DIR = os.path.join(os.path.dirname(__file__), "migrations")
HEAD = "0027"
"""The newest revision under migrations/versions: a new revision changes it (a test checks that it is)."""

# Alembic's own bookkeeping table, as Alembic makes it.
_versions = Table("alembic_version", MetaData(), Column("version_num", String(32), nullable=False),
                  PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate to `revision`.

    On SQLite, foreign keys are off while migrating: a revision that rebuilds a table (SQLite's only
    way to drop a constraint) drops the old one, which with them on would delete every row that
    refers to it (a run's metrics, tags and artifacts). They are checked once the work is done.
    """
    if revision in ("head", HEAD) and _made_at_head(engine):
        return
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", MIGRATIONS_DIR)
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as connection:
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")  # outside a transaction, or it is ignored
            connection.commit()
        try:
            with connection.begin():
                config.attributes["connection"] = connection
                command.upgrade(config, revision)
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise RuntimeError(f"the migration left rows that refer to nothing: {broken[:5]}")
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()


def _made_at_head(engine: Engine) -> bool:
    """True when the database is at HEAD already, or was empty and now holds the newest tables."""
    from corral.store.schema import metadata

    with engine.connect() as connection, connection.begin():
        tables = inspect(connection).get_table_names()
        if not tables:
            metadata.create_all(connection)
            _versions.create(connection)
            connection.execute(_versions.insert().values(version_num=HEAD))
            return True
        return "alembic_version" in tables and _version(connection) == HEAD


def _version(connection: Connection) -> str | None:
    return connection.execute(_versions.select()).scalar()
