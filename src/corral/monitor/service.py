"""The monitor: samples running jobs, keeps their system metrics, evaluates alert rules, sends alerts.

Each tick (every `interval_s`, and at once when a job ends) takes a snapshot of the
jobs on the event loop, then does everything else on one worker thread: sample,
store, read the jobs' tracked runs, evaluate the rules and record firings. Only
that thread touches the episodes, so a rule fires once per episode. Deliveries
are rows in the database, sent by a thread of their own with retries, so a slow
mail server never delays sampling and nothing is lost across a restart.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from corral.core import alerts as A
from corral.core.states import JobState
from corral.core.timespec import parse_moment
from corral.errors import Conflict, InvalidRequest, NotFound
from corral.executor import files
from corral.home import HomeLayout
from corral.monitor.progress import Progress, ProgressTracker
from corral.store.monitoring import SAMPLE_COLUMNS, MonitorStore

if TYPE_CHECKING:
    from corral.core.job import Job
    from corral.monitor.channels import SmtpSettings
    from corral.monitor.sampling import JobSample, JobSampler
    from corral.server.events import EventBus
    from corral.server.service import JobService
    from corral.store.runs import RunStore

log = logging.getLogger("corral.monitor")

DEFAULT_INTERVAL_S = 10.0
MAX_QUERY_POINTS = 10_000
DISPATCH_IDLE_S = 5.0
DEFAULT_RETENTION_DAYS = 90.0  # 50 jobs sampled every 10 s add ~430,000 rows a day
PRUNE_EVERY_S = 3600.0
PRUNE_BATCH = 20_000
STALE_SAMPLES = 3  # a sample older than this many intervals no longer speaks for the job


@dataclass(frozen=True)
class _Snapshot:
    now: float
    facts: list[A.JobFacts]  # every job the rules may look at
    watched: list[tuple[int, int, tuple[int, ...], int, float, str | None]]  # id, pid, GPUs, cpus, start, cgroup.procs
    logs: dict[int, tuple[str, ...]]  # running job -> its log files
    ended: tuple[Job, ...] = ()  # jobs that ended since the last tick


class MonitorService:
    def __init__(
        self, *, jobs: JobService, engine: Engine, run_store: RunStore, sampler: JobSampler | None,
        interval_s: float = DEFAULT_INTERVAL_S, smtp: SmtpSettings | None = None, clock: Callable[[], float] = time.time,
        retention_days: float = DEFAULT_RETENTION_DAYS,
    ) -> None:
        from corral.monitor.channels import SmtpSettings

        self.jobs = jobs
        self.engine = engine
        self.store = MonitorStore()
        self.run_store = run_store
        self.sampler = sampler
        self.interval_s = interval_s
        self.retention_s = retention_days * 86400
        self._next_prune = 0.0
        self.smtp = smtp or SmtpSettings()
        self.clock = clock
        self.latest: dict[int, JobSample] = {}
        self.progress: dict[int, Progress] = {}
        self._tracker = ProgressTracker()
        self._rules: list[A.Rule] = []
        self._sharing: dict[str, Any] = {}  # channel -> whom it is shared with; the worker thread's alone
        self._episodes: dict[tuple[int, int], A.Episode] = {}
        self._ended: list[Job] = []
        self._log_paths: dict[int, tuple[str | None, tuple[str, ...]]] = {}  # running job -> (its node, its logs)
        self._facts: dict[int, tuple[object, A.JobFacts]] = {}  # job -> (what its facts were made from, the facts)
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-monitor")
        self._readers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="corral-monitor-read")
        self._dispatch_wake = threading.Event()
        self._closed = False
        self._dispatcher = threading.Thread(target=self._dispatch_loop, name="corral-alerts", daemon=True)
        self.events: EventBus | None = None  # the dashboard's live updates, once the app is made

    # -- life -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the rules and the open firings (an episode open before a restart stays one), start sending."""
        with self.engine.begin() as conn:
            self._rules = []
            for row in self.store.rules(conn):
                try:
                    self._rules.append(_rule(row))
                except InvalidRequest as exc:  # a rule no longer understood must not keep the server down
                    log.error("alert rule %s is ignored: %s (delete it and create it again)", row["name"], exc.message)
            self._sharing = {c["name"]: c["shared_with"] for c in self.store.channels(conn)}
            for firing in self.store.open_firings(conn):
                if firing["rule_id"] is not None and firing["job_id"] is not None:
                    self._episodes[(firing["rule_id"], firing["job_id"])] = A.Episode(None, firing["id"])
        self._dispatcher.start()

    def job_ended(self, job: Job) -> None:
        """A JobService listener: check state rules for the job at once, not at the next tick."""
        self._ended.append(job)
        if self._wake is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def run(self) -> None:
        """Tick until cancelled."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        loop = self._loop
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            except TimeoutError:
                pass
            self._wake.clear()
            snapshot = None
            try:
                snapshot = self._snapshot()
                await loop.run_in_executor(self._worker, self._tick, snapshot)
            except Exception:  # noqa: BLE001 - the monitor must outlive any one bad tick
                log.exception("monitor tick failed")
                if snapshot is not None:
                    self._ended[:0] = snapshot.ended  # looked at again next tick: no state alert is lost

    def close(self) -> None:
        self._closed = True
        self._dispatch_wake.set()
        self._worker.shutdown(wait=True, cancel_futures=True)
        self._readers.shutdown(wait=False, cancel_futures=True)
        if self._dispatcher.is_alive():
            self._dispatcher.join(timeout=15)
        if self.sampler is not None and hasattr(self.sampler, "close"):
            self.sampler.close()

    # -- one tick ---------------------------------------------------------------------------------

    def _snapshot(self) -> _Snapshot:
        """Everything the tick needs from the job service, copied on the loop thread."""
        now = self.clock()
        ended, self._ended = self._ended, []
        job_processes = getattr(self.jobs.backend, "job_processes", None)
        wants_pending = any(r.condition.kind == "queue_wait" or
                            (r.condition.kind == "state" and "PENDING" in r.condition.states) for r in self._rules)
        facts, watched, logs = [], [], {}
        jobs = {job.id: job for job in self.jobs.active.values()} | {job.id: job for job in ended}
        for job in jobs.values():
            if job.is_array or (job.state is JobState.PENDING and not wants_pending):
                continue
            facts.append(self._facts_of(job))
            if job.state is JobState.RUNNING:
                logs[job.id] = self._logs_of(job)
                processes = job_processes(job.id) if job_processes is not None else None
                if processes is not None and job.start_time is not None:
                    watched.append((job.id, processes.pid, tuple(job.gpu_ids or ()), job.spec.cpus, job.start_time,
                                    processes.procs_file))
        if len(self._log_paths) > 2 * len(logs) + 64:
            self._log_paths = {job_id: paths for job_id, paths in self._log_paths.items() if job_id in logs}
        if len(self._facts) > 2 * len(jobs) + 64:
            self._facts = {job_id: made for job_id, made in self._facts.items() if job_id in jobs}
        return _Snapshot(now, facts, watched, logs, tuple(ended))

    def _facts_of(self, job: Job) -> A.JobFacts:
        """A job's facts for the rules, made again only when its state, start or spec changed."""
        key = (job.state, job.start_time, job.spec)
        cached = self._facts.get(job.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        facts = _facts(job)
        self._facts[job.id] = (key, facts)
        return facts

    def _logs_of(self, job: Job) -> tuple[str, ...]:
        """A running job's log files, worked out once per start (a snapshot of a thousand running jobs
        runs on the event loop, and filling in patterns is most of its cost)."""
        cached = self._log_paths.get(job.id)
        if cached is not None and cached[0] == job.node:
            return cached[1]
        paths = tuple({job.log_path("stdout"), job.log_path("stderr")})
        self._log_paths[job.id] = (job.node, paths)
        return paths

    def _tick(self, snap: _Snapshot) -> None:
        samples = self._sample(snap.watched)
        running = [f.job_id for f in snap.facts if f.state == JobState.RUNNING.value]
        runs: list[dict[str, Any]] = []
        heads: list[dict[str, Any]] = []
        try:
            with self.engine.begin() as conn:
                self.store.add_samples(conn, [_sample_row(s) for s in samples])
                runs = self.store.runs_of(conn, running)
                heads = self.store.series_heads(conn, [r["id"] for r in runs])
                self._append_system_metrics(conn, runs, samples)
        except Exception:  # noqa: BLE001 - without this tick's samples, the rules are still checked
            log.exception("could not store this tick's samples")
        latest = dict(self.latest)
        for sample in samples:
            latest[sample.job_id] = sample
        keep = set(running)
        self.latest = {job_id: s for job_id, s in latest.items() if job_id in keep}
        newest = _newest_runs(runs)
        self.progress = self._progress(newest, heads)
        if samples and self.events is not None:
            self.events.publish_threadsafe("samples", {"time": snap.now})
            sampled = {s.job_id for s in samples}
            appended = [{"id": r["id"], "job_id": r["job_id"]} for r in runs
                        if r["job_id"] in sampled and r["state"] == "running"]
            if appended:  # their system/... charts have a new point
                self.events.publish_threadsafe("runs", {"runs": appended})
        self._evaluate(self._enrich(snap, heads, newest), snap.now)
        if snap.now >= self._next_prune:
            self._next_prune = snap.now + PRUNE_EVERY_S
            self._prune(snap.now - self.retention_s)

    def _prune(self, before: float) -> None:
        """Forget old samples a batch per transaction, so that the database's writers never wait long."""
        total = 0
        while True:
            with self.engine.begin() as conn:
                pruned = self.store.prune_samples(conn, before, limit=PRUNE_BATCH)
            total += pruned
            if pruned < PRUNE_BATCH:
                break
        if total:
            log.info("pruned %d samples older than %.0f days", total, self.retention_s / 86400)

    def _sample(self, watched: Sequence[tuple[int, int, tuple[int, ...], int, float, str | None]]) -> list[JobSample]:
        if self.sampler is None:
            return []
        from corral.monitor.sampling import WatchedJob

        try:
            return self.sampler.sample([WatchedJob(*w) for w in watched])
        except Exception:  # noqa: BLE001 - a sampler failure costs the tick's samples, never the alerts
            log.exception("sampling failed")
            return []

    def _append_system_metrics(self, conn: Any, runs: Sequence[Mapping[str, Any]], samples: Sequence[JobSample]) -> None:
        """Each running run gets its job's samples as `system/...` metrics, stepped in seconds since
        the run started (W&B's `_runtime`), so its page charts them beside the training curves."""
        import numpy as np

        from corral.tracking.batch import MetricsBatch
        from corral.tracking.series import Points

        by_job = {s.job_id: s for s in samples}
        for run in runs:
            sample = by_job.get(run["job_id"])
            if sample is None or run["state"] != "running":
                continue
            step = np.array([int(sample.time - run["start_time"])], np.int64)
            series = {}
            for name in SAMPLE_COLUMNS:
                value = getattr(sample, name)
                if value is not None and name != "processes":
                    series[f"system/{name}"] = Points(step, np.array([float(value)]), np.array([sample.time]))
            if series:
                self.run_store.append(conn, run["id"], MetricsBatch(None, series))

    def _progress(self, newest: Mapping[int, Mapping[str, Any]], heads: Sequence[Mapping[str, Any]]) -> dict[int, Progress]:
        heads_of: dict[int, list[Mapping[str, Any]]] = {}
        for head in heads:
            heads_of.setdefault(head["run_id"], []).append(head)
        out = {}
        for job_id, run in newest.items():
            progress = self._tracker.update(job_id, run, heads_of.get(run["id"], []))
            if progress is not None:
                out[job_id] = progress
        self._tracker.forget(set(newest))
        return out

    def _enrich(self, snap: _Snapshot, heads: Sequence[Mapping[str, Any]],
                newest: Mapping[int, Mapping[str, Any]]) -> list[A.JobFacts]:
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
        fresh_after = snap.now - STALE_SAMPLES * self.interval_s
        out = []
        for facts in snap.facts:
            if facts.state != JobState.RUNNING.value:
                out.append(facts)
                continue
            sample = self.latest.get(facts.job_id)
            if sample is not None and sample.time < fresh_after:
                sample = None
            activity = [t for t in (facts.start_time, tracked_at.get(facts.job_id), _last_write(snap.logs.get(facts.job_id, ())))
                        if t is not None]
            out.append(replace(
                facts, sample={name: getattr(sample, name) for name in SAMPLE_COLUMNS} if sample else None,
                metrics=metrics.get(facts.job_id, {}), nonfinite=nonfinite.get(facts.job_id, {}),
                last_activity=max(activity) if activity else None,
            ))
        return out

    def _evaluate(self, facts: Sequence[A.JobFacts], now: float) -> None:
        """Advance every (rule, job) episode; record firings and resolutions in one transaction, and
        keep the new episodes only once it has committed (a failed commit is tried again next tick)."""
        episodes = dict(self._episodes)
        fire: list[tuple[A.Rule, A.JobFacts, object]] = []
        resolve: list[tuple[A.Rule | None, int]] = []
        seen: set[tuple[int, int]] = set()
        rules = list(self._rules)
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
                    firing_id = self.store.fire(conn, row, rule.channels, now, self._refused(rule),
                                                status="fired" if ended else "firing")
                    if ended:
                        episodes.pop(key, None)
                    else:
                        episodes[key] = replace(episodes.get(key, A.Episode(now)), firing_id=firing_id)
                    log.info("alert %s fired for job %d", rule.name, fact.job_id)
                for rule, firing_id in resolve:
                    self.store.resolve(conn, firing_id, rule.channels if rule else (), now,
                                       self._refused(rule) if rule else None)
            self._dispatch_wake.set()
            if self.events is not None:
                self.events.publish_threadsafe("alerts", {"fired": len(fire), "resolved": len(resolve)})
        self._episodes = episodes

    def _refused(self, rule: A.Rule) -> dict[str, str]:
        """The rule's channels its owner may no longer use (an admin stopped sharing them), each with why."""
        if rule.owner is None or not rule.channels or self._is_admin(rule.owner):
            return {}
        return {c: f"channel {c!r} is not shared with the rule's owner ({rule.owner}); an admin must share it"
                for c in rule.channels if c in self._sharing and not A.may_use_channel(self._sharing[c], rule.owner, False)}

    def _is_admin(self, user: str) -> bool:
        return self.jobs.access.scope_of(user) == "admin"

    # -- deliveries -------------------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        while not self._closed:
            try:
                with self.engine.begin() as conn:
                    due = self.store.due_deliveries(conn, self.clock())
                for item in due:
                    if self._closed:
                        return
                    self._deliver(item)
                with self.engine.begin() as conn:
                    next_due = self.store.next_due(conn)
            except Exception:  # noqa: BLE001 - a database hiccup: try again shortly
                log.exception("alert dispatch failed")
                next_due = None
            wait = DISPATCH_IDLE_S if next_due is None else min(DISPATCH_IDLE_S, max(0.0, next_due - self.clock()))
            if self._dispatch_wake.wait(wait):
                self._dispatch_wake.clear()

    def _deliver(self, item: Mapping[str, Any]) -> None:
        """One attempt at one delivery, and its outcome recorded: sent, retried later, or given up."""
        from corral.monitor.channels import Channel, DeliveryError, deliver, retry_delay_s

        attempts = item["attempts"] + 1
        error = None
        try:
            if item["channel_type"] is None:
                raise DeliveryError(f"channel {item['channel']!r} no longer exists")
            channel = Channel(item["channel"], item["channel_type"], item["channel_config"])
            deliver(channel, _notification(item["firing"], item["event"]), self.smtp)
        except DeliveryError as exc:
            error = exc.message
        except Exception as exc:  # noqa: BLE001 - one bad row must not hold up the ones behind it
            error = f"{type(exc).__name__}: {exc}"
        with self.engine.begin() as conn:
            if error is None:
                self.store.delivered(conn, item["delivery_id"], attempts, self.clock())
                return
            delay = retry_delay_s(attempts) if item["channel_type"] is not None else None
            retry_at = None if delay is None else self.clock() + delay
            self.store.delivery_failed(conn, item["delivery_id"], attempts, error, retry_at)
        log.warning("alert delivery %d to %s failed (attempt %d%s): %s", item["delivery_id"], item["channel"],
                    attempts, "" if retry_at else ", giving up", error)

    # -- requests: rules, channels, firings --------------------------------------------------------

    async def create_rule(self, body: Any, owner: str, admin: bool = True) -> dict[str, Any]:
        """A new rule of `owner`'s; `admin`: whether they are one (others name only channels shared with them).

        Raises:
            InvalidRequest; Conflict: the name is taken; NotFound: no such channel; Forbidden: an unshared channel.
        """
        if not isinstance(body, Mapping):
            raise InvalidRequest("body", "must be a JSON object")
        known = {"name", "severity", "condition", "message", "job", "label", "user", "channels"}
        unknown = sorted(set(body) - known)
        if unknown:
            raise InvalidRequest(unknown[0], "unknown field", f"known: {', '.join(sorted(known))}")
        name, severity, message = A.check_rule_fields(body.get("name"), body.get("severity", "warning"), body.get("message"))
        condition = A.parse_condition(body.get("condition"))  # type: ignore[arg-type]
        scope = A.parse_scope(body.get("job"), body.get("label"), body.get("user"))
        channels = body.get("channels") or []
        if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
            raise InvalidRequest("channels", "must be a list of channel names")
        row = {
            "name": name, "severity": severity, "condition": condition.text, "message": message,
            "scope_job": scope.job_id, "scope_label": "=".join(scope.label) if scope.label else None,
            "scope_user": scope.user, "channels": list(dict.fromkeys(channels)), "owner": owner, "created": self.clock(),
        }

        def apply() -> dict[str, Any]:
            with self.engine.begin() as conn:
                rule_id = self.store.add_rule(conn, row, admin=admin)
                saved = self.store.rule(conn, name)
            self._rules = [*self._rules, _rule(saved)]
            return _rule_view(saved) | {"id": rule_id}

        created = await self._on_worker(apply)
        self._publish_alerts()
        return created

    def _publish_alerts(self) -> None:
        if self.events is not None:
            self.events.publish("alerts", {})

    async def rules(self) -> list[dict[str, Any]]:
        return await self._read(lambda conn: [_rule_view(r) for r in self.store.rules(conn)])

    async def delete_rule(self, name: str) -> None:
        def apply() -> None:
            with self.engine.begin() as conn:
                rule = self.store.rule(conn, name)
                self.store.delete_rule(conn, name, self.clock())
            self._rules = [r for r in self._rules if r.id != rule["id"]]
            for key in [k for k in self._episodes if k[0] == rule["id"]]:
                del self._episodes[key]

        await self._on_worker(apply)
        self._publish_alerts()

    async def put_channel(self, body: Any, owner: str | None = None) -> dict[str, Any]:
        """Create a channel (`owner`'s, shared with nobody) or replace one's settings."""
        from corral.monitor.channels import parse_channel

        channel = parse_channel(body)

        def apply() -> dict[str, Any]:
            with self.engine.begin() as conn:
                self.store.put_channel(conn, channel.name, channel.type, channel.config, self.clock(), owner)
                saved = next(c for c in self.store.channels(conn) if c["name"] == channel.name)
            self._sharing[channel.name] = saved["shared_with"]
            return _channel_view(saved)

        return await self._on_worker(apply)

    async def share_channel(self, name: str, body: Any) -> dict[str, Any]:
        """Say whom besides admins a channel is for: `{"users": [...]}` (empty: nobody) or `{"all": true}`.

        Raises:
            InvalidRequest: a bad body; NotFound: no such channel.
        """
        shared_with = A.parse_sharing(body)

        def apply() -> dict[str, Any]:
            with self.engine.begin() as conn:
                self.store.share_channel(conn, name, shared_with)
                saved = next(c for c in self.store.channels(conn) if c["name"] == name)
            self._sharing[name] = saved["shared_with"]
            return _channel_view(saved)

        return await self._on_worker(apply)

    async def channels(self, user: str | None = None) -> list[dict[str, Any]]:
        """The channels; for `user` (not an admin), only those shared with them."""
        return await self._read(lambda conn: [_channel_view(c) for c in self.store.channels(conn)
                                              if user is None or A.may_use_channel(c["shared_with"], user, False)])

    async def delete_channel(self, name: str) -> None:
        def apply() -> None:
            with self.engine.begin() as conn:
                self.store.delete_channel(conn, name)
            self._sharing.pop(name, None)

        await self._on_worker(apply)

    async def test_channel(self, name: str) -> dict[str, Any]:
        """Send a test notification now, once, without retries; the error if it fails."""
        from corral.monitor.channels import Channel, DeliveryError, Notification, deliver

        def send() -> dict[str, Any]:
            with self.engine.begin() as conn:
                found = next((c for c in self.store.channels(conn) if c["name"] == name), None)
            if found is None:
                raise NotFound(f"no alert channel named {name!r}")
            note = Notification(
                firing_id=0, rule="test", severity="info", status="firing", condition="test",
                message="a test notification from corral: this channel works", job_id=None, job_name=None,
                user=self.jobs.user, value=None, fired_at=self.clock(), resolved_at=None)
            try:
                deliver(Channel(found["name"], found["type"], found["config"]), note, self.smtp)
            except DeliveryError as exc:
                raise Conflict(f"the test notification did not get through: {exc.message}") from None
            except Exception as exc:  # noqa: BLE001 - answered as a failed test, never a 500
                raise Conflict(f"the test notification did not get through: {type(exc).__name__}") from None
            return {"channel": name, "sent": True}

        return await asyncio.get_running_loop().run_in_executor(self._readers, send)

    async def firings(self, *, status: str | None, job_id: int | None, unacknowledged: bool, limit: int,
                      user: str | None = None) -> list[dict[str, Any]]:
        """Firings newest first; `user`: only those about that user's jobs (what a non-admin sees)."""
        if status not in (None, "firing", "fired", "resolved"):
            raise InvalidRequest("status", f"must be firing, fired or resolved, got {status!r}",
                                 "firing: open; fired: about a job that ended; resolved: its condition cleared")
        return await self._read(lambda conn: [_firing_view(f) for f in self.store.firings(
            conn, status=status, job_id=job_id, unacknowledged=unacknowledged, limit=limit, user=user)])

    async def acknowledge(self, firing_id: int, user: str,
                          check_owner: Callable[[str | None], None] = lambda owner: None) -> dict[str, Any]:
        """`user` acknowledges a firing; `check_owner` raises unless they may, given whose job it is about.

        Raises:
            NotFound: no such firing; Forbidden: from `check_owner`.
        """
        def apply() -> dict[str, Any]:
            with self.engine.begin() as conn:
                check_owner(self.store.firing_owner(conn, firing_id))
                return _firing_view(self.store.acknowledge(conn, firing_id, user, self.clock()))

        acknowledged = await self._on_worker(apply)
        if self.events is not None:
            self.events.publish("alerts", {"acknowledged": firing_id})
        return acknowledged

    # -- requests: metrics, top, efficiency, diagnosis ---------------------------------------------

    async def metrics(self, ref: str, metric: str, *, start: str | None, end: str | None,
                      max_points: int) -> dict[str, Any]:
        """A job's metric over time: a system metric from its samples, else a tracked metric of its runs."""
        job = self.jobs.resolve(ref)
        now = self.clock()
        since = parse_moment(start, now, field="start")
        until = parse_moment(end, now, field="end")
        if since is not None and until is not None and until < since:
            raise InvalidRequest("end", "is before start")
        if not metric or len(metric) > 250:
            raise InvalidRequest("metric", "is required", f"system metrics: {', '.join(SAMPLE_COLUMNS)}; or a tracked key")
        max_points = max(2, min(max_points, MAX_QUERY_POINTS))

        def read(conn: Any) -> dict[str, Any]:
            if metric in SAMPLE_COLUMNS:
                count, points = self.store.series(conn, job.id, metric, start=since, end=until, max_points=max_points)
                source = "samples"
            else:
                count, points = self._tracked_points(conn, job.id, metric, since, until, max_points)
                source = "run"
            return {"job": job.id, "metric": metric, "source": source, "start": since, "end": until,
                    "count": count, "points": [[round(t, 3), _json_value(v)] for t, v in points]}

        return await self._read(read)

    def _tracked_points(self, conn: Any, job_id: int, key: str, since: float | None, until: float | None,
                        max_points: int) -> tuple[int, list[tuple[float, float | None]]]:
        runs = self.store.runs_of(conn, [job_id])
        run = next((r for r in reversed(runs) if self.store.step_range(conn, r["id"], key, None, None)), None)
        if run is None:
            raise NotFound(f"job {job_id} has no system metric or tracked metric {key!r}")
        steps = self.store.step_range(conn, run["id"], key, since, until)
        if steps is None:
            return 0, []
        count, _, points = self.run_store.series(conn, run["id"], key, start=steps[0], end=steps[1],
                                                 max_points=max_points)
        kept = [(float(t), float(v)) for t, v in zip(points.times, points.values)
                if (since is None or t >= since) and (until is None or t <= until)]
        return count, kept

    def top(self) -> list[dict[str, Any]]:
        """Each running job now: its GPUs' utilization and memory, CPU, memory, and training progress."""
        rows = []
        driver = self.gpu_driver()
        for job in self.jobs.active.values():
            if job.state is not JobState.RUNNING:
                continue
            sample = self.latest.get(job.id)
            progress = self.progress.get(job.id)
            rows.append({
                "id": job.id, "ref": job.ref, "name": job.spec.name, "user": job.spec.user, "node": job.node,
                "start_time": job.start_time, "time_limit_s": job.spec.time_limit_s, "cpus": job.spec.cpus,
                "gpu_ids": list(job.gpu_ids or ()), "gpu_driver": driver, "mem_mb": job.spec.mem_mb,
                "sample": _sample_view(sample) if sample else None,
                "progress": progress.to_dict() if progress else None,
            })
        return sorted(rows, key=lambda r: r["id"])

    async def efficiency(self, ref: str) -> dict[str, Any]:
        """How well a local job used what it asked for (`corral eff`), from its samples and the kernel's count."""
        from corral.monitor.efficiency import local_efficiency

        job = self.jobs.resolve(ref)
        if job.start_time is None:
            raise Conflict(f"job {job.ref} has not run yet; its efficiency is known once it runs")
        usage = self._final_usage(job)
        now = self.clock()
        summary = await self._read(lambda conn: self.store.sample_summary(conn, job.id))
        report = local_efficiency(_job_view(job), summary, usage, now=now)
        report["gpu_driver"] = self.gpu_driver()  # False: its GPU figures are missing for want of a driver
        return report

    def gpu_driver(self) -> bool | None:
        """Whether the sampler reads GPUs here: False when no driver (NVML) answers, None before its first read."""
        sampler = self.sampler
        if sampler is None or getattr(sampler, "gpus_time", None) is None:
            return None
        return bool(sampler.gpus)

    def _final_usage(self, job: Job) -> dict[str, Any] | None:
        """The kernel's count of an ended job's CPU time and peak memory, as its supervisor recorded it."""
        if not job.state.is_terminal():
            return None
        return getattr(self.jobs.backend, "final_usage", lambda _: None)(job.id)

    async def diagnose(self, ref: str) -> dict[str, Any]:
        """The likely causes of a job's trouble, each with its evidence and fixes (`corral diagnose`)."""
        from corral.monitor.diagnosis import Evidence, diagnose, unchecked
        from corral.monitor.usage import job_usage

        job = self.jobs.resolve(ref)
        final = self._final_usage(job)
        view = _job_view(job)
        checkpoint_dir = HomeLayout(os.path.dirname(self.jobs.log_dir)).checkpoint_dir(job.id)
        paths = tuple(dict.fromkeys([job.log_path("stdout"), job.log_path("stderr")]))
        streams = ("stdout", "stderr") if len(paths) == 2 else ("stdout",)
        owner_uid = self.jobs.log_owner_uid(job)
        now = self.clock()

        def gather(conn: Any) -> Evidence:
            summary = self.store.sample_summary(conn, job.id)
            runs = self.store.runs_of(conn, [job.id])
            names = {r["id"]: r["name"] for r in runs}
            heads = self.store.series_heads(conn, list(names))
            checkpoints = sum(1 for r in runs for a in self.run_store.artifacts(conn, r["id"], type_="checkpoint", deleted=True))
            lines = [line for stream, path in zip(streams, paths) for line in _log_tail(stream, path, owner_uid)]
            return Evidence(
                job=view, summary=summary, log_lines=lines,
                nonfinite=[(names[h["run_id"]], h["key"], int(h["first_nonfinite_step"])) for h in heads
                           if h["first_nonfinite_step"] is not None],
                checkpoints=checkpoints + _files_in(checkpoint_dir),
                last_steps=[(names[h["run_id"]], h["key"], int(h["last_step"]), float(h["last_time"])) for h in heads],
                now=now, log_mtime=_last_write(paths), usage=job_usage(summary, final), gpu_driver=self.gpu_driver(),
            )

        evidence = await self._read(gather)
        findings = diagnose(evidence)
        return {"job": view, "findings": [_finding_view(f) for f in findings], "usage": evidence.figures.to_dict(),
                "unchecked": unchecked(evidence),
                "checked": {"samples": evidence.summary.count if evidence.summary else 0,
                            "log_lines": len(evidence.log_lines), "tracked_series": len(evidence.last_steps),
                            "checkpoints": evidence.checkpoints}}

    async def _read(self, fn: Callable[[Any], Any]) -> Any:
        def run() -> Any:
            with self.engine.connect() as conn:
                return fn(conn)

        return await asyncio.get_running_loop().run_in_executor(self._readers, run)

    async def _on_worker(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn)


# -- views and conversions --------------------------------------------------------------------------

_ENDED_STATES = frozenset(state.value for state in JobState if state.is_terminal())


def _newest_runs(runs: Sequence[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """Each job's newest run (runs come in id order)."""
    newest: dict[int, Mapping[str, Any]] = {}
    for run in runs:
        newest[run["job_id"]] = run
    return newest


def _facts(job: Job) -> A.JobFacts:
    s = job.spec
    return A.JobFacts(
        job_id=job.id, name=s.name, user=s.user, state=job.state.value, submit_time=job.submit_time,
        labels=dict(s.labels), array_job_id=job.array_job_id, start_time=job.start_time, time_limit_s=s.time_limit_s,
    )


def _rule(row: Mapping[str, Any]) -> A.Rule:
    label = row["scope_label"]
    scope = A.Scope(row["scope_job"], tuple(label.split("=", 1)) if label else None, row["scope_user"])  # type: ignore[arg-type]
    return A.Rule(row["id"], row["name"], row["severity"], A.parse_condition(row["condition"]), row["message"],
                  scope, tuple(row["channels"] or ()), row["owner"])


def _rule_view(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "severity": row["severity"], "condition": row["condition"],
            "message": row["message"], "job": row["scope_job"], "label": row["scope_label"], "user": row["scope_user"],
            "channels": list(row["channels"] or ()), "owner": row["owner"], "created": row["created"]}


def _channel_view(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": row["name"], "type": row["type"], "config": _redacted(row["config"]), "created": row["created"],
            "owner": row["owner"], "shared_with": list(row["shared_with"] or [])}


def _redacted(config: Mapping[str, Any]) -> dict[str, Any]:
    """A channel's settings fit to show: a webhook URL's path and header values are secrets (Slack's are)."""
    from urllib.parse import urlsplit

    shown = dict(config)
    if isinstance(shown.get("url"), str):
        parts = urlsplit(shown["url"])
        shown["url"] = f"{parts.scheme}://{parts.netloc}/" + ("…" if parts.path.strip("/") else "")
    if isinstance(shown.get("headers"), Mapping):
        shown["headers"] = {k: "…" for k in shown["headers"]}
    return shown


def _firing_view(row: Mapping[str, Any]) -> dict[str, Any]:
    view = {k: row[k] for k in ("id", "rule", "severity", "condition", "job_id", "job_name", "user", "status", "value",
                                "message", "fired_at", "resolved_at", "acknowledged_at", "acknowledged_by")}
    view["deliveries"] = [{k: d[k] for k in ("channel", "event", "status", "attempts", "last_error", "sent_at",
                                             "next_attempt_at")} for d in row.get("deliveries", [])]
    return view


def _notification(firing: Mapping[str, Any], event: str) -> Any:
    from corral.monitor.channels import Notification

    return Notification(
        firing_id=firing["id"], rule=firing["rule"], severity=firing["severity"], status=event,
        condition=firing["condition"], message=firing["message"], job_id=firing["job_id"], job_name=firing["job_name"],
        user=firing["user"], value=firing["value"], fired_at=firing["fired_at"],
        resolved_at=firing["resolved_at"] if event == "resolved" else None,
    )


def _json_value(value: float | None) -> float | str | None:
    """NaN and infinities as the strings the run series use ("NaN", "Infinity"): null means no value."""
    if value is None or math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _sample_row(sample: JobSample) -> dict[str, Any]:
    return {"job_id": sample.job_id, "time": sample.time, **{name: getattr(sample, name) for name in SAMPLE_COLUMNS}}


def _sample_view(sample: JobSample) -> dict[str, Any]:
    view: dict[str, Any] = {"time": sample.time}
    for name in SAMPLE_COLUMNS:
        value = getattr(sample, name)
        view[name] = round(value, 2) if isinstance(value, float) else value
    view["gpus"] = [{"index": g[0], "utilization": g[1], "memory_used_mb": g[2], "memory_total_mb": g[3]}
                    for g in sample.gpus]
    view["stray_gpus"] = list(sample.stray_gpus)
    return view


def _job_view(job: Job) -> dict[str, Any]:
    """The job as the API shows it, with its times also in epoch seconds for the arithmetic."""
    view = job.to_dict(detail=False)
    view.update(submit_time_s=job.submit_time, start_time_s=job.start_time, end_time_s=job.end_time)
    return view


def _finding_view(finding: Any) -> dict[str, Any]:
    return {"cause": finding.cause, "title": finding.title, "severity": finding.severity,
            "evidence": list(finding.evidence), "fixes": list(finding.fixes)}


def _last_write(paths: Sequence[str]) -> float | None:
    times = []
    for path in paths:
        try:
            times.append(os.stat(path).st_mtime)
        except OSError:
            pass
    return max(times) if times else None


TAIL_BYTES = 256 * 1024
COUNT_LINES_UP_TO = 64 << 20  # bytes of log before the tail whose lines are counted exactly
TAIL_LINES = 400


def _log_tail(stream: str, path: str, owner_uid: int | None = None) -> list[tuple[str, int, str]]:
    """The last lines of a log with their 1-based numbers (counted over the whole file); none from a
    log that is not a regular file of the job's owner (see `files.open_log`)."""
    try:
        with files.open_log(path, owner_uid) as f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - TAIL_BYTES)
            before = 0
            if start <= COUNT_LINES_UP_TO:
                while f.tell() < start:
                    block = f.read(min(1 << 20, start - f.tell()))
                    if not block:
                        break
                    before += block.count(b"\n")
            f.seek(start)
            data = f.read()
            if start > COUNT_LINES_UP_TO:
                # too long to count on every diagnosis: estimated from the tail's own line length
                before = int(start * max(1, data.count(b"\n")) / max(1, len(data)))
    except OSError:
        return []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    first = before + 1
    if start > 0 and lines:  # the first line read is the end of a line cut in two
        lines, first = lines[1:], first + 1
    numbered = [(stream, first + i, line.decode("utf-8", "replace")) for i, line in enumerate(lines)]
    return numbered[-TAIL_LINES:]


def _files_in(path: str) -> int:
    try:
        return sum(1 for entry in os.scandir(path)
                   if entry.is_file() and not entry.name.startswith(".") and entry.name != "checkpoints.json")
    except OSError:
        return 0
