"""The monitor: samples running jobs, keeps their system metrics, evaluates alert rules, sends alerts.

`MonitorService` composes the parts and runs the ticks. Each tick (every `interval_s`, and at once when
a job ends) takes a snapshot of the jobs on the event loop (`snapshot.SnapshotTaker`, through the
`jobs.JobReader` interface), then does everything else on one worker thread: sample and store
(`recording.SampleRecorder`, which hands runs their `system/...` metrics through `TrackingService`),
then evaluate the rules and record firings (`rules.RuleEvaluator`). Only that thread touches the
episodes, so a rule fires once per episode. Deliveries are rows in the database, sent by a thread of
their own with retries (`dispatch.DeliveryDispatcher`). Requests are answered by `queries.MonitorQueries`
(metrics, top, efficiency, diagnosis) and `alert_settings.AlertSettings` (rules, channels, firings).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from corral.core.monitoring.gpu_health import fatal
from corral.monitor.alert_settings import AlertSettings
from corral.monitor.gpu_alerts import fire_gpu_faults, fire_outside, fire_over_budget
from corral.monitor.dispatch import DeliveryDispatcher
from corral.monitor.queries import MonitorQueries
from corral.monitor.recording import SampleRecorder, SystemMetricsWriter
from corral.monitor.rules import RuleEvaluator, enrich
from corral.monitor.runtime import Announcer, MonitorThreads
from corral.monitor.snapshot import Snapshot, SnapshotTaker, job_facts
from corral.store.monitoring import MonitorStore

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job
    from corral.core.scheduling.sharing import OverBudget
    from corral.event_bus import EventBus
    from corral.monitor.channels import SmtpSettings
    from corral.monitor.jobs import JobReader
    from corral.monitor.progress import Progress
    from corral.monitor.sampling import JobSample, JobSampler
    from corral.store.runs import RunStore

log = logging.getLogger("corral.monitor")

DEFAULT_INTERVAL_S = 10.0
DEFAULT_RETENTION_DAYS = 90.0  # 50 jobs sampled every 10 s add ~430,000 rows a day


class MonitorService:
    def __init__(
        self, *, jobs: JobReader, engine: Engine, tracking: SystemMetricsWriter, run_store: RunStore,
        sampler: JobSampler | None, interval_s: float = DEFAULT_INTERVAL_S, smtp: SmtpSettings | None = None,
        clock: Callable[[], float] = time.time, retention_days: float = DEFAULT_RETENTION_DAYS,
    ) -> None:
        """`run_store` is read (runs, series, checkpoints); runs are written through `tracking` alone."""
        from corral.monitor.channels import SmtpSettings

        store = MonitorStore()
        smtp = smtp or SmtpSettings()
        self.interval_s = interval_s
        self.clock = clock
        self.threads = MonitorThreads(engine)
        self.announcer = Announcer()
        self.jobs = jobs
        self.snapshots = SnapshotTaker(jobs)
        self.recorder = SampleRecorder(engine=engine, store=store, tracking=tracking, sampler=sampler,
                                       retention_s=retention_days * 86400, announcer=self.announcer)
        self.dispatcher = DeliveryDispatcher(engine=engine, store=store, smtp=smtp, clock=clock)
        self.evaluator = RuleEvaluator(engine=engine, store=store, is_admin=jobs.is_admin, announcer=self.announcer,
                                       on_fired=self.dispatcher.wake)
        self.queries = MonitorQueries(jobs=jobs, threads=self.threads, store=store, run_store=run_store,
                                      recorder=self.recorder, clock=clock)
        self.alerts = AlertSettings(threads=self.threads, store=store, evaluator=self.evaluator,
                                    announcer=self.announcer, smtp=smtp, server_user=jobs.user, clock=clock)
        self._ended: list[Job] = []
        self._wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._outside_seen: set[tuple[int, int]] = set()  # (GPU, pid) outside corral at the last tick: alerted of

    # -- what the dashboard and the API read ---------------------------------------------------------

    @property
    def events(self) -> EventBus | None:
        """The dashboard's live updates, once the app is made."""
        return self.announcer.events

    @events.setter
    def events(self, bus: EventBus | None) -> None:
        self.announcer.events = bus

    @property
    def sampler(self) -> JobSampler | None:
        return self.recorder.sampler

    @property
    def latest(self) -> dict[int, JobSample]:
        """Each running job's latest sample."""
        return self.recorder.latest

    @property
    def progress(self) -> dict[int, Progress]:
        """Each running job's training progress, from its newest run."""
        return self.recorder.progress

    def eta_end(self, job_id: int) -> float | None:
        """When a running job's tracked run expects to finish (epoch seconds), while that is still ahead.

        An ETA already passed says nothing of when the job ends (its run stalled, or trains no more while the
        job goes on): None then, and the job's time limit is the answer (`corral.core.jobspec.expected_end`).
        """
        progress = self.recorder.progress.get(job_id)
        if progress is None or progress.eta_s is None:
            return None
        end = progress.last_time + progress.eta_s
        return end if end > self.clock() else None

    # -- life -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the rules and the open firings (an episode open before a restart stays one), start sending."""
        self.evaluator.load()
        self.dispatcher.start()

    def job_ended(self, job: Job) -> None:
        """A JobService listener: check state rules for the job at once, not at the next tick."""
        self._ended.append(job)
        if self._wake is not None:
            loop, wake = self._wake
            loop.call_soon_threadsafe(wake.set)

    async def run(self) -> None:
        """Tick until cancelled."""
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        self._wake = (loop, wake)
        while True:
            try:
                await asyncio.wait_for(wake.wait(), self.interval_s)  # a cancel it drops: see `corral.server.loop`
            except TimeoutError:
                pass
            wake.clear()
            snapshot = None
            try:
                ended, self._ended = self._ended, []
                snapshot = self.snapshots.take(self.clock(), self.evaluator.rules, ended)
                await loop.run_in_executor(self.threads.worker, self._tick, snapshot)
                if self.sampler is not None:  # back on the loop: the job service reads it there
                    self.jobs.gpus_in_use_outside(tuple(self.sampler.outside))
                    await self._outside_alerts(loop, self.sampler)
                    warned = self.jobs.gpu_memory_sampled({job_id: sample.own_gpu_memory_mb for job_id, sample in
                                                           self.recorder.latest.items()
                                                           if sample.own_gpu_memory_mb is not None})
                    await self._budget_alerts(loop, warned)
                    await self._gpu_health(loop, self.sampler)
            except Exception:  # noqa: BLE001 - the monitor must outlive any one bad tick
                log.exception("monitor tick failed")
                if snapshot is not None:
                    self._ended[:0] = snapshot.ended  # looked at again next tick: no state alert is lost

    async def _fire(self, loop: asyncio.AbstractEventLoop, fire: Callable[..., None], items: Sequence[Any],
                    what: str) -> bool:
        """Record alerts with `fire` on the worker thread (it owns the evaluator); whether it did. A failure is logged
        and passed over: the rest of the tick (the GPUs' health drains a failed GPU) must still run."""
        if not items:
            return True
        try:
            await loop.run_in_executor(self.threads.worker, fire, self.evaluator, items, self.clock())
        except Exception:  # noqa: BLE001
            log.exception("could not record the alerts of %s", what)
            return False
        return True

    async def _budget_alerts(self, loop: asyncio.AbstractEventLoop, warned: Sequence[tuple[Job, OverBudget]]) -> None:
        """Alert of each sharing job just warned of going over its GPU memory budget."""
        facts = [(job_facts(job), verdict) for job, verdict in warned]  # here, on the loop that changes the jobs
        await self._fire(loop, fire_over_budget, facts, f"jobs {[job.id for job, _ in warned]} over their GPU budgets")

    async def _gpu_health(self, loop: asyncio.AbstractEventLoop, sampler: JobSampler) -> None:
        """Hand the GPUs' health to the job service (it drains a failed one); alert of each fault."""
        if sampler.gpus_time is None:
            return
        happened = self.jobs.gpu_health({r.index: r.health for r in sampler.gpus}, sampler.gpus_time)
        await self._fire(loop, fire_gpu_faults, fatal(happened), "GPU faults")

    async def _outside_alerts(self, loop: asyncio.AbstractEventLoop, sampler: JobSampler) -> None:
        """Alert admins once of each process newly found on a GPU outside corral (while it stays, no more; one
        whose alert could not be recorded is tried again next tick)."""
        now_seen = {(p.gpu, p.pid): p for p in sampler.outside}
        new = [p for key, p in now_seen.items() if key not in self._outside_seen]
        if await self._fire(loop, fire_outside, new, "processes on GPUs outside corral"):
            self._outside_seen = set(now_seen)

    def close(self) -> None:
        self.dispatcher.close()
        self.threads.close()
        self.dispatcher.join()
        self.recorder.close()

    def _tick(self, snap: Snapshot) -> None:
        _runs, heads, newest = self.recorder.record(snap)
        self.evaluator.evaluate(enrich(snap, heads, newest, self.recorder.latest, self.interval_s), snap.now)
        self.recorder.prune_if_due(snap.now)

    # -- requests ---------------------------------------------------------------------------------

    async def metrics(self, ref: str, metric: str, *, start: str | None, end: str | None,
                      max_points: int) -> dict[str, Any]:
        return await self.queries.metrics(ref, metric, start=start, end=end, max_points=max_points)

    def top(self) -> list[dict[str, Any]]:
        return self.queries.top()

    async def efficiency(self, ref: str) -> dict[str, Any]:
        return await self.queries.efficiency(ref)

    async def diagnose(self, ref: str) -> dict[str, Any]:
        return await self.queries.diagnose(ref)

    def gpu_driver(self) -> bool | None:
        return self.recorder.gpu_driver()

    async def create_rule(self, body: Any, owner: str, admin: bool = True) -> dict[str, Any]:
        return await self.alerts.create_rule(body, owner, admin)

    async def rules(self) -> list[dict[str, Any]]:
        return await self.alerts.rules()

    async def delete_rule(self, name: str) -> None:
        await self.alerts.delete_rule(name)

    async def put_channel(self, body: Any, owner: str | None = None) -> dict[str, Any]:
        return await self.alerts.put_channel(body, owner)

    async def share_channel(self, name: str, body: Any) -> dict[str, Any]:
        return await self.alerts.share_channel(name, body)

    async def channels(self, user: str | None = None) -> list[dict[str, Any]]:
        return await self.alerts.channels(user)

    async def delete_channel(self, name: str) -> None:
        await self.alerts.delete_channel(name)

    async def test_channel(self, name: str) -> dict[str, Any]:
        return await self.alerts.test_channel(name)

    async def firings(self, *, status: str | None, job_id: int | None, unacknowledged: bool, limit: int,
                      user: str | None = None) -> list[dict[str, Any]]:
        return await self.alerts.firings(status=status, job_id=job_id, unacknowledged=unacknowledged, limit=limit,
                                         user=user)

    async def acknowledge(self, firing_id: int, user: str,
                          check_owner: Callable[[str | None], None] = lambda owner: None) -> dict[str, Any]:
        return await self.alerts.acknowledge(firing_id, user, check_owner)
