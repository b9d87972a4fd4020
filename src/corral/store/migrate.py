"""Bring a database to the newest schema with Alembic (run by `corral up`)."""

from __future__ import annotations

import os

from sqlalchemy import Engine

MIGRATIONS_DIR = os.path.join(os.path.dirname(__file__), "migrations")


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", MIGRATIONS_DIR)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
