"""MLflow's search syntax (core.dialects.mlflow_filter) and request checks (core.dialects.mlflow_requests), without a server."""

from __future__ import annotations

import math

import numpy as np
import pytest

from corral.core.dialects import mlflow_requests as M
from corral.core.dialects.mlflow_filter import Clause, RunView, matches, parse_filter, parse_order_by, sort_runs
from corral.errors import InvalidRequest


def view(run_id: str, start: int, metrics=None, params=None, tags=None, status="FINISHED") -> RunView:
    return RunView({"run_id": run_id, "run_name": run_id, "status": status, "start_time": start, "end_time": None,
                    "user_id": "alice", "artifact_uri": "", "lifecycle_stage": "active"},
                   metrics or {}, params or {}, tags or {})


def test_the_common_forms_parse_as_mlflow_writes_them():
    clauses = parse_filter("metrics.acc > 0.9 and params.lr = '0.1' AND tags.`my tag` LIKE 'a%' "
                           "and attributes.status = \"FINISHED\" and attribute.run_id IN ('a', 'b') "
                           "and tags.\"mlflow.runName\" != 'x' and params.model.depth = '3' and metrics.loss<=-1e-3")
    assert clauses == [
        Clause("metrics", "acc", ">", 0.9), Clause("params", "lr", "=", "0.1"), Clause("tags", "my tag", "LIKE", "a%"),
        Clause("attributes", "status", "=", "FINISHED"), Clause("attributes", "run_id", "IN", ("a", "b")),
        Clause("tags", "mlflow.runName", "!=", "x"), Clause("params", "model.depth", "=", "3"),
        Clause("metrics", "loss", "<=", -1e-3),
    ]
    assert parse_filter("") == [] and parse_filter(None) == []
    assert parse_filter("params.name = 'it''s'") == [Clause("params", "name", "=", "it's")]


@pytest.mark.parametrize("text", [
    "metrics.acc > 'x'", "foo.x = 1", "params.lr > 1", "metrics.a = 1 or metrics.b = 2", "metrics.a",
    "attributes.nope = 'x'", "params.a = 'x' and", "acc > 1", "metrics.acc LIKE 1", "run_id IN ('a'",
    "params.a = 'unterminated", "metrics.acc > 1; drop table runs",
])
def test_what_mlflow_refuses_is_refused_naming_the_filter(text):
    with pytest.raises(InvalidRequest) as caught:
        parse_filter(text)
    assert caught.value.field == "filter"


def test_filters_match_as_sql_would():
    run = view("r1", 10, metrics={"acc": 0.95, "loss": math.nan}, params={"lr": "0.1"}, tags={"team": "Vision"})
    assert matches(parse_filter("metrics.acc > 0.9 and params.lr = '0.1'"), run)
    assert not matches(parse_filter("metrics.acc > 0.99"), run)
    assert not matches(parse_filter("metrics.f1 != 1"), run)  # a run without the key matches no comparison
    assert matches(parse_filter("tags.team ILIKE 'vis%'"), run) and not matches(parse_filter("tags.team LIKE 'vis%'"), run)
    assert matches(parse_filter("tags.team LIKE 'V_sion'"), run)
    assert matches(parse_filter("params.missing IS NULL and params.lr IS NOT NULL"), run)
    assert matches(parse_filter("attributes.status = 'FINISHED' and attributes.start_time >= 10"), run)
    assert matches(parse_filter("attributes.run_id NOT IN ('r2')"), run)


def test_order_by_puts_runs_without_the_key_last_then_newest_first():
    runs = [view("a", 1, {"acc": 0.5}), view("b", 2), view("c", 3, {"acc": 0.9}), view("d", 4, {"acc": 0.5})]
    assert [r.attributes["run_id"] for r in sort_runs(runs, parse_order_by(["metrics.acc DESC"]))] == ["c", "d", "a", "b"]
    assert [r.attributes["run_id"] for r in sort_runs(runs, parse_order_by(["metrics.acc"]))] == ["d", "a", "c", "b"]
    assert [r.attributes["run_id"] for r in sort_runs(runs, [])] == ["d", "c", "b", "a"]
    assert parse_order_by(["start_time DESC"])[0].entity == "attributes"
    with pytest.raises(InvalidRequest):
        parse_order_by(["metrics.acc SIDEWAYS"])


def test_a_batch_of_plain_points_is_read_by_columns_and_odd_ones_one_by_one():
    fast = M.batch({"metrics": [{"key": "b", "value": 2, "timestamp": 2000, "step": 3},
                                {"key": "a", "value": 1.5, "timestamp": 1000, "step": 1},
                                {"key": "b", "value": 1, "timestamp": 1000, "step": 2}]})[0]
    slow = M.batch({"metrics": [{"key": "b", "value": 2, "timestamp": "2000", "step": 3},
                    {"key": "a", "value": 1.5, "timestamp": 1000, "step": "1"},
                    {"key": "b", "value": "NaN", "timestamp": 1000, "step": 2}]})[0]
    assert list(fast) == ["b", "a"] and fast["b"].steps.tolist() == [2, 3] and fast["b"].times.tolist() == [1.0, 2.0]
    assert slow["b"].steps.tolist() == [2, 3] and np.isnan(slow["b"].values[0]) and slow["a"].steps.tolist() == [1]
    with pytest.raises(InvalidRequest) as caught:
        M.batch({"metrics": [{"key": "a", "value": 1, "timestamp": 1}, {"key": "b", "value": True, "timestamp": 1}]})
    assert caught.value.field == "metrics[1].value"


def test_page_tokens_are_mlflows_form_and_anything_else_is_refused():
    assert M.page_token(M.next_page_token(40)) == 40 and M.page_token(None) == 0
    for bad in ("x", "eyJvZmZzZXQiOiAtMX0=", "bnVsbA==", "eyJvZmZzZXQiOiAiMSJ9"):
        with pytest.raises(InvalidRequest):
            M.page_token(bad)
