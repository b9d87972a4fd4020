"""Sweeps' pure parts: parameters read, grids and seeded random searches expanded, commands filled in."""

from __future__ import annotations

import json
import math
import shlex

import pytest

from corral.core.tracking import sweeps as S
from corral.errors import InvalidRequest


def test_a_grid_runs_every_combination_with_the_last_parameter_fastest():
    params = S.parse_params(["lr=1e-4,3e-4,1e-3", "bs=32,64"])
    tasks = S.expand(params, S.choose_method(params, None, None))
    assert len(tasks) == 6
    assert tasks[:3] == [{"lr": "1e-4", "bs": "32"}, {"lr": "1e-4", "bs": "64"}, {"lr": "3e-4", "bs": "32"}]


def test_a_random_search_is_the_same_for_the_same_seed_and_stays_in_its_range():
    params = S.parse_params(["lr=loguniform:1e-5:1e-2", "layers=int:2:8", "act=relu,gelu"])
    assert S.choose_method(params, None, 50) == "random"
    first = S.expand(params, "random", 50, seed=7)
    assert first == S.expand(params, "random", 50, seed=7)
    assert first != S.expand(params, "random", 50, seed=8)
    lrs = [float(t["lr"]) for t in first]
    assert all(1e-5 <= lr <= 1e-2 for lr in lrs)
    # log-uniform: about as many draws in each decade
    decades = [sum(1 for lr in lrs if 10 ** (e - 1) <= lr < 10 ** e) for e in (-4, -3, -2)]
    assert all(d >= 5 for d in decades), decades
    assert {t["act"] for t in first} == {"relu", "gelu"}
    assert all(2 <= int(t["layers"]) <= 8 for t in first)


def test_ranges_need_a_random_search_and_a_sample_count():
    params = S.parse_params(["lr=loguniform:1e-5:1e-2"])
    with pytest.raises(InvalidRequest) as exc:
        S.choose_method(params, "grid", None)
    assert exc.value.field == "method"
    with pytest.raises(InvalidRequest) as exc:
        S.choose_method(params, None, None)
    assert exc.value.field == "samples"


@pytest.mark.parametrize("text, field", [
    ("lr", "params"), ("1lr=1,2", "params"), ("lr=", "params.lr"), ("lr=1,,2", "params.lr"), ("lr=1,1", "params.lr"),
    ("lr=loguniform:0:1", "params.lr"), ("lr=uniform:2:1", "params.lr"), ("n=int:1.5:3", "params.n"),
    ("lr=loguniform:a:b", "params.lr"),
])
def test_bad_parameters_are_refused_by_name(text, field):
    with pytest.raises(InvalidRequest) as exc:
        S.parse_params([text])
    assert exc.value.field == field


def test_a_grid_too_large_is_refused_with_the_way_out():
    params = S.parse_params([f"p{i}=" + ",".join(str(v) for v in range(10)) for i in range(5)])
    with pytest.raises(InvalidRequest) as exc:
        S.expand(params, "grid")
    assert "random" in (exc.value.hint or "")


def test_every_name_in_the_command_must_be_a_declared_parameter():
    params = S.parse_params(["lr=1,2"])
    S.check_template(["python", "train.py", "--lr={lr}", "{{literal}}"], params)
    with pytest.raises(InvalidRequest) as exc:
        S.check_template(["python", "train.py", "--bs", "{bs}"], params)
    assert exc.value.field == "command" and "{bs}" in exc.value.message
    for bad in (["echo", "{"], ["echo", "{lr"], ["echo", "{}"], ["echo", "{a b}"]):
        with pytest.raises(InvalidRequest):
            S.check_template(bad, params)


def test_filling_replaces_fields_and_unescapes_braces():
    assert S.fill(["--lr={lr}", "{{x}}", "{ lr }"], {"lr": "0.1"}) == ["--lr=0.1", "{x}", "0.1"]


def test_a_tasks_environment_names_each_value_and_carries_them_typed():
    env = S.task_env({"lr": "1e-4", "bs": "32", "act": "relu"})
    assert env["SWEEP_LR"] == "1e-4" and env["SWEEP_BS"] == "32"
    assert json.loads(env[S.PARAMS_ENV]) == {"lr": 1e-4, "bs": 32, "act": "relu"}


def test_the_array_script_gives_each_task_its_values_quoted():
    params = S.parse_params(["msg=a b,$(rm -rf ~),it's"])
    tasks = S.expand(params, "grid")
    script = S.task_script(["echo", "{msg}"], tasks, params)
    lines = [line for line in script.splitlines() if line[:1].isdigit()]
    assert len(lines) == 3
    for number, line in enumerate(lines):
        words = shlex.split(line.split(") ", 1)[1].split("; exec ", 1)[1].removesuffix(" ;;"))
        assert words == ["echo", tasks[number]["msg"]]
    assert "exit 2" in script


def test_the_array_text_carries_the_concurrency_limit():
    assert S.array_text(6, None) == "0-5"
    assert S.array_text(6, 2) == "0-5%2"
    with pytest.raises(InvalidRequest):
        S.array_text(6, 0)


def test_the_table_names_the_best_task_by_the_metrics_direction():
    definition = {"method": "grid", "params": [{"name": "lr", "values": ["1", "2", "3"]}], "command": ["x"],
                  "tasks": [{"lr": "1"}, {"lr": "2"}, {"lr": "3"}]}
    array = {"id": 10, "state": "RUNNING", "array": "0-2%2", "pending_tasks": [2]}
    tasks = [{"id": 11, "array_task_id": 0, "state": "COMPLETED"}, {"id": 12, "array_task_id": 1, "state": "RUNNING"}]
    runs = [{"job_id": 11, "uid": "a", "metrics": {"loss": {"last": 0.5, "min": 0.4, "max": 2.0}, "acc": {"last": 0.9, "min": 0.1, "max": 0.95}}},
            {"job_id": 12, "uid": "b", "metrics": {"loss": {"last": 0.3, "min": 0.2, "max": 2.0}, "acc": {"last": 0.8, "min": 0.1, "max": 0.85}}}]
    view = S.sweep_table(definition, array, tasks, runs)
    assert view["metric"] == "acc" and not view["lower_is_better"] and view["best"]["task"] == 0
    assert view["concurrency"] == 2
    assert [r["state"] for r in view["tasks"]] == ["COMPLETED", "RUNNING", "PENDING"]
    view = S.sweep_table(definition, array, tasks, runs, "loss")
    assert view["best"]["task"] == 1 and view["best"]["best"] == 0.2 and view["tasks"][1]["final"] == 0.3
    assert S.best_task([(0, math.nan), (1, None)], True) is None
