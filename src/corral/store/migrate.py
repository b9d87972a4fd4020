"""Bring a database to the newest schema with Alembic (run by `corral up`)."""

from __future__ import annotations

import os

from sqlalchemy import Engine

MIGRATIONS_DIR = os.path.join(os.path.dirname(__file__), "migrations")


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate to `revision`.

    On SQLite, foreign keys are off while migrating: a revision that rebuilds a table (SQLite's only
    way to drop a constraint) drops the old one, which with them on would delete every row that
    refers to it (a run's metrics, tags and artifacts). They are checked once the work is done.
    """
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
