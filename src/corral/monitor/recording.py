"""Sampling's side of a tick: `SampleRecorder` samples the watched jobs, stores the samples, hands them
to the jobs' runs as `system/...` metrics (through `TrackingService`, the one writer of the run tables),
and keeps each running job's latest sample and training progress for `top` and the dashboard."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from corral.core.jobspec.states import JobState
from corral.monitor.progress import Progress, ProgressTracker
from corral.monitor.views import sample_row
from corral.store.monitoring import SAMPLE_COLUMNS, MonitorStore

if TYPE_CHECKING:
    from corral.core.tracking.metrics_batch import MetricsBatch
    from corral.monitor.runtime import Announcer
    from corral.monitor.sampling import JobSample, JobSampler
    from corral.monitor.snapshot import Snapshot, Watched

log = logging.getLogger("corral.monitor")

PRUNE_EVERY_S = 3600.0
PRUNE_BATCH = 20_000


class SystemMetricsWriter(Protocol):
    """Where the monitor writes runs' `system/...` metrics: the tracking service (`corral.tracking.service`), which
    the composition root hands in; the monitor and tracking sit side by side and neither imports the other."""

    def append_system_metrics(self, batches: Mapping[int, MetricsBatch], timeout_s: float = 60.0) -> None:
        """Append the points to runs by id; returns once they are committed."""
        ...


class SampleRecorder:
    """Runs on the monitor's worker thread only."""

    def __init__(self, *, engine: Any, store: MonitorStore, tracking: SystemMetricsWriter, sampler: JobSampler | None,
                 retention_s: float, announcer: Announcer) -> None:
        self.engine = engine
        self.store = store
        self.tracking = tracking
        self.sampler = sampler
        self.retention_s = retention_s
        self.announcer = announcer
        self.latest: dict[int, JobSample] = {}
        self.progress: dict[int, Progress] = {}
        self._tracker = ProgressTracker()
        self._next_prune = 0.0

    def record(self, snap: Snapshot) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, Mapping[str, Any]]]:
        """Sample and store; returns the running jobs' runs, their series heads, and each job's newest run."""
        samples = self._sample(snap.watched)
        running = [f.job_id for f in snap.facts if f.state == JobState.RUNNING.value]
        runs: list[dict[str, Any]] = []
        heads: list[dict[str, Any]] = []
        try:
            with self.engine.begin() as conn:
                self.store.add_samples(conn, [sample_row(s) for s in samples])
                runs = self.store.runs_of(conn, running)
                heads = self.store.series_heads(conn, [r["id"] for r in runs])
            self.tracking.append_system_metrics(system_metrics(runs, samples))
        except Exception:  # noqa: BLE001 - without this tick's samples, the rules are still checked
            log.exception("could not store this tick's samples")
        latest = dict(self.latest)
        for sample in samples:
            latest[sample.job_id] = sample
        keep = set(running)
        self.latest = {job_id: s for job_id, s in latest.items() if job_id in keep}
        newest = newest_runs(runs)
        self.progress = self._progress(newest, heads)
        if samples:
            self.announcer.publish_threadsafe("samples", {"time": snap.now})
            sampled = {s.job_id for s in samples}
            appended = [{"id": r["id"], "job_id": r["job_id"]} for r in runs
                        if r["job_id"] in sampled and r["state"] == "running"]
            if appended:  # their system/... charts have a new point
                self.announcer.publish_threadsafe("runs", {"runs": appended})
        return runs, heads, newest

    def prune_if_due(self, now: float) -> None:
        """Forget old samples a batch per transaction, so that the database's writers never wait long."""
        if now < self._next_prune:
            return
        self._next_prune = now + PRUNE_EVERY_S
        before, total = now - self.retention_s, 0
        while True:
            with self.engine.begin() as conn:
                pruned = self.store.prune_samples(conn, before, limit=PRUNE_BATCH)
            total += pruned
            if pruned < PRUNE_BATCH:
                break
        if total:
            log.info("pruned %d samples older than %.0f days", total, self.retention_s / 86400)

    def gpu_driver(self) -> bool | None:
        """Whether the sampler reads GPUs here: False when no driver (NVML) answers, None before its first read."""
        sampler = self.sampler
        if sampler is None or getattr(sampler, "gpus_time", None) is None:
            return None
        return bool(sampler.gpus)

    def close(self) -> None:
        if self.sampler is not None and hasattr(self.sampler, "close"):
            self.sampler.close()

    def _sample(self, watched: Sequence[Watched]) -> list[JobSample]:
        if self.sampler is None:
            return []
        from corral.monitor.sampling import WatchedJob

        try:
            return self.sampler.sample([WatchedJob(*w) for w in watched])
        except Exception:  # noqa: BLE001 - a sampler failure costs the tick's samples, never the alerts
            log.exception("sampling failed")
            return []

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


def system_metrics(runs: Sequence[Mapping[str, Any]], samples: Sequence[JobSample]) -> dict[int, MetricsBatch]:
    """Each running run's batch of its job's samples as `system/...` metrics, stepped in seconds since
    the run started (W&B's `_runtime`), so its page charts them beside the training curves."""
    import numpy as np

    from corral.core.tracking.metric_series import Points
    from corral.core.tracking.metrics_batch import MetricsBatch

    by_job = {s.job_id: s for s in samples}
    batches = {}
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
            batches[run["id"]] = MetricsBatch(None, series)
    return batches


def newest_runs(runs: Sequence[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """Each job's newest run (runs come in id order)."""
    newest: dict[int, Mapping[str, Any]] = {}
    for run in runs:
        newest[run["job_id"]] = run
    return newest
