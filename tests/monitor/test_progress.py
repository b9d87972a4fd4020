"""A running job's progress from its tracked run: the total only from a key that names one, and never a
total the run has gone past (the dashboard would show 1,299 / 200 (650%))."""

from __future__ import annotations

from corral.monitor.progress import ProgressTracker, total_steps


def progress(config: dict, step: int):
    run = {"id": 1, "name": "r", "start_time": 0.0, "config": config}
    return ProgressTracker().update(7, run, [{"last_step": step, "last_time": 100.0}])


def test_a_config_key_named_steps_is_no_total():
    assert total_steps({"steps": 200, "lr": 0.1}) is None
    shown = progress({"steps": 200}, 1299)
    assert (shown.step, shown.total, shown.eta_s) == (1299, None, None)


def test_a_total_the_run_went_past_is_dropped_and_one_ahead_of_it_gives_an_eta():
    past = progress({"max_steps": 200}, 1299)
    assert (past.total, past.eta_s) == (None, None)
    ahead = progress({"train": {"total_steps": 2000}}, 1000)
    assert ahead.total == 2000 and ahead.rate == 10.0 and ahead.eta_s == 100.0
