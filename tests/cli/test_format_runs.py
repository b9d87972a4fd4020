"""The tracking commands' tables and views, from fixture dicts shaped like the API's (docs/tracking-api.md)."""

from __future__ import annotations

import math
from typing import Any

from corral.core.tracking.metric_goals import metric_goal
from corral.cli.format_runs import (
    checkpoint_marks,
    compare_runs,
    compare_view,
    flatten_config,
    format_config_value,
    format_value,
    metric_columns,
    run_duration,
    run_view,
    runs_table,
    series_csv,
    series_header,
    series_table,
    sync_lines,
)

T0 = 1_700_000_000.0


def summary(last: Any, lo: float | None, hi: float | None, count: int = 100) -> dict[str, Any]:
    return {"count": count, "first_step": 0, "last_step": count - 1, "last": last, "last_time": T0 + count,
            "min": lo, "min_step": 50, "max": hi, "max_step": 0}


def make_run(id: int, name: str, config: dict[str, Any], metrics: dict[str, Any], **fields: Any) -> dict[str, Any]:
    run = {"id": id, "uid": f"{id:016x}", "project": "mnist", "name": name, "user": "alice", "state": "finished",
           "config": config, "tags": ["baseline"], "job_id": 12, "node": "gpu01", "gpu_type": "A100",
           "git_commit": "ab12cd", "resume_key": None, "start_time": T0, "end_time": T0 + 3725.0, "resumed": False,
           "metrics": metrics, "last_step": 99}
    run.update(fields)
    return run


def test_losses_errors_and_perplexities_go_down_accuracies_up_and_the_rest_nowhere():
    for key in ("loss", "val_loss", "train/Loss", "error_rate", "ppl", "eval_perplexity", "mse", "mae", "val_rmse"):
        assert metric_goal(key) == "min", key
    for key in ("acc", "val_accuracy", "f1", "bleu", "reward", "eval-f1", "val/mAP"):
        assert metric_goal(key) == "max", key
    # hyperparameters and counters logged as metrics have no better side
    for key in ("lr", "learning_rate", "epoch", "grad_accum", "system/gpu_memory", "heatmap_size", "metric"):
        assert metric_goal(key) is None, key
    assert metric_goal("lr", {"lr": "max"}) == "max"  # a declared goal wins


def test_values_are_short_and_non_finite_ones_readable():
    assert format_value(0.123456789) == "0.123457"
    assert format_value(1e-5) == "1e-05"
    assert format_value(3) == "3"
    assert format_value("NaN") == "nan"
    assert format_value("Infinity") == "inf" and format_value("-Infinity") == "-inf"
    assert format_value(None) == "-"
    assert format_value(True) == "true"
    assert format_value([1, 2]) == "[1, 2]"
    assert format_value("adamw") == "adamw"
    assert format_config_value(1.0) == "1.0" and format_config_value(3e-4) == "0.0003" and format_config_value(1) == "1"
    assert format_config_value({"a": 1}) == '{"a": 1}' and format_config_value("x") == "x"


def test_nested_config_is_flattened_to_dotted_keys():
    assert flatten_config({"lr": 0.1, "model": {"depth": 4, "act": {"name": "gelu"}}, "empty": {}}) == {
        "lr": 0.1, "model.depth": 4, "model.act.name": "gelu", "empty": {}}


def test_metric_columns_are_the_keys_every_run_has_at_most_three():
    runs = [
        make_run(1, "a", {}, {"loss": summary(0.1, 0.1, 1), "acc": summary(0.9, 0, 0.9), "lr": summary(1, 1, 1),
                              "f1": summary(1, 1, 1), "only_here": summary(1, 1, 1)}),
        make_run(2, "b", {}, {"loss": summary(0.2, 0.2, 1), "acc": summary(0.8, 0, 0.8), "lr": summary(1, 1, 1),
                              "f1": summary(1, 1, 1)}),
    ]
    assert metric_columns(runs) == ["acc", "f1", "loss"]
    assert metric_columns([make_run(1, "a", {}, {"system/gpu_util": summary(1, 1, 1), "loss": summary(1, 1, 1)})]) == [
        "loss", "system/gpu_util"]
    disjoint = [make_run(1, "a", {}, {"x": summary(1, 1, 1)}), make_run(2, "b", {}, {"y": summary(1, 1, 1)}),
                make_run(3, "c", {}, {"y": summary(1, 1, 1)})]
    assert metric_columns(disjoint) == ["y", "x"]
    assert metric_columns([make_run(1, "a", {}, {})]) == []
    assert metric_columns([*runs, make_run(3, "no metrics yet", {}, {})]) == ["acc", "f1", "loss"]


def test_runs_table_has_one_line_a_run_with_last_values_and_duration():
    runs = [
        make_run(8, "lr-0.01", {}, {"loss": summary("NaN", 0.2, 2.0)}, state="running", end_time=None, job_id=None),
        make_run(7, "lr-0.1", {}, {"loss": summary(0.1234567, 0.1, 2.3)}),
    ]
    text = runs_table(runs, now=T0 + 90)
    lines = text.splitlines()
    assert lines[0].split() == ["ID", "PROJECT", "NAME", "STATE", "JOB", "STEP", "loss", "START", "DURATION"]
    assert lines[1].split()[:7] == ["8", "mnist", "lr-0.01", "running", "-", "99", "nan"]
    assert lines[1].split()[-1] == "1:30"
    assert lines[2].split()[:7] == ["7", "mnist", "lr-0.1", "finished", "12", "99", "0.1235"]
    assert lines[2].split()[-1] == "1:02:05"
    assert runs_table([]).split() == ["ID", "PROJECT", "NAME", "STATE", "JOB", "STEP", "START", "DURATION"]


def test_a_run_that_ended_without_an_end_time_has_no_duration():
    assert run_duration({"state": "crashed", "start_time": T0, "end_time": None}, now=T0 + 5) == "-"
    assert run_duration({"state": "running", "start_time": None}, now=T0) == "-"


ARTIFACTS = [
    {"id": 1, "path": "/ck/ckpt-100.pt", "type": "checkpoint", "size": 2048, "step": 100, "metric": "val_loss",
     "metric_value": 0.5, "deleted": False},
    {"id": 2, "path": "/ck/ckpt-200.pt", "type": "checkpoint", "size": 2048, "step": 200, "metric": "val_loss",
     "metric_value": 0.3, "deleted": False},
    {"id": 3, "path": "/ck/ckpt-300.pt", "type": "checkpoint", "size": 2048, "step": 300, "metric": "val_loss",
     "metric_value": 0.4, "deleted": False},
    {"id": 4, "path": "/out/confusion.png", "type": "file", "size": 10, "step": None, "metric": None,
     "metric_value": None, "deleted": False},
]


def test_without_best_metric_the_best_checkpoint_is_the_lowest_as_the_sdk_keeps_it():
    # corral.init(keep_best=1) with no best_metric: the SDK names the metric "metric" and keeps the lowest
    plain = [{**a, "metric": "metric"} for a in ARTIFACTS[:3]]
    assert checkpoint_marks(plain) == {2: ["best"], 3: ["latest"]}
    # a declared best_mode wins over the name, whatever the name says
    declared = [{**a, "metric": "val_loss", "goal": "max"} for a in ARTIFACTS[:3]]
    assert checkpoint_marks(declared) == {1: ["best"], 3: ["latest"]}
    # ties go to the later step, as the SDK's retention keeps them
    tied = [{**a, "metric_value": 0.3} for a in ARTIFACTS[:3]]
    assert checkpoint_marks(tied) == {3: ["best", "latest"]}


def test_run_view_says_a_resumed_run_was_resumed():
    run = make_run(7, "lr-0.1", {}, {})
    assert "Resumed: no" in run_view({**run, "resumes": 0, "resumed": False})
    assert "Resumed: yes (2 times)" in run_view({**run, "resumes": 2, "resumed": True})


def test_compare_gives_a_config_key_logged_as_a_metric_no_best_unless_a_goal_is_declared():
    a = make_run(1, "a", {"lr": 0.1}, {"lr": summary(0.1, 0.01, 0.1), "val_loss": summary(0.3, 0.3, 1)})
    b = make_run(2, "b", {"lr": 0.01}, {"lr": summary(0.01, 0.001, 0.01), "val_loss": summary(0.2, 0.2, 1)})
    data = compare_runs([a, b])
    assert data["metrics"]["lr"]["goal"] is None and data["metrics"]["lr"]["best"] == []
    assert data["metrics"]["val_loss"]["best"] == [2]
    lr_row = next(line for line in compare_view(data).splitlines() if line.split()[:2] == ["lr", "last"])
    assert "higher is better" not in lr_row and "no direction" in lr_row
    declared = compare_runs([a, b], goals={"lr": "max"})
    assert declared["metrics"]["lr"]["best"] == [1]


def test_the_best_checkpoint_follows_its_metrics_direction_and_the_latest_is_the_last_step():
    assert checkpoint_marks(ARTIFACTS) == {2: ["best"], 3: ["latest"]}
    by_acc = [{**a, "metric": "val_acc"} for a in ARTIFACTS]
    assert checkpoint_marks(by_acc) == {1: ["best"], 3: ["latest"]}
    one = [ARTIFACTS[0]]
    assert checkpoint_marks(one) == {1: ["best", "latest"]}
    nan_only = [{**ARTIFACTS[0], "metric_value": "NaN"}]
    assert checkpoint_marks(nan_only) == {1: ["latest"]}


def test_run_view_shows_where_it_ran_config_metrics_and_marked_checkpoints():
    run = make_run(7, "lr-0.1", {"lr": 0.1, "model": {"depth": 4}},
                   {"loss": summary(0.12, 0.1, 2.3, count=1000), "acc": summary(0.9, 0.1, 0.95)})
    text = run_view(run, ARTIFACTS, now=T0)
    for expected in ("RunId: 7", "Project: mnist", "State: finished", "JobId: 12", "Node: gpu01", "GPU: A100",
                     "GitCommit: ab12cd", "Tags: baseline", "Duration: 1:02:05", "lr: 0.1", "model.depth: 4"):
        assert expected in text, expected
    loss_line = next(line for line in text.splitlines() if line.split()[:1] == ["loss"])
    assert loss_line.split() == ["loss", "1000", "0-999", "0.12", "0.1", "(50)", "2.3", "(0)"]
    lines = {line.split()[-1]: line for line in text.splitlines() if line.strip().startswith(("checkpoint", "file"))}
    assert "best" in lines["/ck/ckpt-200.pt"] and "latest" in lines["/ck/ckpt-300.pt"]
    assert "best" not in lines["/ck/ckpt-100.pt"] and "latest" not in lines["/ck/ckpt-100.pt"]
    assert "val_loss=0.3" in lines["/ck/ckpt-200.pt"] and "2.0K" in lines["/ck/ckpt-200.pt"]
    assert "/out/confusion.png" in lines


def test_run_view_of_a_bare_run_says_what_is_missing():
    run = make_run(1, "empty", {}, {}, job_id=None, node=None, gpu_type=None, git_commit=None, tags=[], last_step=None)
    text = run_view(run, [])
    assert "Config: (none)" in text and "Metrics: (none)" in text and "Artifacts: (none)" in text
    assert "JobId: -" in text


SERIES = {"key": "loss", "count": 10_000, "downsampled": True, "steps": [0, 10, 9999], "values": [2.5, "NaN", 0.1],
          "times": [T0, T0 + 1, T0 + 2]}


def test_series_header_says_how_many_points_and_whether_downsampled():
    assert series_header(SERIES).startswith("loss: 3 of 10000 points (downsampled")
    assert series_header({**SERIES, "count": 3, "downsampled": False}) == "loss: 3 points (all)"


def test_series_as_table_and_as_exact_csv():
    assert series_table(SERIES).splitlines() == ["STEP  VALUE", "0     2.5", "10    nan", "9999  0.1"]
    lines = series_csv(SERIES).splitlines()
    assert lines[0] == "step,value,time"
    assert lines[1] == f"0,2.5,{T0!r}"
    assert lines[2].split(",")[:2] == ["10", "nan"]
    assert math.isclose(float(lines[3].split(",")[1]), 0.1)
    assert series_csv({"key": "x", "steps": [1], "values": [1.5]}).splitlines()[1] == "1,1.5,"


def test_compare_keeps_only_differing_config_and_marks_the_best_run_per_metric():
    a = make_run(7, "lr-0.1", {"lr": 0.1, "batch": 64, "model": {"depth": 4}, "opt": "adam"},
                 {"loss": summary(0.12, 0.1, 2.3), "acc": summary(0.90, 0.1, 0.91), "only_a": summary(1, 1, 1)})
    b = make_run(8, "lr-0.01", {"lr": 0.01, "batch": 64.0, "model": {"depth": 6}},
                 {"loss": summary(0.2, 0.15, 2.4), "acc": summary(0.95, 0.1, 0.96)})
    data = compare_runs([a, b])
    assert data["config"] == {"lr": [0.1, 0.01], "model.depth": [4, 6], "opt": ["adam", None]}
    assert set(data["metrics"]) == {"loss", "acc"}
    assert data["metrics"]["loss"]["best"] == [7] and data["metrics"]["loss"]["lower_is_better"] is True
    assert data["metrics"]["acc"]["best"] == [8] and data["metrics"]["acc"]["lower_is_better"] is False
    assert data["metrics"]["loss"]["last"] == [0.12, 0.2]
    assert set(compare_runs([a, b], all_config=True)["config"]) == {"lr", "batch", "model.depth", "opt"}

    text = compare_view(data)
    lines = text.splitlines()
    assert lines[0].split() == ["CONFIG", "7", "lr-0.1", "8", "lr-0.01"]
    assert not any(line.startswith("batch") for line in lines)
    opt = next(line for line in lines if line.startswith("opt"))
    assert opt.split() == ["opt", "adam", "-"]
    loss_min = lines[lines.index(next(line for line in lines if line.startswith("loss"))) + 1]
    assert loss_min.split() == ["min", "0.1", "*", "0.15"]
    acc_row = next(line for line in lines if line.startswith("acc"))
    assert "8 lr-0.01 (higher is better)" in acc_row
    acc_max = lines[lines.index(acc_row) + 2]
    assert acc_max.split() == ["max", "0.91", "0.96", "*"]


def test_compare_ties_mark_every_best_run_and_no_differences_are_said():
    a = make_run(1, "a", {"lr": 1}, {"loss": summary(0.1, 0.1, 1)})
    b = make_run(2, "b", {"lr": 1.0}, {"loss": summary(0.1, 0.1, 1)})
    c = make_run(3, "c", {"lr": 1}, {"loss": summary("NaN", None, None)})
    data = compare_runs([a, b, c])
    assert data["config"] == {}
    assert data["metrics"]["loss"]["best"] == [1, 2]
    assert compare_view(data).startswith("CONFIG: no differences")
    flags = compare_runs([make_run(1, "a", {"f": True}, {}), make_run(2, "b", {"f": 1}, {})])
    assert flags["config"] == {"f": [True, 1]}
    assert "none that all these runs have" in compare_view(flags)


def test_sync_lines_say_where_each_spooled_run_went_or_why_it_failed():
    text = sync_lines([
        {"uid": "aaaa", "run_id": 7, "batches": 3, "points": 300, "state": "finished", "error": None},
        {"uid": "bbbb", "run_id": None, "batches": 0, "points": 0, "state": None, "error": "server said no"},
        {"uid": "cccc", "run_id": 8, "batches": 1, "points": 1, "state": "running", "error": None},
    ])
    assert text.splitlines() == ["aaaa -> run 7: 3 batches, 300 points, finished", "bbbb -> failed: server said no",
                                 "cccc -> run 8: 1 batch, 1 point, running"]


def test_runs_table_shows_held_out_quality_metrics_first():
    keys = ["epoch", "samples_per_s", "system/gpu_util", "train/acc", "train/loss", "val/acc", "val/loss"]
    runs = [{"metrics": {k: {"last": 1.0} for k in keys}}]
    assert metric_columns(runs) == ["val/acc", "val/loss", "train/acc"]
