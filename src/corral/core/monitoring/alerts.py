"""Alert rules: their conditions, scopes and episodes, as pure functions of facts and the time.

A condition is one line a person writes (`corral alert create --condition ...`, or
the API's `condition` field):

    state == FAILED                     state in (FAILED, TIMEOUT, OUT_OF_MEMORY)
    gpu_utilization < 10 for 15m        cpu_utilization > 95 for 5m     rss_mb > 60000
    metric.loss is nan                  metric.val_acc < 0.2 for 10m
    no_progress for 30m                 (no log output and no tracked step: a hung job)
    time_left < 10m                     queue_wait > 2h

An *episode* starts when a condition has held for its `for` duration (the rule
fires once) and ends when the condition clears (the firing resolves). Checking
the same true condition again and again sends nothing new.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.core.access.bodies import first_unprintable
from corral.core.jobspec.states import JobState
from corral.core.units.units import parse_duration_s
from corral.errors import InvalidRequest

SEVERITIES = ("info", "warning", "critical")
SAMPLE_FIELDS = (
    "gpu_utilization", "gpu_memory_mb", "gpu_power_w", "gpu_temperature_c", "cpu_utilization", "rss_mb",
    "read_mb_s", "write_mb_s",
)
_COMPARE = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__}
_STATES = tuple(s.value for s in JobState)
_LASTING_STATES = ("PENDING", "RUNNING")  # states a job stays in, so a `for` means something
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FOR = re.compile(r"^(?P<body>.*?)\s+for\s+(?P<duration>\S+)$", re.IGNORECASE | re.DOTALL)
_THRESHOLD = re.compile(r"^(?P<subject>[A-Za-z_][\w./-]*)\s*(?P<op><=|>=|<|>)\s*(?P<value>[-+]?[\d.]+(?:e[-+]?\d+)?\w*)$",
                        re.IGNORECASE)
_NONFINITE = re.compile(r"^metric\.(?P<key>\S+)\s+is\s+(?:nan|inf|not\s+finite)$", re.IGNORECASE)
_STATE_EQ = re.compile(r"^state\s*==\s*(?P<state>\w+)$", re.IGNORECASE)
_STATE_IN = re.compile(r"^state\s+in\s*\(?(?P<states>[\w\s,]+?)\)?$", re.IGNORECASE)
_PROGRESS = re.compile(r"^(?:no_progress|hung)$", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
FORMS = ("state == FAILED", "state in (FAILED, TIMEOUT)", "gpu_utilization < 10 for 15m", "metric.loss is nan",
         "metric.KEY > N [for D]", "no_progress for 30m", "time_left < 10m", "queue_wait > 1h")


@dataclass(frozen=True)
class Condition:
    """A parsed condition; `text` is its normal form."""

    kind: str  # state | sample | nonfinite | metric | no_progress | time_left | queue_wait
    text: str
    states: frozenset[str] = frozenset()
    subject: str | None = None  # a sample field or a tracked metric's key
    op: str | None = None
    threshold: float | None = None
    for_s: float = 0.0


@dataclass(frozen=True)
class Scope:
    """Which jobs a rule watches: one job, a label, a user; all of them when empty."""

    job_id: int | None = None
    label: tuple[str, str] | None = None
    user: str | None = None

    def covers(self, facts: JobFacts) -> bool:
        if self.job_id is not None and facts.job_id != self.job_id and facts.array_job_id != self.job_id:
            return False
        if self.label is not None and facts.labels.get(self.label[0]) != self.label[1]:
            return False
        return self.user is None or facts.user == self.user


@dataclass(frozen=True)
class Rule:
    id: int
    name: str
    severity: str
    condition: Condition
    message: str
    scope: Scope = Scope()
    channels: tuple[str, ...] = ()
    owner: str | None = None
    """Who made it: a channel goes out for the rule only while its owner may use it."""


@dataclass(frozen=True)
class JobFacts:
    """What the monitor knows about one job at one moment."""

    job_id: int
    name: str
    user: str
    state: str
    submit_time: float
    labels: Mapping[str, str] = field(default_factory=dict)
    array_job_id: int | None = None
    start_time: float | None = None
    time_limit_s: float | None = None
    sample: Mapping[str, float | None] | None = None  # the latest sample
    metrics: Mapping[str, float | None] = field(default_factory=dict)  # tracked metrics' last values
    nonfinite: Mapping[str, int] = field(default_factory=dict)  # tracked key -> first step it was NaN/inf
    last_activity: float | None = None  # its last log write or tracked step, else its start


def parse_condition(text: str) -> Condition:
    """Read a condition line.

    Raises:
        InvalidRequest: `condition`, with the forms that are understood.
    """
    if not isinstance(text, str) or not text.strip():
        raise _bad(text, "is empty")
    if len(text) > 500 or not _printable(text):
        raise _bad(text[:80], "is longer than 500 characters or holds control characters")
    body = " ".join(text.split())
    for_s = 0.0
    matched = _FOR.match(body)
    if matched:
        body = matched.group("body").strip()
        for_s = float(_duration(matched.group("duration"), text))
    state_names: list[str] | None = None
    if m := _STATE_EQ.match(body):
        state_names = [m.group("state")]
    elif m := _STATE_IN.match(body):
        state_names = [s for s in re.split(r"[\s,]+", m.group("states")) if s]
    if state_names is not None:
        states = frozenset(_state(s, text) for s in state_names)
        if not states:
            raise _bad(text, "names no state")
        if for_s and all(s not in _LASTING_STATES for s in states):
            raise _bad(text, "takes no `for`: a job that ends leaves its state at once",
                       "a `for` only goes with PENDING or RUNNING")
        normal = f"state == {next(iter(states))}" if len(states) == 1 else f"state in ({', '.join(sorted(states))})"
        return Condition("state", normal + _for_text(for_s), states=states, for_s=for_s)
    if m := _NONFINITE.match(body):
        if for_s:
            raise _bad(text, "takes no `for`: a series that went NaN stays so")
        key = m.group("key")
        return Condition("nonfinite", f"metric.{key} is nan", subject=key)
    if _PROGRESS.match(body):
        if not for_s:
            raise _bad(text, "needs a duration", "write no_progress for 30m")
        return Condition("no_progress", f"no_progress for {_format(for_s)}", threshold=for_s)
    if m := _THRESHOLD.match(body):
        subject, op, raw = m.group("subject"), m.group("op"), m.group("value")
        if subject.lower() in ("time_left", "queue_wait"):
            if for_s:
                raise _bad(text, f"{subject} takes no `for`")
            kind = subject.lower()
            if (kind == "time_left") != op.startswith("<"):
                raise _bad(text, f"{kind} is compared with {'<' if kind == 'time_left' else '>'}")
            threshold = float(_duration(raw, text))
            return Condition(kind, f"{kind} {op} {_format(threshold)}", op=op, threshold=threshold)
        threshold = _number(raw, text)
        if subject.startswith("metric.") and len(subject) > 7:
            return Condition("metric", f"{subject} {op} {raw}{_for_text(for_s)}", subject=subject[7:], op=op,
                             threshold=threshold, for_s=for_s)
        if subject.lower() in SAMPLE_FIELDS:
            subject = subject.lower()
            return Condition("sample", f"{subject} {op} {raw}{_for_text(for_s)}", subject=subject, op=op,
                             threshold=threshold, for_s=for_s)
        raise _bad(text, f"{subject!r} is not something corral measures",
                   f"use one of {', '.join(SAMPLE_FIELDS)}, metric.KEY, time_left or queue_wait")
    raise _bad(text, "is not understood")


def holds(condition: Condition, facts: JobFacts, now: float) -> tuple[bool, float | str | None]:
    """Whether the condition is true of the job now, and the value that made it so."""
    kind = condition.kind
    if kind == "state":
        return facts.state in condition.states, facts.state
    if kind == "queue_wait":
        waited = now - facts.submit_time
        return facts.state == JobState.PENDING.value and waited > (condition.threshold or 0), round(waited)
    if facts.state != JobState.RUNNING.value:
        return False, None
    if kind == "time_left":
        if facts.time_limit_s is None or facts.start_time is None:
            return False, None
        left = facts.start_time + facts.time_limit_s - now
        return _COMPARE[condition.op or "<"](float(left), condition.threshold or 0.0), round(left)
    if kind == "no_progress":
        since = facts.last_activity or facts.start_time
        if since is None:
            return False, None
        quiet = now - since
        return quiet >= (condition.threshold or 0), round(quiet)
    if kind == "nonfinite":
        step = facts.nonfinite.get(condition.subject or "")
        return step is not None, (f"non-finite at step {step}" if step is not None else None)
    values = facts.sample if kind == "sample" else facts.metrics
    value = (values or {}).get(condition.subject or "")
    if value is None or math.isnan(value):
        return False, None
    return _COMPARE[condition.op or "<"](float(value), condition.threshold or 0.0), round(value, 3)


_UNITS = {"gpu_utilization": "%", "cpu_utilization": "%", "gpu_memory_mb": " MB", "rss_mb": " MB",
          "gpu_power_w": " W", "gpu_temperature_c": " °C", "read_mb_s": " MB/s", "write_mb_s": " MB/s",
          "cpu_time_s": " s", "processes": " processes"}
_DURATIONS = frozenset({"no_progress", "time_left", "queue_wait"})


def value_text(condition: Condition, value: float | str | None) -> str | None:
    """A firing's value as a person reads it, with its unit: `70 s`, `1801 s (30 min)`, `3.0%`, `512.0 MB`."""
    if value is None or isinstance(value, str):
        return value
    if condition.kind in _DURATIONS:
        seconds = int(value)
        minutes = round(abs(seconds) / 60)
        if abs(seconds) < 90:
            return f"{seconds} s"
        return f"{seconds} s ({minutes} min)" if minutes < 90 else f"{seconds} s ({minutes // 60} h {minutes % 60:02d} min)"
    number = str(value)
    if condition.kind == "sample":
        return number + _UNITS.get(condition.subject or "", "")
    return number


@dataclass(frozen=True)
class Episode:
    """One (rule, job)'s standing: since when the condition holds, and its open firing."""

    true_since: float | None = None
    firing_id: int | None = None


def advance(episode: Episode, true: bool, now: float, for_s: float) -> tuple[Episode, str | None]:
    """The next standing and what to do: `fire`, `resolve` or None.

    A condition must hold `for_s` seconds before it fires, and fires once per episode.
    """
    if not true:
        if episode.firing_id is not None:
            return Episode(), "resolve"
        return Episode(), None
    since = episode.true_since if episode.true_since is not None else now
    if episode.firing_id is None and now - since >= for_s:
        return Episode(since, episode.firing_id), "fire"
    return Episode(since, episode.firing_id), None


def parse_scope(job: Any = None, label: Any = None, user: Any = None) -> Scope:
    """A scope from the API's fields.

    Raises:
        InvalidRequest: the field at fault.
    """
    if job is not None and (isinstance(job, bool) or not isinstance(job, int) or not 0 < job < 2**31):
        raise InvalidRequest("job", f"must be a job id, got {job!r}")
    pair = None
    if label is not None:
        if (not isinstance(label, str) or "=" not in label or not label.split("=", 1)[0] or len(label) > 400
                or not _printable(label)):
            raise InvalidRequest("label", f"must be KEY=VALUE (at most 400 printable characters), got {label!r}",
                                 "e.g. team=vision")
        key, value = label.split("=", 1)
        pair = (key, value)
    if user is not None and (not isinstance(user, str) or not user or len(user) > 64 or not _printable(user)):
        raise InvalidRequest("user", f"must be a user name, got {user!r}")
    return Scope(job, pair, user)


EVERYONE = "*"
"""In a channel's `shared_with`: every user may name it."""
MAX_SHARED_WITH = 1000


def may_use_channel(shared_with: Any, user: str, is_admin: bool) -> bool:
    """Whether `user` may name a channel in a rule: admins any; others only one an admin shared with them.

    A channel runs a program or posts to a URL as the server's user, with text the rule's owner
    writes: using one is an admin's to grant.
    """
    if is_admin:
        return True
    return isinstance(shared_with, list) and (EVERYONE in shared_with or user in shared_with)


def parse_sharing(body: Any) -> list[str] | None:
    """Whom a channel is shared with, from the API's body: `{"users": [...]}` (empty: nobody) or
    `{"all": true}`. Returns the stored form: user names, [EVERYONE], or None for nobody.

    Raises:
        InvalidRequest: the field at fault.
    """
    if not isinstance(body, Mapping) or not body:
        raise InvalidRequest("body", 'must be {"users": ["alice", ...]} or {"all": true}',
                             'share with nobody: {"users": []}')
    unknown = sorted(set(body) - {"users", "all"})
    if unknown:
        raise InvalidRequest(unknown[0], "unknown field", "known: users, all")
    everyone, users = body.get("all", False), body.get("users")
    if not isinstance(everyone, bool):
        raise InvalidRequest("all", f"must be true or false, got {everyone!r}")
    if everyone:
        if users:
            raise InvalidRequest("users", "cannot be given with all: true", "give one of them")
        return [EVERYONE]
    if users is None:
        raise InvalidRequest("users", "is missing", 'give {"users": [...]} (empty: nobody), or {"all": true}')
    if not isinstance(users, list) or len(users) > MAX_SHARED_WITH:
        raise InvalidRequest("users", f"must be a list of at most {MAX_SHARED_WITH} user names")
    for user in users:
        if (not isinstance(user, str) or not user or len(user) > 64 or user == EVERYONE or not _printable(user)
                or any(c.isspace() or c == "," for c in user)):
            raise InvalidRequest("users", f"{user!r} is not a user name", 'for everybody, give {"all": true}')
    return sorted(set(users)) or None


def check_rule_fields(name: Any, severity: Any, message: Any) -> tuple[str, str, str]:
    """The name, severity and message of a new rule, checked.

    Raises:
        InvalidRequest: the field at fault.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidRequest("name", f"must be 1-64 letters, digits, '-', '_' or '.', got {name!r}")
    if severity not in SEVERITIES:
        raise InvalidRequest("severity", f"must be one of {', '.join(SEVERITIES)}, got {severity!r}")
    if message is None:
        message = ""
    if not isinstance(message, str) or len(message) > 2000 or not _printable(message, newlines=True):
        raise InvalidRequest("message", "must be text of at most 2,000 characters, without control characters")
    for placeholder in _PLACEHOLDER.findall(message):
        if placeholder not in _PLACEHOLDERS:
            raise InvalidRequest("message", f"unknown placeholder {{{placeholder}}}",
                                 f"use {', '.join('{' + p + '}' for p in _PLACEHOLDERS)}")
    return name, severity, message


_PLACEHOLDERS = ("job", "name", "user", "state", "value", "rule", "condition", "severity")


def render_message(template: str, rule: Rule, facts: JobFacts, value: object) -> str:
    """The rule's message with its placeholders filled; the condition when it has none.

    Plain substitution of known names: a template is data, never format-string code.
    """
    values = {
        "job": str(facts.job_id), "name": facts.name, "user": facts.user, "state": facts.state,
        "value": "" if value is None else str(value), "rule": rule.name,  # bare: templates say their own unit "condition": rule.condition.text,
        "severity": rule.severity,
    }
    if not template:
        shown = value_text(rule.condition, value)  # type: ignore[arg-type]
        return f"job {facts.job_id} ({facts.name}): {rule.condition.text}" + (f" (value {shown})" if shown else "")
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _printable(text: str, newlines: bool = False) -> bool:
    """No control characters (a NUL cannot even be stored by PostgreSQL), bidi overrides, nor lone surrogates."""
    return first_unprintable(text, "\n\t" if newlines else "") is None


def _duration(text: str, condition: str) -> int:
    try:
        seconds = parse_duration_s(text if not text.isdigit() else f"{text}s", field="condition")
    except InvalidRequest:
        raise _bad(condition, f"cannot read {text!r} as a duration", "write 30s, 15m, 2h or 1d") from None
    if seconds is None:
        raise _bad(condition, "needs a finite duration")
    return seconds


def _number(text: str, condition: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _bad(condition, f"{text!r} is not a number") from None


def _state(name: str, condition: str) -> str:
    upper = name.upper()
    if upper not in _STATES:
        raise _bad(condition, f"{name!r} is not a job state", f"states: {', '.join(_STATES)}")
    return upper


def _format(seconds: float) -> str:
    """A duration the parser reads back: the largest whole unit, else seconds."""
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s % size == 0 and s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def _for_text(for_s: float) -> str:
    return f" for {_format(for_s)}" if for_s else ""


def _bad(text: object, problem: str, hint: str | None = None) -> InvalidRequest:
    return InvalidRequest("condition", f"{text!r} {problem}", hint or f"write one of: {'; '.join(FORMS)}")
