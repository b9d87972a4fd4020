"""A new database is made from the tables at once (no Alembic), and must come out exactly as the migrations make it."""

from __future__ import annotations

import os
from typing import Any

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text

from corral.store import migrate
from corral.store.db import database_url, open_engine


@pytest.fixture(params=["sqlite", "postgresql"])
def two_engines(request: pytest.FixtureRequest, tmp_path) -> tuple[Engine, Engine]:
    if request.param == "sqlite":
        urls = [None, None]
    else:
        urls = [request.getfixturevalue("pg_schema_url"), request.getfixturevalue("second_pg_schema_url")]
    engines = []
    for home, url in zip((tmp_path / "a", tmp_path / "b"), urls):
        home.mkdir()
        engines.append(open_engine(database_url(url, str(home))))
    return engines[0], engines[1]


@pytest.fixture
def second_pg_schema_url(pg_schema_url) -> Any:
    from tests.conftest import _fresh_pg_schema

    with _fresh_pg_schema() as url:
        yield url


def _migrated(engine: Engine) -> None:
    """Every revision in turn, as a database made by an older release gets them."""
    for revision in _revisions():
        migrate.upgrade(engine, revision)


def _revisions() -> list[str]:
    config = Config()
    config.set_main_option("script_location", migrate.MIGRATIONS_DIR)
    return [s.revision for s in reversed(list(ScriptDirectory.from_config(config).walk_revisions()))]


def describe(engine: Engine) -> dict[str, Any]:
    """The schema as the database reports it: what a query, a constraint or a write could notice."""
    insp = inspect(engine)
    tables: dict[str, Any] = {}
    for name in sorted(insp.get_table_names()):
        columns = [(c["name"], str(c["type"]), c["nullable"], _default(c.get("default")))
                   for c in insp.get_columns(name)]
        tables[name] = {
            "columns": sorted(columns),
            "primary_key": insp.get_pk_constraint(name)["constrained_columns"],
            "foreign_keys": sorted((tuple(fk["constrained_columns"]), fk["referred_table"],
                                    tuple(fk["referred_columns"]), (fk.get("options") or {}).get("ondelete"))
                                   for fk in insp.get_foreign_keys(name)),
            "indexes": sorted((ix["name"], tuple(ix["column_names"]), bool(ix["unique"])) for ix in insp.get_indexes(name)),
            "unique": sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(name)),
        }
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            rows = conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'table'")).fetchall()
            tables["(autoincrement)"] = sorted(n for n, sql in rows if sql and "AUTOINCREMENT" in sql.upper())
        else:
            rows = conn.execute(text(
                "SELECT c.relname, a.attname, a.attstorage FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                "WHERE c.relnamespace = to_regnamespace(current_schema()) AND c.relkind = 'r' AND a.attnum > 0 "
                "AND NOT a.attisdropped")).fetchall()
            tables["(storage)"] = sorted(tuple(r) for r in rows)
        tables["(version)"] = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return tables


def _default(value: str | None) -> str | None:
    return None if value is None else value.strip("'\"()")


def test_a_new_database_has_exactly_the_schema_the_migrations_give(two_engines):
    fresh, migrated = two_engines
    migrate.upgrade(fresh)
    _migrated(migrated)
    assert describe(fresh) == describe(migrated)


def test_head_is_the_newest_revision():
    assert migrate.HEAD == _revisions()[-1]


def test_a_database_at_head_is_left_alone_and_one_behind_is_migrated(tmp_path):
    engine = open_engine(database_url(None, str(tmp_path)))
    migrate.upgrade(engine, _revisions()[-2])
    migrate.upgrade(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == migrate.HEAD
    before = os.stat(tmp_path / "corral.db").st_mtime_ns
    migrate.upgrade(engine)
    assert os.stat(tmp_path / "corral.db").st_mtime_ns == before
