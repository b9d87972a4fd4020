"""The monitor's answers to requests about jobs: metrics over time, `top`, efficiency, diagnosis (`MonitorQueries`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.core.jobspec.states import JobState
from corral.core.units.timespec import parse_moment
from corral.errors import Conflict, InvalidRequest, NotFound
from corral.executor.logs import last_write, numbered_tail
from corral.core.tracking.nonfinite import json_number
from corral.monitor.views import finding_view, job_view, sample_view
from corral.store.monitoring import SAMPLE_COLUMNS, MonitorStore

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job
    from corral.monitor.jobs import JobReader
    from corral.monitor.recording import SampleRecorder
    from corral.monitor.runtime import MonitorThreads
    from corral.store.runs import RunStore

MAX_QUERY_POINTS = 10_000


class MonitorQueries:
    def __init__(self, *, jobs: JobReader, threads: MonitorThreads, store: MonitorStore, run_store: RunStore,
                 recorder: SampleRecorder, clock: Callable[[], float]) -> None:
        self.jobs = jobs
        self.threads = threads
        self.store = store
        self.run_store = run_store  # read only: runs are written by TrackingService
        self.recorder = recorder
        self.clock = clock

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
                    "count": count, "points": [[round(t, 3), json_number(v)] for t, v in points]}

        return await self.threads.read(read)

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
        kept: list[tuple[float, float | None]] = [(float(t), float(v)) for t, v in zip(points.times, points.values)
                if (since is None or t >= since) and (until is None or t <= until)]
        return count, kept

    def top(self) -> list[dict[str, Any]]:
        """Each running job now: its GPUs' utilization and memory, CPU, memory, and training progress."""
        rows = []
        driver = self.gpu_driver()
        for job in self.jobs.active_jobs():
            if job.state is not JobState.RUNNING:
                continue
            sample = self.recorder.latest.get(job.id)
            progress = self.recorder.progress.get(job.id)
            rows.append({
                "id": job.id, "ref": job.ref, "name": job.spec.name, "user": job.spec.user, "node": job.node,
                "start_time": job.start_time, "time_limit_s": job.spec.time_limit_s, "cpus": job.spec.cpus,
                "gpu_ids": list(job.gpu_ids or ()), "gpu_driver": driver, "mem_mb": job.spec.mem_mb,
                "sample": sample_view(sample) if sample else None,
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
        summary = await self.threads.read(lambda conn: self.store.sample_summary(conn, job.id))
        report = local_efficiency(job_view(job), summary, usage, now=now)
        report["gpu_driver"] = self.gpu_driver()  # False: its GPU figures are missing for want of a driver
        return report

    def gpu_driver(self) -> bool | None:
        """Whether the sampler reads GPUs here: False when no driver (NVML) answers, None before its first read."""
        return self.recorder.gpu_driver()

    def _final_usage(self, job: Job) -> dict[str, Any] | None:
        """The kernel's count of an ended job's CPU time and peak memory, as its supervisor recorded it."""
        if not job.state.is_terminal():
            return None
        return self.jobs.final_usage(job.id)

    async def diagnose(self, ref: str) -> dict[str, Any]:
        """The likely causes of a job's trouble, each with its evidence and fixes (`corral diagnose`)."""
        from corral.monitor.diagnosis import Evidence, diagnose, unchecked
        from corral.monitor.usage import job_usage

        job = self.jobs.resolve(ref)
        final = self._final_usage(job)
        view = job_view(job)
        checkpoint_dir = self.jobs.checkpoint_dir(job.id)
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
            lines = [line for stream, path in zip(streams, paths) for line in numbered_tail(stream, path, owner_uid)]
            return Evidence(
                job=view, summary=summary, log_lines=lines,
                nonfinite=[(names[h["run_id"]], h["key"], int(h["first_nonfinite_step"])) for h in heads
                           if h["first_nonfinite_step"] is not None],
                checkpoints=checkpoints + _files_in(checkpoint_dir),
                last_steps=[(names[h["run_id"]], h["key"], int(h["last_step"]), float(h["last_time"])) for h in heads],
                now=now, log_mtime=last_write(paths), usage=job_usage(summary, final), gpu_driver=self.gpu_driver(),
            )

        evidence = await self.threads.read(gather)
        findings = diagnose(evidence)
        return {"job": view, "findings": [finding_view(f) for f in findings], "usage": evidence.figures.to_dict(),
                "unchecked": unchecked(evidence),
                "checked": {"samples": evidence.summary.count if evidence.summary else 0,
                            "log_lines": len(evidence.log_lines), "tracked_series": len(evidence.last_steps),
                            "checkpoints": evidence.checkpoints}}


def _files_in(path: str) -> int:
    try:
        return sum(1 for entry in os.scandir(path)
                   if entry.is_file() and not entry.name.startswith(".") and entry.name != "checkpoints.json")
    except OSError:
        return 0
