"""The run store (runs, metric series in chunks, artifacts) against real SQLite and PostgreSQL."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, text

from corral.core.tracking import metric_series as S
from corral.core.tracking.metrics_batch import MetricsBatch
from corral.core.tracking.run_filters import parse_filter
from corral.core.tracking.run_requests import parse_artifacts, parse_run_request
from corral.errors import NotFound
from corral.store import migrate
from corral.store import run_metrics
from corral.store.db import database_url, open_engine
from corral.store.runs import RunStore
from corral.store.schema import metric_chunks, runs

NOW = 1_700_000_000.0


@pytest.fixture
def store(db_url, tmp_path):
    engine = open_engine(database_url(db_url, str(tmp_path)))
    migrate.upgrade(engine)
    yield RunStore(engine)
    engine.dispose()


# -- helpers ------------------------------------------------------------------------------------------


def create(store: RunStore, *, job: dict[str, Any] | None = None, now: float = NOW, **fields: Any) -> tuple[int, bool]:
    with store.engine.begin() as conn:
        return store.create(conn, parse_run_request(fields), user="alice", now=now, job=job)


def get(store: RunStore, run_id: int) -> dict[str, Any]:
    with store.engine.connect() as conn:
        return store.get(conn, run_id)


def points(steps, values, times=None) -> S.Points:
    steps = np.asarray(steps, np.int64)
    times = np.asarray(times if times is not None else NOW + steps / 1000.0, np.float64)
    return S.Points(steps, np.asarray(values, np.float64), times)


def append(store: RunStore, run_id: int, series: dict[str, S.Points], batch_id: str | None = None):
    with store.engine.begin() as conn:
        return store.append(conn, run_id, MetricsBatch(batch_id, series))


def read(store: RunStore, run_id: int, key: str, *, start=None, end=None, max_points=100_000):
    with store.engine.connect() as conn:
        return store.series(conn, run_id, key, start=start, end=end, max_points=max_points)


def chunks(store: RunStore, run_id: int, key: str) -> list[Any]:
    c = metric_chunks.c
    with store.engine.connect() as conn:
        return list(conn.execute(select(c.first_step, c.last_step, c.count).where(c.run_id == run_id, c.key == key)
                                 .order_by(c.first_step)))


def search_ids(store: RunStore, *where: str, **kwargs: Any) -> list[int]:
    with store.engine.connect() as conn:
        return [r["id"] for r in store.search(conn, filters=[parse_filter(w) for w in where], **kwargs)]


def same_value(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


# -- runs -------------------------------------------------------------------------------------------


def test_a_new_run_gets_defaults_and_a_16_hex_uid(store):
    run_id, resumed = create(store, config={"lr": 0.1}, tags=["a", "b"])
    run = get(store, run_id)
    assert not resumed
    assert len(run["uid"]) == 16 and int(run["uid"], 16) >= 0
    assert (run["project"], run["user"], run["state"]) == ("default", "alice", "running")
    assert re.fullmatch(r"[a-z]+-[a-z]+-\d+", run["name"])  # readable: nothing in its config sets it apart yet
    assert (run["notes"], run["archived"]) == (None, False)
    assert run["config"] == {"lr": 0.1} and run["tags"] == ["a", "b"]
    assert run["start_time"] == NOW and run["end_time"] is None
    assert run["metrics"] == {} and run["last_step"] is None


def test_create_with_a_known_uid_returns_that_run_as_is(store):
    first, _ = create(store, uid="run-1", project="p", config={"lr": 0.1})
    with store.engine.begin() as conn:
        store.finish(conn, first, "finished", NOW + 10)
    again, existed = create(store, uid="run-1", project="other", config={"lr": 9})
    assert again == first and existed
    run = get(store, first)
    assert (run["state"], run["project"], run["config"], run["end_time"]) == ("finished", "p", {"lr": 0.1}, NOW + 10)
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(runs)).scalar() == 1


def test_create_with_a_known_resume_key_sets_the_run_running_again(store):
    key = "job:12:mnist:lr-0.1:0"
    first, _ = create(store, uid="attempt-1", resume_key=key, project="mnist")
    append(store, first, {"loss": points([0, 1, 2], [3.0, 2.0, 1.0])})
    with store.engine.begin() as conn:
        store.finish(conn, first, "crashed", NOW + 5)
    again, resumed = create(store, uid="attempt-2", resume_key=key, project="mnist")
    assert again == first and resumed
    run = get(store, first)
    assert run["state"] == "running" and run["end_time"] is None and run["uid"] == "attempt-1"
    assert run["metrics"]["loss"]["last_step"] == 2  # what a requeued job continues from


def test_a_job_fills_user_node_and_gpu_type_unless_given(store):
    job = {"user": "bob", "node": "gpu01", "gpu_type": "A100"}
    filled, _ = create(store, job_id=12, job=job)
    given_, _ = create(store, job_id=12, node="gpu99", gpu_type="H100", job=job)
    assert {k: get(store, filled)[k] for k in ("user", "node", "gpu_type", "job_id")} == \
        {"user": "bob", "node": "gpu01", "gpu_type": "A100", "job_id": 12}
    assert (get(store, given_)["node"], get(store, given_)["gpu_type"]) == ("gpu99", "H100")


def test_params_merge_shallowly_and_tags_change(store):
    run_id, _ = create(store, config={"lr": 0.1, "model": {"depth": 4, "act": "gelu"}}, tags=["a", "b"])
    with store.engine.begin() as conn:
        store.merge_params(conn, run_id, {"model": {"depth": 8}, "seed": 1})
        store.change_tags(conn, run_id, ["c", "a"], ["b"])
    run = get(store, run_id)
    assert run["config"] == {"lr": 0.1, "model": {"depth": 8}, "seed": 1}
    assert run["tags"] == ["a", "c"]
    assert search_ids(store, tag="c") == [run_id] and search_ids(store, tag="b") == []


def test_resolve_takes_an_id_or_a_uid_and_unknown_runs_are_not_found(store):
    run_id, _ = create(store, uid="my-run_1")
    with store.engine.begin() as conn:
        assert store.resolve(conn, str(run_id)) == run_id
        assert store.resolve(conn, "my-run_1") == run_id
        for ref in ("nope", "999999", str(2**40), "²", "٣", "9" * 5000):  # int("²") and 5,000 digits raise
            with pytest.raises(NotFound):
                store.resolve(conn, ref)
        with pytest.raises(NotFound):
            store.get(conn, 999999)
        with pytest.raises(NotFound):
            store.append(conn, 999999, MetricsBatch("b", {"x": points([0], [1.0])}))
        with pytest.raises(NotFound):
            store.finish(conn, 999999, "finished", NOW)


def test_a_job_that_ends_ends_only_its_runs_still_running(store):
    running, _ = create(store, job_id=5)
    done, _ = create(store, job_id=5)
    other, _ = create(store, job_id=6)
    with store.engine.begin() as conn:
        store.finish(conn, done, "finished", NOW + 1)
        assert store.end_job_runs(conn, 5, "crashed", NOW + 2) == [running]
    assert (get(store, running)["state"], get(store, running)["end_time"]) == ("crashed", NOW + 2)
    assert (get(store, done)["state"], get(store, done)["end_time"]) == ("finished", NOW + 1)
    assert get(store, other)["state"] == "running"


# -- appending ------------------------------------------------------------------------------------


def test_append_skips_steps_that_do_not_move_a_series_forward(store):
    run_id, _ = create(store)
    done = append(store, run_id, {"loss": points(range(10), np.arange(10.0)), "acc": points([0, 1], [0.1, 0.2])})
    assert (done.accepted, done.skipped, done.duplicate) == (12, 0, False)
    # a requeued job re-logs steps 5..14 with other values, and acc from its own start
    done = append(store, run_id, {"loss": points(range(5, 15), np.arange(5.0, 15.0) + 100),
                                  "acc": points([1, 2], [9.0, 0.3])})
    assert (done.accepted, done.skipped) == (6, 6)
    count, downsampled, loss = read(store, run_id, "loss")
    assert (count, downsampled) == (15, False)
    assert loss.steps.tolist() == list(range(15))
    assert loss.values.tolist() == list(range(10)) + [110.0, 111.0, 112.0, 113.0, 114.0]  # first write wins
    assert read(store, run_id, "acc")[2].values.tolist() == [0.1, 0.2, 0.3]
    # within one batch, a step lower than one before it is skipped too
    done = append(store, run_id, {"loss": points([20, 16, 21, 21, 22], [1, 2, 3, 4, 5])})
    assert (done.accepted, done.skipped) == (3, 2)
    assert read(store, run_id, "loss")[2].steps.tolist()[-3:] == [20, 21, 22]
    assert get(store, run_id)["metrics"]["loss"]["count"] == 18


def test_a_repeated_batch_id_applies_nothing(store):
    run_id, _ = create(store)
    other, _ = create(store)
    assert append(store, run_id, {"x": points([0, 1, 2], [1, 2, 3])}, "batch-1").accepted == 3
    again = append(store, run_id, {"x": points([3, 4], [4, 5])}, "batch-1")  # same id, other content: still a retry
    assert (again.accepted, again.skipped, again.duplicate) == (0, 0, True)
    assert read(store, run_id, "x")[0] == 3
    assert append(store, other, {"x": points([0], [1])}, "batch-1").accepted == 1  # ids are per run
    # a batch whose points were all skipped is still remembered
    assert append(store, run_id, {"x": points([1], [0])}, "batch-2").skipped == 1
    assert append(store, run_id, {"x": points([9], [0])}, "batch-2").duplicate
    # the same batch twice inside one transaction (one group commit)
    with store.engine.begin() as conn:
        first = store.append(conn, run_id, MetricsBatch("batch-3", {"x": points([10], [1])}))
        second = store.append(conn, run_id, MetricsBatch("batch-3", {"x": points([11], [1])}))
    assert first.accepted == 1 and second.duplicate
    assert read(store, run_id, "x")[2].steps.tolist() == [0, 1, 2, 10]


def _check_chunks(found: list[Any], total: int, target: int) -> None:
    assert sum(ch.count for ch in found) == total
    assert all(ch.count <= target for ch in found)
    for before, after in zip(found, found[1:]):
        assert before.last_step < after.first_step, "chunks must be in step order and never overlap"


def test_many_small_appends_end_in_few_chunks_and_read_back_exactly(store):
    run_id, _ = create(store)
    rng = np.random.default_rng(7)
    step, expected = 0, []
    for _ in range(400):
        n = int(rng.integers(1, 4))
        values = rng.normal(size=n)
        append(store, run_id, {"loss": points(range(step, step + n), values)})
        expected += list(zip(range(step, step + n), values.tolist()))
        step += n
    found = chunks(store, run_id, "loss")
    _check_chunks(found, len(expected), S.CHUNK_TARGET)
    assert len(found) <= 2 * math.ceil(math.log2(len(expected))) + 2, [ch.count for ch in found]
    count, downsampled, got = read(store, run_id, "loss")
    assert (count, downsampled) == (len(expected), False)
    assert list(zip(got.steps.tolist(), got.values.tolist())) == expected


def test_a_series_longer_than_a_chunk_is_split_at_the_chunk_target(store, monkeypatch):
    monkeypatch.setattr(S, "CHUNK_TARGET", 100)
    run_id, _ = create(store)
    sizes = [1, 250, 3, 3, 40, 90, 1, 1, 1, 500, 7] * 3
    step = 0
    for n in sizes:
        append(store, run_id, {"x": points(range(step, step + n), np.arange(step, step + n, dtype=float))})
        step += n
    found = chunks(store, run_id, "x")
    _check_chunks(found, step, 100)
    assert len(found) <= step // 100 + 2 * math.ceil(math.log2(100)) + 2
    count, _, got = read(store, run_id, "x")
    assert count == step and got.steps.tolist() == list(range(step)) and got.values.tolist() == list(range(step))


batches_st = st.lists(st.tuples(
    st.sampled_from(["a", "b", None]),  # batch id (repeats are retries)
    st.dictionaries(st.sampled_from(["loss", "acc"]), st.lists(st.integers(0, 40), max_size=12), max_size=2),
), min_size=1, max_size=8)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batches_st)
def test_stored_series_match_a_reference_model_of_increasing_steps_and_batch_ids(store, batches):
    """Whatever order steps and retries come in, every key holds each step once, in order, first write wins."""
    run_id, _ = create(store)
    model: dict[str, list[tuple[int, float]]] = {}
    seen: set[str] = set()
    for n, (batch_id, series) in enumerate(batches):
        batch = {key: points(steps, [n * 1000 + i for i in range(len(steps))]) for key, steps in series.items()}
        done = append(store, run_id, batch, batch_id)
        if batch_id in seen:
            assert done.duplicate and done.accepted == 0
            continue
        if batch_id is not None:
            seen.add(batch_id)
        accepted = 0
        for key, p in batch.items():
            stored = model.setdefault(key, [])
            for s, v in zip(p.steps.tolist(), p.values.tolist()):
                if not stored or s > stored[-1][0]:
                    stored.append((s, v))
                    accepted += 1
        assert (done.accepted, done.skipped) == (accepted, sum(len(p) for p in batch.values()) - accepted)
    run = get(store, run_id)
    for key, stored in model.items():
        if not stored:
            continue
        count, _, got = read(store, run_id, key)
        assert list(zip(got.steps.tolist(), got.values.tolist())) == stored
        assert run["metrics"][key]["count"] == count == len(stored)


# -- reading series -------------------------------------------------------------------------------


def test_summary_keeps_min_max_ignoring_non_finite_values_and_the_last_value(store):
    run_id, _ = create(store)
    append(store, run_id, {"loss": points([0, 1, 2, 3], [3.0, math.nan, 1.0, math.inf]), "acc": points([7], [0.5])})
    append(store, run_id, {"loss": points([4, 5, 6], [-math.inf, 2.0, math.nan])})
    loss = get(store, run_id)["metrics"]["loss"]
    assert loss | {"last_time": None} == {"count": 7, "first_step": 0, "last_step": 6, "last": "NaN", "last_time": None,
                                          "min": 1.0, "min_step": 2, "max": 3.0, "max_step": 0}
    assert loss["last_time"] == pytest.approx(NOW + 0.006)
    append(store, run_id, {"loss": points([7], [math.inf])})
    append(store, run_id, {"loss": points([8, 9], [0.5, -math.inf])})
    run = get(store, run_id)
    assert run["metrics"]["loss"]["last"] == "-Infinity"
    assert (run["metrics"]["loss"]["min"], run["metrics"]["loss"]["min_step"]) == (0.5, 8)
    assert run["last_step"] == 9
    append(store, run_id, {"loss": points([10], [math.inf])})
    assert get(store, run_id)["metrics"]["loss"]["last"] == "Infinity"
    # an all-NaN series has no min or max
    append(store, run_id, {"bad": points([0, 1], [math.nan, math.nan])})
    bad = get(store, run_id)["metrics"]["bad"]
    assert (bad["min"], bad["max"], bad["last"]) == (None, None, "NaN")


def test_reading_an_unknown_key_names_the_keys_the_run_has(store):
    run_id, _ = create(store)
    append(store, run_id, {"loss": points([0], [1.0]), "acc": points([0], [1.0])})
    with pytest.raises(NotFound, match="acc, loss"):
        read(store, run_id, "los")
    assert read(store, run_id, "loss", start=5) == (0, False, S.EMPTY)


def _spiky_values(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = np.cumsum(rng.normal(size=n))
    for i in rng.choice(n, size=n // 500 + 3, replace=False):
        values[i] = rng.choice([1e6, -1e6, math.nan, math.inf, -math.inf, 0.0])
    values[rng.choice(n, size=n // 50)] = math.nan
    return values


SIZES = [3000, 1, 1200, 5, 700, 4000, 2, 2, 2, 9000, 333, 1, 3755]  # 22,001 points in all


@pytest.fixture(params=["real", "small"])
def long_series(request, store, monkeypatch):
    """A run with one long series appended in batches of very different sizes; 'small' shrinks the chunk
    and summary sizes so that reads cross many chunk boundaries and both summary levels."""
    if request.param == "small":
        monkeypatch.setattr(S, "CHUNK_TARGET", 1024)
        monkeypatch.setattr(S, "LOD1", 4)
        monkeypatch.setattr(S, "LOD2", 64)
    run_id, _ = create(store)
    values = _spiky_values(sum(SIZES), seed=len(request.param))
    steps = np.cumsum(np.random.default_rng(3).integers(1, 5, size=len(values))) + 10
    at = 0
    for n in SIZES:
        append(store, run_id, {"loss": points(steps[at:at + n], values[at:at + n])})
        at += n
    assert len(chunks(store, run_id, "loss")) >= 3
    return store, run_id, points(steps, values)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), max_points=st.sampled_from([2, 3, 4, 5, 8, 20, 100, 2000]))
def test_series_reads_match_a_brute_force_reference(long_series, data, max_points):
    store, run_id, everything = long_series
    last = int(everything.steps[-1])
    start = data.draw(st.none() | st.integers(0, last + 5), label="start")
    end = data.draw(st.none() | st.integers(start or 0, last + 5), label="end")
    ref = everything.in_range(start, end)
    count, downsampled, got = read(store, run_id, "loss", start=start, end=end, max_points=max_points)
    assert count == len(ref)
    if len(ref) <= max_points:
        assert not downsampled
        assert got.steps.tolist() == ref.steps.tolist()
        assert got.values.tobytes() == ref.values.tobytes() and got.times.tolist() == ref.times.tolist()
        return
    assert downsampled and len(got) <= max_points
    assert (np.diff(got.steps) > 0).all()
    known = {int(s): (float(v), float(t)) for s, v, t in zip(ref.steps, ref.values, ref.times)}
    for s, v, t in zip(got.steps.tolist(), got.values.tolist(), got.times.tolist()):
        assert s in known and same_value(known[s][0], v) and known[s][1] == t, f"step {s} is not a stored point in range"
    assert got.steps[0] == ref.steps[0] and got.steps[-1] == ref.steps[-1]
    if max_points >= 4:
        finite = ref.values[~np.isnan(ref.values)]
        assert finite.min() in got.values and finite.max() in got.values, "the range's extremes must be kept"


def test_a_long_read_keeps_spikes_in_chunks_it_reads_only_as_summaries(store):
    run_id, _ = create(store)
    n = 150_000
    values = np.sin(np.arange(n) / 1000.0)
    values[77_777] = 50.0
    values[123_456] = -50.0
    for lo in range(0, n, 50_000):
        append(store, run_id, {"loss": points(range(lo, lo + 50_000), values[lo:lo + 50_000])})
    assert len(chunks(store, run_id, "loss")) >= 3
    for max_points, start, end in [(2000, None, None), (10, None, None), (10, 1234, 140_000), (100, 70_001, 99_999)]:
        count, downsampled, got = read(store, run_id, "loss", start=start, end=end, max_points=max_points)
        lo, hi = start or 0, n - 1 if end is None else end
        assert (count, downsampled) == (hi - lo + 1, True) and len(got) <= max_points
        assert (got.steps[0], got.steps[-1]) == (lo, hi)
        assert np.array_equal(got.values, values[got.steps])
        expected = {i for i in (77_777, 123_456) if lo <= i <= hi}
        assert expected <= set(got.steps.tolist())


# -- search -----------------------------------------------------------------------------------------


def test_search_filters_by_project_tag_state_job_config_and_metric_newest_first(store):
    a, _ = create(store, project="mnist", tags=["baseline"], job_id=3, config={"lr": 0.1, "model": {"depth": 4}})
    b, _ = create(store, project="mnist", config={"lr": 0.01, "model": {"depth": 8}, "act": "gelu"})
    c, _ = create(store, project="cifar", tags=["baseline", "big"], config={"lr": 0.1})
    d, _ = create(store, project="cifar", config={})
    append(store, a, {"loss": points([0, 1, 2], [1.0, 0.1, 0.3])})
    append(store, b, {"loss": points([0, 1], [2.0, 0.5])})
    append(store, c, {"loss": points([0, 1], [0.05, math.nan]), "acc": points([0], [0.9])})
    with store.engine.begin() as conn:
        store.finish(conn, b, "failed", NOW)
    assert search_ids(store) == [d, c, b, a]
    assert search_ids(store, project="mnist") == [b, a]
    assert search_ids(store, project="nope") == []
    assert search_ids(store, tag="baseline") == [c, a]
    assert search_ids(store, tag="big", project="mnist") == []
    assert search_ids(store, state="failed") == [b]
    assert search_ids(store, state="running", project="cifar") == [d, c]
    assert search_ids(store, job_id=3) == [a]
    assert search_ids(store, "config.lr=0.1") == [c, a]
    assert search_ids(store, "config.model.depth>=5") == [b]
    assert search_ids(store, "config.act=gelu") == [b]
    assert search_ids(store, "metric.loss.min<0.2") == [c, a]
    assert search_ids(store, "metric.loss.max>=2") == [b]
    assert search_ids(store, "metric.loss<0.4") == [a]  # last; c's last is NaN
    assert search_ids(store, "metric.loss.last>0.2") == [b, a]
    assert search_ids(store, "metric.acc>0") == [c]
    assert search_ids(store, "config.lr<1", "metric.loss.min<0.2", project="mnist") == [a]
    assert search_ids(store, limit=2) == [d, c]


def test_a_config_filter_finds_matches_beyond_the_first_page(store):
    with store.engine.begin() as conn:
        ids = [store.create(conn, parse_run_request({"config": {"i": i}}), user="u", now=NOW, job=None)[0]
               for i in range(260)]
    assert search_ids(store, "config.i<3", limit=2) == [ids[2], ids[1]]
    assert search_ids(store, "config.i<3") == [ids[2], ids[1], ids[0]]


def test_projects_count_their_runs(store):
    create(store, project="b", now=5.0)
    create(store, project="a", now=1.0)
    create(store, project="a", now=3.0)
    with store.engine.connect() as conn:
        assert store.projects(conn) == [{"name": "a", "runs": 2, "last_start": 3.0},
                                        {"name": "b", "runs": 1, "last_start": 5.0}]


# -- artifacts --------------------------------------------------------------------------------------


def put(store: RunStore, run_id: int, *items: dict[str, Any], now: float = NOW) -> list[dict[str, Any]]:
    with store.engine.begin() as conn:
        ids = store.put_artifacts(conn, run_id, parse_artifacts({"artifacts": list(items)}), now)
        return store.artifacts_by_id(conn, ids)


def listed(store: RunStore, run_id: int, type_: str | None = None, deleted: bool = False) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        return store.artifacts(conn, run_id, type_=type_, deleted=deleted)


def test_artifacts_are_upserted_by_path_and_marking_deleted_keeps_step_and_metric(store):
    run_id, _ = create(store)
    sha = "ab" * 32
    first = put(store, run_id, {"path": "/ckpt/ckpt-00000100.pt", "type": "checkpoint", "size": 123, "sha256": sha,
                                "step": 100, "metric": "val_loss", "metric_value": 0.31},
                {"path": "/out/report.txt"})
    assert [(a["type"], a["deleted"], a["run_id"], a["created"]) for a in first] == \
        [("checkpoint", False, run_id, NOW), ("file", False, run_id, NOW)]
    updated = put(store, run_id, {"path": "/ckpt/ckpt-00000100.pt", "deleted": True}, now=NOW + 50)
    assert updated[0]["id"] == first[0]["id"]
    assert {k: updated[0][k] for k in ("type", "size", "sha256", "step", "metric", "metric_value", "deleted", "created")} == \
        {"type": "checkpoint", "size": 123, "sha256": sha, "step": 100, "metric": "val_loss", "metric_value": 0.31,
         "deleted": True, "created": NOW}
    assert [a["path"] for a in listed(store, run_id)] == ["/out/report.txt"]
    assert [a["path"] for a in listed(store, run_id, deleted=True)] == ["/ckpt/ckpt-00000100.pt", "/out/report.txt"]
    assert [a["path"] for a in listed(store, run_id, "checkpoint", deleted=True)] == ["/ckpt/ckpt-00000100.pt"]
    assert listed(store, run_id, "checkpoint") == []
    # the same path twice in one request is one artifact
    twice = put(store, run_id, {"path": "/x.pt", "step": 1}, {"path": "/x.pt", "step": 2})
    assert twice[0]["id"] == twice[1]["id"] and twice[1]["step"] == 2
    other, _ = create(store)
    assert put(store, other, {"path": "/out/report.txt"})[0]["id"] != first[1]["id"]  # paths are per run
    with pytest.raises(NotFound):
        put(store, 999999, {"path": "/y"})


def test_raw_reads_factor_is_the_documented_switch(store, monkeypatch):
    """With the raw factor at 1, a read of more than max_points goes to the summaries yet keeps its contract."""
    monkeypatch.setattr(run_metrics, "_RAW_FACTOR", 1)
    run_id, _ = create(store)
    values = _spiky_values(5000, seed=1)
    append(store, run_id, {"loss": points(range(5000), values)})
    count, downsampled, got = read(store, run_id, "loss", max_points=50)
    assert (count, downsampled) == (5000, True) and len(got) <= 50
    finite = values[~np.isnan(values)]
    assert finite.min() in got.values and finite.max() in got.values
    assert (got.steps[0], got.steps[-1]) == (0, 4999)


# -- permissions (issue 15) ---------------------------------------------------------------------------


def test_a_resume_key_is_its_owners_alone(store):
    """Two owners with the same resume key never collide: each resumes only their own run."""
    with store.engine.begin() as conn:
        alices, resumed = store.create(conn, parse_run_request({"resume_key": "job:7:train.py:p::0"}), user="alice",
                                       now=NOW, job=None)
        bobs, bob_resumed = store.create(conn, parse_run_request({"resume_key": "job:7:train.py:p::0"}), user="bob",
                                         now=NOW, job=None)
        again, again_resumed = store.create(conn, parse_run_request({"resume_key": "job:7:train.py:p::0"}),
                                            user="bob", now=NOW, job=None)
        # an admin's request for a run of bob's job is a run of bob's: it finds bob's key
        by_admin, _ = store.create(conn, parse_run_request({"resume_key": "job:7:train.py:p::0"}), user="root",
                                   now=NOW, job={"user": "bob"})
    assert (resumed, bob_resumed, again_resumed) == (False, False, True)
    assert alices != bobs and again == bobs == by_admin
    assert (get(store, alices)["user"], get(store, bobs)["user"]) == ("alice", "bob")


def test_the_permissions_migration_keeps_every_run_and_its_metrics(db_url, tmp_path):
    """0007 rebuilds the runs table on SQLite (its only way to drop a UNIQUE): with foreign keys on,
    dropping the old table would delete every metric, tag and artifact that refers to it."""
    engine = open_engine(database_url(db_url, str(tmp_path)))
    migrate.upgrade(engine, "0006")
    store = RunStore(engine)
    run_id, _ = create(store, resume_key="k", tags=["kept"])
    append(store, run_id, {"loss": points([1, 2, 3], [3.0, 2.0, 1.0])})
    with engine.begin() as conn:  # as 0006's table has it (today's store writes columns added since)
        conn.execute(text("INSERT INTO artifacts (run_id, path, type, step, deleted, created) "
                             "VALUES (:run, :path, :type, :step, :deleted, :created)"),
                     {"run": run_id, "path": "/ck/1.pt", "type": "checkpoint", "step": 3, "deleted": False,
                      "created": NOW})
    migrate.upgrade(engine)
    kept = get(store, run_id)
    assert (kept["tags"], kept["resume_key"], kept["user"]) == (["kept"], "k", "alice")
    assert read(store, run_id, "loss")[2].steps.tolist() == [1, 2, 3]
    with engine.connect() as conn:
        assert len(store.artifacts(conn, run_id, type_=None, deleted=True)) == 1
    later, _ = create(store)
    assert later > run_id
    engine.dispose()
