"""The monitoring tables: migrations that build exactly the declared schema; thinning that keeps extremes."""

from __future__ import annotations

import math

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import select

from corral.errors import NotFound
from corral.store import migrate
from corral.store.db import open_engine
from corral.store.monitoring import thin_extremes
from corral.store.schema import metadata, metric_series


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_migrations_build_exactly_the_declared_tables(db, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'c.db'}" if db == "sqlite" else request.getfixturevalue("pg_schema_url")
    engine = open_engine(url)
    migrate.upgrade(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    engine.dispose()
    assert diff == []


def test_a_series_remembers_where_it_first_went_nan(tmp_path):
    from corral.core.tracking.metrics_batch import parse_metrics_batch
    from corral.core.tracking.run_requests import parse_run_request
    from corral.store.runs import RunStore

    engine = open_engine(f"sqlite:///{tmp_path / 'c.db'}")
    migrate.upgrade(engine)
    store = RunStore(engine)
    with engine.begin() as conn:
        run_id, _ = store.create(conn, parse_run_request({"project": "p"}), user="u", now=1.0, job=None)
        for steps, values in (([1, 2], [1.0, 0.5]), ([3, 4, 5], [0.4, math.inf, math.nan]), ([6], [math.nan])):
            batch = parse_metrics_batch({"metrics": [{"key": "loss", "steps": steps, "values": values}]}, 2.0)
            store.append(conn, run_id, batch)
        first = conn.execute(select(metric_series.c.first_nonfinite_step)).scalar_one()
    assert first == 4  # the first bad step, not a later one
    engine.dispose()


def test_thinning_keeps_each_buckets_low_and_high():
    points = [(float(t), 50.0) for t in range(10_000)]
    points[1234] = (1234.0, 0.0)  # a dip
    points[8765] = (8765.0, 100.0)  # a spike
    thinned = thin_extremes(points, 100)
    assert len(thinned) <= 100
    assert (1234.0, 0.0) in thinned and (8765.0, 100.0) in thinned
    assert [t for t, _ in thinned] == sorted(t for t, _ in thinned)
    assert thin_extremes(points[:50], 100) == points[:50]


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_the_sql_summary_of_samples_agrees_with_the_reference(db, tmp_path, request):
    from corral.core.monitoring.samples import summarize
    from corral.store.monitoring import MonitorStore

    url = f"sqlite:///{tmp_path / 'c.db'}" if db == "sqlite" else request.getfixturevalue("pg_schema_url")
    engine = open_engine(url)
    migrate.upgrade(engine)
    rows = [{"job_id": 7, "time": 1000.0 + 10 * i, "gpu_utilization": None if i == 3 else float(i * 11 % 100),
             "gpu_memory_mb": 1000.0 + i, "gpu_power_w": 300.0 + i, "gpu_temperature_c": 60.0,
             "cpu_utilization": 50.0 + i, "cpu_time_s": 2.5 * i, "rss_mb": 100.0 + (i % 4) * 10,
             "read_mb_s": 0.0, "write_mb_s": 0.0, "processes": 2} for i in range(12)]
    store = MonitorStore()
    with engine.begin() as conn:
        store.add_samples(conn, rows + [{**rows[0], "job_id": 8, "rss_mb": 10**6}])  # another job's: left out
        summary = store.sample_summary(conn, 7)
        assert store.sample_summary(conn, 99) is None
    engine.dispose()
    expected = summarize(rows)
    for field in expected.__dataclass_fields__:
        assert getattr(summary, field) == pytest.approx(getattr(expected, field)), field


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_a_rule_names_only_channels_shared_with_its_owner(db, tmp_path, request):
    from corral.errors import Forbidden
    from corral.store.monitoring import MonitorStore

    url = f"sqlite:///{tmp_path / 'c.db'}" if db == "sqlite" else request.getfixturevalue("pg_schema_url")
    engine = open_engine(url)
    migrate.upgrade(engine)
    store = MonitorStore()

    def rule(name: str, owner: str) -> dict:
        return {"name": name, "severity": "warning", "condition": "state == FAILED", "message": "", "scope_job": None,
                "scope_label": None, "scope_user": owner, "channels": ["pager"], "owner": owner, "created": 1.0}

    with engine.begin() as conn:
        store.put_channel(conn, "pager", "command", {"argv": ["/bin/true"]}, 1.0, owner="root")
        with pytest.raises(Forbidden, match="'pager' is not shared with alice: an admin must share it"):
            store.add_rule(conn, rule("a", "alice"), admin=False)
        store.add_rule(conn, rule("root", "root"), admin=True)
        store.share_channel(conn, "pager", ["alice"])
        store.put_channel(conn, "pager", "command", {"argv": ["/bin/false"]}, 2.0)  # replaced: still shared
        store.add_rule(conn, rule("a", "alice"), admin=False)
        with pytest.raises(Forbidden):
            store.add_rule(conn, rule("b", "bob"), admin=False)
        store.share_channel(conn, "pager", ["*"])
        store.add_rule(conn, rule("b", "bob"), admin=False)
        (channel,) = store.channels(conn)
        assert (channel["owner"], channel["shared_with"], channel["config"]) == ("root", ["*"], {"argv": ["/bin/false"]})
        store.share_channel(conn, "pager", None)
        assert store.channels(conn)[0]["shared_with"] is None
        with pytest.raises(NotFound):
            store.share_channel(conn, "nope", ["alice"])
    engine.dispose()
