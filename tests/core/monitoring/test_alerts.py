"""Alert conditions, scopes and episodes: pure functions of facts and the time."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.core.monitoring.alerts import (
    Episode, JobFacts, Rule, Scope, advance, check_rule_fields, holds, parse_condition, parse_scope, render_message,
)
from corral.errors import InvalidRequest

NOW = 1_800_000_000.0


def running(**changes) -> JobFacts:
    base = dict(job_id=7, name="train", user="ann", state="RUNNING", submit_time=NOW - 600, start_time=NOW - 300,
                labels={"team": "vision"}, time_limit_s=3600)
    return JobFacts(**(base | changes))


@pytest.mark.parametrize(("text", "kind", "normal", "for_s"), [
    ("state == FAILED", "state", "state == FAILED", 0),
    ("state==failed", "state", "state == FAILED", 0),
    ("state in (FAILED, TIMEOUT, OUT_OF_MEMORY)", "state", "state in (FAILED, OUT_OF_MEMORY, TIMEOUT)", 0),
    ("state in FAILED,TIMEOUT", "state", "state in (FAILED, TIMEOUT)", 0),
    ("gpu_utilization < 10 for 15m", "sample", "gpu_utilization < 10 for 15m", 900),
    ("GPU_UTILIZATION   <   10   FOR 90s", "sample", "gpu_utilization < 10 for 90s", 90),
    ("state == PENDING for 1h", "state", "state == PENDING for 1h", 3600),
    ("time_left < 90s", "time_left", "time_left < 90s", 0),
    ("queue_wait > 3700", "queue_wait", "queue_wait > 3700s", 0),
    ("rss_mb > 60000", "sample", "rss_mb > 60000", 0),
    ("metric.loss is nan", "nonfinite", "metric.loss is nan", 0),
    ("metric.train/loss is not finite", "nonfinite", "metric.train/loss is nan", 0),
    ("metric.val_acc < 0.2 for 10m", "metric", "metric.val_acc < 0.2 for 10m", 600),
    ("no_progress for 30m", "no_progress", "no_progress for 30m", 0),
    ("hung for 2h", "no_progress", "no_progress for 2h", 0),
    ("time_left < 10m", "time_left", "time_left < 10m", 0),
    ("queue_wait > 1h", "queue_wait", "queue_wait > 1h", 0),
])
def test_conditions_parse_to_a_normal_form(text, kind, normal, for_s):
    condition = parse_condition(text)
    assert (condition.kind, condition.text, condition.for_s) == (kind, normal, for_s)
    assert parse_condition(condition.text) == condition  # stored text reads back the same


@pytest.mark.parametrize(("text", "says"), [
    ("", "is empty"),
    ("state == DONE", "'DONE' is not a job state"),
    ("gpu_temp > 80", "not something corral measures"),
    ("gpu_utilization < ten", "not understood"),
    ("no_progress", "needs a duration"),
    ("gpu_utilization < 10 for soon", "cannot read 'soon' as a duration"),
    ("time_left > 10m", "time_left is compared with <"),
    ("queue_wait > 1h for 5m", "takes no `for`"),
    ("rm -rf /", "not understood"),
    ("state == FAILED for 5m", "takes no `for`"),
    ("metric.loss is nan for 5m", "takes no `for`"),
    ("metric.lo\x00ss is nan", "control characters"),
    ("x" * 600, "longer than 500"),
])
def test_bad_conditions_name_the_field_and_the_forms(text, says):
    with pytest.raises(InvalidRequest) as caught:
        parse_condition(text)
    assert caught.value.field == "condition"
    assert says in caught.value.message
    assert caught.value.hint  # says what would be understood


def test_state_condition_matches_the_terminal_state():
    condition = parse_condition("state in (FAILED, TIMEOUT)")
    assert holds(condition, running(state="FAILED"), NOW) == (True, "FAILED")
    assert holds(condition, running(state="COMPLETED"), NOW)[0] is False


def test_sample_condition_uses_the_latest_sample_and_only_while_running():
    condition = parse_condition("gpu_utilization < 10 for 15m")
    assert holds(condition, running(sample={"gpu_utilization": 3.0}), NOW) == (True, 3.0)
    assert holds(condition, running(sample={"gpu_utilization": 55.0}), NOW)[0] is False
    assert holds(condition, running(sample={"gpu_utilization": None}), NOW)[0] is False  # no GPUs: never "low"
    assert holds(condition, running(sample=None), NOW)[0] is False
    assert holds(condition, running(state="COMPLETED", sample={"gpu_utilization": 0.0}), NOW)[0] is False


def test_nan_and_metric_threshold_conditions_read_the_tracked_run():
    assert holds(parse_condition("metric.loss is nan"), running(nonfinite={"loss": 1200}), NOW) == (
        True, "non-finite at step 1200")
    assert holds(parse_condition("metric.loss is nan"), running(nonfinite={"acc": 3}), NOW)[0] is False
    assert holds(parse_condition("metric.loss > 5"), running(metrics={"loss": 7.25}), NOW) == (True, 7.25)
    assert holds(parse_condition("metric.loss > 5"), running(metrics={"loss": math.nan}), NOW)[0] is False


def test_hung_time_left_and_queue_wait():
    hung = parse_condition("no_progress for 30m")
    assert holds(hung, running(start_time=NOW - 7200, last_activity=NOW - 1801), NOW) == (True, 1801)
    assert holds(hung, running(start_time=NOW - 7200, last_activity=NOW - 60), NOW)[0] is False
    left = parse_condition("time_left < 10m")
    assert holds(left, running(start_time=NOW - 3100, time_limit_s=3600), NOW) == (True, 500)
    assert holds(left, running(time_limit_s=None), NOW)[0] is False
    wait = parse_condition("queue_wait > 1h")
    assert holds(wait, running(state="PENDING", submit_time=NOW - 3700), NOW) == (True, 3700)
    assert holds(wait, running(state="RUNNING", submit_time=NOW - 3700), NOW)[0] is False


def test_an_episode_fires_once_after_its_duration_and_resolves_when_it_clears():
    for_s = 900.0
    episode, actions = Episode(), []
    for t, true in [(0, True), (600, True), (900, True), (1200, True), (1500, False), (1600, False), (1700, True)]:
        episode, action = advance(episode, true, NOW + t, for_s)
        if action == "fire":
            episode = Episode(episode.true_since, firing_id=1)
        actions.append(action)
    assert actions == [None, None, "fire", None, "resolve", None, None]


def test_a_blip_shorter_than_the_duration_never_fires():
    episode = Episode()
    for t, true in [(0, True), (300, True), (600, False), (700, True), (1000, True)]:
        episode, action = advance(episode, true, NOW + t, 900)
        assert action is None


@given(st.integers(1, 10**7), st.sampled_from([
    "time_left < {d}s", "queue_wait > {d}s", "no_progress for {d}s", "gpu_utilization < 5 for {d}s",
    "state == RUNNING for {d}s", "state in (PENDING, RUNNING) for {d}s", "metric.loss > 2 for {d}s"]))
def test_every_condition_reads_back_from_its_stored_text(seconds, form):
    condition = parse_condition(form.format(d=seconds))
    assert parse_condition(condition.text) == condition  # what the store keeps, a restart reads back


@given(st.lists(st.booleans(), max_size=60))
def test_firings_and_resolutions_alternate(truths):
    episode, events = Episode(), []
    for i, true in enumerate(truths):
        episode, action = advance(episode, true, NOW + i * 10, 30)
        if action == "fire":
            episode = Episode(episode.true_since, firing_id=i + 1)
        if action:
            events.append(action)
    assert all(a != b for a, b in zip(events, events[1:]))
    assert not events or events[0] == "fire"


def test_scopes_pick_jobs_by_id_array_label_and_user():
    assert Scope().covers(running())
    assert Scope(job_id=7).covers(running()) and not Scope(job_id=8).covers(running())
    assert Scope(job_id=5).covers(running(job_id=9, array_job_id=5))  # a rule on an array watches its tasks
    assert Scope(label=("team", "vision")).covers(running()) and not Scope(label=("team", "nlp")).covers(running())
    assert Scope(user="ann").covers(running()) and not Scope(user="bob").covers(running())
    assert parse_scope(job=7, label="team=vision", user="ann") == Scope(7, ("team", "vision"), "ann")
    for field, kwargs in (("job", {"job": -1}), ("job", {"job": 2**40}), ("label", {"label": "novalue"}),
                          ("label", {"label": "k=" + "v" * 500}), ("user", {"user": ""}), ("user", {"user": "a\x00b"})):
        with pytest.raises(InvalidRequest) as caught:
            parse_scope(**kwargs)
        assert caught.value.field == field


def test_rule_fields_are_checked():
    assert check_rule_fields("job-failed", "critical", None) == ("job-failed", "critical", "")
    assert check_rule_fields("ok", "info", "line 1\n\tline 2 (日本)")[2] == "line 1\n\tline 2 (日本)"
    for args, field in ((("bad name", "info", ""), "name"), (("ok", "fatal", ""), "severity"),
                        (("ok", "info", "{password}"), "message"), (("ok", "info", "x" * 2001), "message"),
                        (("ok", "info", "nul\x00"), "message"), (("ok", "info", "run \u202egnp.sh"), "message"),
                        (("ok", "info", "\x1b]0;URGENT\x07"), "message"), (("ok", "info", "csi \x9b2J"), "message")):
        with pytest.raises(InvalidRequest) as caught:
            check_rule_fields(*args)
        assert caught.value.field == field


def test_messages_fill_known_placeholders_and_nothing_else():
    rule = Rule(1, "low-gpu", "warning", parse_condition("gpu_utilization < 10 for 15m"), "")
    facts = running()
    assert render_message("{name} ({job}) of {user}: GPU at {value}%", rule, facts, 3.0) == "train (7) of ann: GPU at 3.0%"
    assert render_message("", rule, facts, 3.0) == "job 7 (train): gpu_utilization < 10 for 15m (value 3.0%)"
    assert render_message("{unknown} stays", rule, facts, None) == "{unknown} stays"
    assert render_message("{job.__class__} is text", rule, facts, None) == "{job.__class__} is text"


def test_a_firings_value_carries_its_unit():
    from corral.core.monitoring.alerts import value_text

    hung = Rule(2, "hung", "warning", parse_condition("no_progress for 1m"), "")
    assert value_text(hung.condition, 70) == "70 s" and value_text(hung.condition, 1801) == "1801 s (30 min)"
    assert render_message("", hung, running(), 70) == "job 7 (train): no_progress for 1m (value 70 s)"
    assert value_text(parse_condition("rss_mb > 100"), 512.5) == "512.5 MB"
    assert value_text(parse_condition("metric.loss > 5"), 7.25) == "7.25"
    assert value_text(parse_condition("state == FAILED"), "FAILED") == "FAILED"


def test_sharing_a_channel_takes_user_names_or_all_and_refuses_anything_else():
    from corral.core.monitoring.alerts import EVERYONE, may_use_channel, parse_sharing

    assert parse_sharing({"users": ["bob", "alice", "bob"]}) == ["alice", "bob"]
    assert parse_sharing({"all": True}) == [EVERYONE]
    assert parse_sharing({"users": []}) is None and parse_sharing({"users": [], "all": False}) is None
    for body, field in (({}, "body"), ([], "body"), ({"users": "alice"}, "users"), ({"users": ["*"]}, "users"),
                        ({"users": ["a b"]}, "users"), ({"users": ["a,b"]}, "users"), ({"users": [""]}, "users"),
                        ({"users": ["\ud800"]}, "users"), ({"all": "yes"}, "all"),
                        ({"all": True, "users": ["a"]}, "users"), ({"everyone": True}, "everyone"),
                        ({"all": False}, "users"), ({"users": ["u"] * 1001}, "users")):
        with pytest.raises(InvalidRequest) as caught:
            parse_sharing(body)
        assert caught.value.field == field, body
    assert may_use_channel(None, "alice", True) and not may_use_channel(None, "alice", False)
    assert may_use_channel(["alice"], "alice", False) and not may_use_channel(["alice"], "bob", False)
    assert may_use_channel([EVERYONE], "bob", False) and not may_use_channel("alice", "alice", False)
