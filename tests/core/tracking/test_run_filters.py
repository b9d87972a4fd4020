"""Run search expressions: parsing `config.KEY OP VALUE` / `metric.KEY[.stat] OP NUMBER`, and matching configs."""

from __future__ import annotations

import pytest

from corral.core.tracking.run_filters import RunFilter, parse_filter
from corral.errors import InvalidRequest


@pytest.mark.parametrize("expr, expected", [
    ("config.lr=0.1", RunFilter("config", ("lr",), "", "=", 0.1)),
    ("config.lr==0.1", RunFilter("config", ("lr",), "", "=", 0.1)),
    ("  config.lr = 0.1 ", RunFilter("config", ("lr",), "", "=", 0.1)),
    ("config.model.depth>=4", RunFilter("config", ("model", "depth"), "", ">=", 4)),
    ("config.act=gelu", RunFilter("config", ("act",), "", "=", "gelu")),
    ('config.act="gelu"', RunFilter("config", ("act",), "", "=", "gelu")),
    ("config.flag!=true", RunFilter("config", ("flag",), "", "!=", True)),
    ("config.x=null", RunFilter("config", ("x",), "", "=", None)),
    ("config.sizes=[1, 2]", RunFilter("config", ("sizes",), "", "=", [1, 2])),
    ("metric.loss<0.5", RunFilter("metric", ("loss",), "last", "<", 0.5)),
    ("metric.loss.min<0.2", RunFilter("metric", ("loss",), "min", "<", 0.2)),
    ("metric.loss.max > 3", RunFilter("metric", ("loss",), "max", ">", 3.0)),
    ("metric.loss.last<=1e-3", RunFilter("metric", ("loss",), "last", "<=", 0.001)),
    ("metric.train/loss.min>=0", RunFilter("metric", ("train/loss",), "min", ">=", 0.0)),
    ("metric.val.acc>0.9", RunFilter("metric", ("val.acc",), "last", ">", 0.9)),  # .acc is part of the key
    ("metric.val.acc.max!=1", RunFilter("metric", ("val.acc",), "max", "!=", 1.0)),
])
def test_parse_filter_reads_scope_path_stat_op_and_value(expr, expected):
    assert parse_filter(expr) == expected


@pytest.mark.parametrize("expr", [
    "lr=0.1", "config.lr", "config.lr~0.1", "params.lr=1", "config..lr=1", "config.lr.=1", "metric.loss<low",
    "metric.loss=true", "metric.loss.min<", "metric.loss=\"1\"", "", "=1",
    "metric.loss<NaN",  # SQLite matches no run and PostgreSQL every run: refuse it
])
def test_unreadable_filters_are_refused_naming_where(expr):
    with pytest.raises(InvalidRequest) as info:
        parse_filter(expr)
    assert info.value.field == "where"
    assert "config.KEY" in str(info.value)  # the message shows the accepted form


CONFIG = {"lr": 0.1, "batch": 64, "act": "gelu", "flag": True, "none": None, "sizes": [1, 2],
          "model": {"depth": 4, "name": "resnet"}}


@pytest.mark.parametrize("expr, matches", [
    ("config.lr=0.1", True),
    ("config.lr!=0.1", False),
    ("config.lr<0.2", True),
    ("config.lr>=0.1", True),
    ("config.lr>0.1", False),
    ("config.batch=64.0", True),  # numbers compare as numbers
    ("config.batch<100", True),
    ("config.model.depth>=4", True),
    ("config.model.depth>4", False),
    ("config.model.name=resnet", True),
    ("config.act=gelu", True),
    ("config.act!=relu", True),
    ("config.act<h", True),  # strings order as strings
    ("config.act<1", False),  # a string is not ordered against a number
    ("config.lr<abc", False),
    ("config.flag=true", True),
    ("config.flag=1", False),  # true is not the number 1
    ("config.flag>0", False),
    ("config.none=null", True),
    ("config.sizes=[1,2]", True),
    ("config.missing=1", False),  # a run without the key never matches
    ("config.missing!=1", False),
    ("config.lr.deeper=1", False),  # a path through a number
    ("config.model=4", False),
])
def test_config_filters_match_by_value_and_type(expr, matches):
    assert parse_filter(expr).matches_config(CONFIG) is matches


@pytest.mark.parametrize("op, actual, expected", [
    ("<", 0.1, True), ("<=", 0.2, True), (">", 0.2, False), (">=", 0.2, True), ("=", 0.2, True), ("!=", 0.2, False),
])
def test_metric_filter_compares_numbers(op, actual, expected):
    assert parse_filter(f"metric.loss{op}0.2").compare(actual) is expected
