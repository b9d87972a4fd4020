"""Rule evaluation: `RuleEvaluator` holds the alert rules, whom each channel is shared with, and the
open episodes, and turns a tick's facts into firings and resolutions (one firing per episode).

It lives on the monitor's worker thread alone: ticks and every change to the rules run there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from corral.core.monitoring import alerts as A
from corral.core.jobspec.states import JobState
from corral.errors import InvalidRequest
from corral.executor.logs import last_write
from corral.monitor.views import rule_of
from corral.store.monitoring import SAMPLE_COLUMNS, MonitorStore

if TYPE_CHECKING:
    from corral.monitor.runtime import Announcer
    from corral.monitor.sampling import JobSample
    from corral.monitor.snapshot import Snapshot

log = logging.getLogger("corral.monitor")

STALE_SAMPLES = 3  # a sample older than this many intervals no longer speaks for the job

_ENDED_STATES = frozenset(state.value for state in JobState if state.is_terminal())


class RuleEvaluator:
    def __init__(self, *, engine: Any, store: MonitorStore, is_admin: Callable[[str], bool], announcer: Announcer,
                 on_fired: Callable[[], None]) -> None:
        self.engine = engine
        self.store = store
        self.is_admin = is_admin
        self.announcer = announcer
        self.on_fired = on_fired  # deliveries were queued: the dispatcher looks at once
        self.rules: list[A.Rule] = []
        self.sharing: dict[str, Any] = {}  # channel -> whom it is shared with
        self.episodes: dict[tuple[int, int], A.Episode] = {}

    def load(self) -> None:
        """The rules and the open firings (an episode open before a restart stays one)."""
        with self.engine.begin() as conn:
            self.rules = []
            for row in self.store.rules(conn):
                try:
                    self.rules.append(rule_of(row))
                except InvalidRequest as exc:  # a rule no longer understood must not keep the server down
                    log.error("alert rule %s is ignored: %s (delete it and create it again)", row["name"], exc.message)
            self.sharing = {c["name"]: c["shared_with"] for c in self.store.channels(conn)}
            for firing in self.store.open_firings(conn):
                if firing["rule_id"] is not None and firing["job_id"] is not None:
                    self.episodes[(firing["rule_id"], firing["job_id"])] = A.Episode(None, firing["id"])

    def drop_rule(self, rule_id: int) -> None:
        self.rules = [r for r in self.rules if r.id != rule_id]
        for key in [k for k in self.episodes if k[0] == rule_id]:
            del self.episodes[key]

    def evaluate(self, facts: Sequence[A.JobFacts], now: float) -> None:
        """Advance every (rule, job) episode; record firings and resolutions in one transaction, and
        keep the new episodes only once it has committed (a failed commit is tried again next tick)."""
        episodes = dict(self.episodes)
        fire: list[tuple[A.Rule, A.JobFacts, Any]] = []
        resolve: list[tuple[A.Rule | None, int]] = []
        seen: set[tuple[int, int]] = set()
        rules = list(self.rules)
        for rule in rules:
            condition = rule.condition
            for fact in facts:
                if not rule.scope.covers(fact):
                    continue
                key = (rule.id, fact.job_id)
                seen.add(key)
                true, value = A.holds(condition, fact, now)
                before = episodes.get(key, A.Episode())
                episode, action = A.advance(before, true, now, condition.for_s)
                if action == "fire":
                    fire.append((rule, fact, value))
                elif action == "resolve" and before.firing_id is not None:
                    resolve.append((rule, before.firing_id))
                if episode.true_since is None and episode.firing_id is None:
                    episodes.pop(key, None)
                else:
                    episodes[key] = episode
        by_id = {r.id: r for r in rules}
        for key in [k for k in episodes if k not in seen]:
            # The job left the watched set (it ended, or went back to waiting): its episode is over.
            if episodes[key].firing_id is not None:
                resolve.append((by_id.get(key[0]), episodes[key].firing_id))  # type: ignore[arg-type]
            del episodes[key]
        if fire or resolve:
            self._record(fire, resolve, episodes, now)
            self.on_fired()
            self.announcer.publish_threadsafe("alerts", {"fired": len(fire), "resolved": len(resolve)})
        self.episodes = episodes

    def _record(self, fire: Sequence[tuple[A.Rule, A.JobFacts, Any]], resolve: Sequence[tuple[A.Rule | None, int]],
                episodes: dict[tuple[int, int], A.Episode], now: float) -> None:
        with self.engine.begin() as conn:
            for rule, fact, value in fire:
                row = {
                    "rule_id": rule.id, "rule": rule.name, "severity": rule.severity,
                    "condition": rule.condition.text, "job_id": fact.job_id, "job_name": fact.name,
                    "user": fact.user, "value": A.value_text(rule.condition, value),
                    "message": A.render_message(rule.message, rule, fact, value), "fired_at": now,
                }
                key = (rule.id, fact.job_id)
                ended = fact.state in _ENDED_STATES
                # about an ended job, an event that nothing clears: "fired", never "resolved", so a person
                # reading the list sees the failure as what it is
                firing_id = self.store.fire(conn, row, rule.channels, now, self.refused(rule),
                                            status="fired" if ended else "firing")
                if ended:
                    episodes.pop(key, None)
                else:
                    episodes[key] = replace(episodes.get(key, A.Episode(now)), firing_id=firing_id)
                log.info("alert %s fired for job %d", rule.name, fact.job_id)
            for gone, firing_id in resolve:  # gone: None when the rule was deleted
                self.store.resolve(conn, firing_id, gone.channels if gone else (), now,
                                   self.refused(gone) if gone else None)

    def refused(self, rule: A.Rule) -> dict[str, str]:
        """The rule's channels its owner may no longer use (an admin stopped sharing them), each with why."""
        if rule.owner is None or not rule.channels or self.is_admin(rule.owner):
            return {}
        return {c: f"channel {c!r} is not shared with the rule's owner ({rule.owner}); an admin must share it"
                for c in rule.channels if c in self.sharing and not A.may_use_channel(self.sharing[c], rule.owner, False)}


def enrich(snap: Snapshot, heads: Sequence[Mapping[str, Any]], newest: Mapping[int, Mapping[str, Any]],
           latest: Mapping[int, JobSample], interval_s: float) -> list[A.JobFacts]:
    """The running jobs' facts completed with their latest fresh sample and their newest run's metrics
    (an older run of the job, finished, speaks no more for it)."""
    job_of_run = {run["id"]: job_id for job_id, run in newest.items()}
    metrics: dict[int, dict[str, float | None]] = {}
    nonfinite: dict[int, dict[str, int]] = {}
    tracked_at: dict[int, float] = {}
    for head in heads:
        job_id = job_of_run.get(head["run_id"])
        if job_id is None:
            continue
        metrics.setdefault(job_id, {})[head["key"]] = head["last_value"]
        if head["first_nonfinite_step"] is not None:
            nonfinite.setdefault(job_id, {})[head["key"]] = int(head["first_nonfinite_step"])
        tracked_at[job_id] = max(tracked_at.get(job_id, 0.0), float(head["last_time"]))
    fresh_after = snap.now - STALE_SAMPLES * interval_s
    out = []
    for facts in snap.facts:
        if facts.state != JobState.RUNNING.value:
            out.append(facts)
            continue
        sample = latest.get(facts.job_id)
        if sample is not None and sample.time < fresh_after:
            sample = None
        activity = [t for t in (facts.start_time, tracked_at.get(facts.job_id), last_write(snap.logs.get(facts.job_id, ())))
                    if t is not None]
        out.append(replace(
            facts, sample={name: getattr(sample, name) for name in SAMPLE_COLUMNS} if sample else None,
            metrics=metrics.get(facts.job_id, {}), nonfinite=nonfinite.get(facts.job_id, {}),
            last_activity=max(activity) if activity else None,
        ))
    return out
