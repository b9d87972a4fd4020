"""corral's JSON (jobs, the cluster, the queue, runs) shaped for an agent: the fields it acts on,
bounded, with the next step spelled out. Pure functions of what the server answered."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from corral.core.units import format_duration, format_memory
from corral.mcp.bounds import MAX_LIST, TEXT_CHARS, capped, short_text
from corral.mcp.results import GpuList, JobView, QueueView, Workload

_REASONS = {
    "Resources": "it is first in line, waiting for GPUs, CPUs or memory to free up",
    "Priority": "jobs of higher priority are ahead of it",
    "Dependency": "it waits for the jobs it depends on",
    "BeginTime": "its start time has not come yet",
    "JobHeldUser": "it is held; release it with `corral release`",
    "JobHeldAdmin": "an administrator holds it",
    "BadConstraints": "no node can ever run it: stop it and ask for fewer or other resources",
    "DependencyNeverSatisfied": "its dependency can never hold: stop it",
    "None": "just queued; the scheduler places it within a moment",
}
_FAILED = ("FAILED", "OUT_OF_MEMORY", "NODE_FAIL")
CONFIG_CHARS = 2000
RUN_METRIC_KEYS = 20


def checkpoint_dir(home: str | None, job_id: int) -> str | None:
    """The job's `$CORRAL_CHECKPOINT_DIR`: `<home>/checkpoints/<id>`, the same after a requeue."""
    return None if not home else f"{home.rstrip('/')}/checkpoints/{job_id}"


def next_step(job: Mapping[str, Any]) -> str:
    """What an agent should do about the job now, in a sentence or two."""
    state = job["state"]
    if state == "PENDING":
        reason = job.get("reason") or "None"
        why = _REASONS.get(reason, "see `queue` for what is ahead of it")
        start = f" Estimated start: {job['estimated_start']}." if job.get("estimated_start") else ""
        return (f"Waiting in the queue, reason {reason}: {why}.{start} GPU jobs can wait minutes or hours: check again "
                "with view_gpu_job every minute or two, and see `queue` for what is ahead; do not resubmit it.")
    if state == "RUNNING":
        return ("Running. Check again with view_gpu_job every 30-60 s (less often for long jobs); read more output "
                "with workload_logs (pass nextOffset back as since); see its GPU use with metrics_query.")
    if state == "PREEMPTED":
        return "Preempted for a job of higher priority: it is queued again and restarts; checkpoints are kept."
    if state == "COMPLETED":
        return "Finished successfully (exit code 0). Its output is in its logs, working directory and checkpoint_dir."
    if state == "CANCELLED":
        return "Cancelled (by stop_gpu_job or a user). Resubmit it to run it again."
    if state == "TIMEOUT":
        return ("Stopped at its time limit. Resubmit with a longer time_limit, resuming from its latest checkpoint "
                "in checkpoint_dir; diagnose_job says whether it saved one.")
    how = f"exit code {job['exit_code']}" if job.get("exit_code") is not None else f"signal {job.get('signal')}"
    detail = {"OUT_OF_MEMORY": "it used more host memory than it asked for; ",
              "NODE_FAIL": "its supervisor or node died; "}.get(state, "")
    return (f"Ended {state} ({detail}{how}). The stderr tail shows the error; call diagnose_job for the likely "
            "cause and the fix before resubmitting.")


def job_view(job: Mapping[str, Any], *, home: str | None) -> JobView:
    """The job as view_gpu_job describes it (without log tails)."""
    view: JobView = {
        "job_id": int(job["id"]), "name": job["name"], "user": job["user"], "state": job["state"],
        "reason": job.get("reason"), "exit_code": job.get("exit_code"), "signal": job.get("signal"),
        "submit_time": job.get("submit_time"), "start_time": job.get("start_time"), "end_time": job.get("end_time"),
        "estimated_start": job.get("estimated_start"), "time_limit": format_duration(job.get("time_limit_s")),
        "gpus": int(job.get("gpus") or 0), "gpu_type": job.get("gpu_type"),
        "gpu_memory": format_memory(job.get("gpu_mem_mb")), "gpu_ids": list(job.get("gpu_ids") or []),
        "cpus": int(job.get("cpus") or 1), "memory": format_memory(job.get("mem_mb")), "node": job.get("node"),
        "working_directory": job.get("workdir") or "", "stdout_path": job.get("stdout_path"),
        "stderr_path": job.get("stderr_path"), "checkpoint_dir": checkpoint_dir(home, int(job["id"])),
        "restarts": int(job.get("restarts") or 0), "labels": dict(job.get("labels") or {}), "next_step": next_step(job),
    }
    if job.get("warnings"):
        view["warnings"] = [short_text(w) for w in job["warnings"]]
    return view


def workload_view(job: Mapping[str, Any], *, home: str | None) -> Workload:
    """The job in the seed's workload shape (camelCase)."""
    view: Workload = {
        "workloadId": str(job.get("ref") or job["id"]), "name": job["name"], "state": job["state"],
        "reason": job.get("reason"), "exitCode": job.get("exit_code"), "submitTime": job.get("submit_time"),
        "startTime": job.get("start_time"), "endTime": job.get("end_time"), "gpus": int(job.get("gpus") or 0),
        "gpuType": job.get("gpu_type"), "gpuMemoryMb": job.get("gpu_mem_mb"), "labels": dict(job.get("labels") or {}),
        "preemptible": bool(job.get("preemptible")), "maxRuntimeSeconds": job.get("time_limit_s"),
        "logs": {"stdout": job.get("stdout_path"), "stderr": job.get("stderr_path")},
        "checkpointDir": checkpoint_dir(home, int(job["id"])), "nextStep": next_step(job),
    }
    if job.get("warnings"):
        view["warnings"] = [short_text(w) for w in job["warnings"]]
    return view


def gpu_list(cluster: Mapping[str, Any]) -> GpuList:
    """Every GPU, free or held and by whom, with totals per type (from `GET /api/v1/cluster`)."""
    gpus = []
    by_type: dict[tuple[str | None, int | None], dict[str, Any]] = {}
    for node in cluster.get("nodes", []):
        for gpu in node.get("gpus", []):
            free = gpu.get("job_id") is None
            gpus.append({"node": node["name"], "index": gpu["index"], "type": gpu.get("type"), "mem_mb": gpu.get("mem_mb"),
                         "free": free, "job_id": gpu.get("job_id"), "user": gpu.get("user"),
                         "utilization": gpu.get("utilization"), "memory_used_mb": gpu.get("memory_used_mb")})
            group = by_type.setdefault((gpu.get("type"), gpu.get("mem_mb")),
                                       {"type": gpu.get("type"), "mem_mb": gpu.get("mem_mb"), "total": 0, "free": 0})
            group["total"] += 1
            group["free"] += free
    shown, truncated = capped(gpus, MAX_LIST)
    free_count = sum(g["free"] for g in gpus)
    return {"total": len(gpus), "free": free_count, "busy": len(gpus) - free_count, "by_type": list(by_type.values()),
            "gpus": shown, "truncated": truncated,
            "note": "Free right now. A job asking for more GPUs than are free waits in the queue until they are; "
                    "gpu_type and gpu_memory pick among the types listed."}


def queue_view(page: Mapping[str, Any], limit: int) -> QueueView:
    """Running jobs, then pending ones in priority order, with reasons and estimated starts."""
    jobs = []
    for job in page.get("jobs", [])[:limit]:
        entry = {
            "job_id": job["id"], "name": job["name"], "user": job["user"], "state": job["state"],
            "reason": job.get("reason"), "gpus": job.get("gpus"), "gpu_type": job.get("gpu_type"),
            "gpu_ids": job.get("gpu_ids"), "submit_time": job.get("submit_time"), "start_time": job.get("start_time"),
            "estimated_start": job.get("estimated_start"), "time_limit": format_duration(job.get("time_limit_s")),
        }
        if job["state"] == "PENDING":
            entry["priority"] = job.get("priority")
        if job.get("progress"):
            entry["progress"] = {k: job["progress"].get(k) for k in ("step", "total", "rate", "eta_s")}
        jobs.append(entry)
    total = int(page.get("total", len(jobs)))
    return {"total": total, "running": int(page.get("running", 0)), "pending": int(page.get("pending", 0)),
            "jobs": jobs, "truncated": total > len(jobs)}


def run_view(run: Mapping[str, Any]) -> dict[str, Any]:
    """A tracked run: identity, state, its job, a bounded config and each metric's last/min/max."""
    metrics = run.get("metrics") or {}
    keys = sorted(metrics)[:RUN_METRIC_KEYS]
    config = run.get("config") or {}
    text = json.dumps(config, default=str)
    return {
        "id": run["id"], "uid": run.get("uid"), "project": run.get("project"), "name": run.get("name"),
        "state": run.get("state"), "job_id": run.get("job_id"), "start_time": iso(run.get("start_time")),
        "end_time": iso(run.get("end_time")), "last_step": run.get("last_step"), "tags": list(run.get("tags") or []),
        "config": config if len(text) <= CONFIG_CHARS else {"truncated": short_text(text, CONFIG_CHARS)},
        "metrics": {k: {f: metrics[k].get(f) for f in ("count", "last_step", "last", "min", "max")} for k in keys},
        "metric_keys_total": len(metrics),
    }


def series_summary(values: Sequence[Any]) -> dict[str, float | None]:
    """First, last, min, max and mean of a series' finite values (None when it has none)."""
    finite = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
    if not finite:
        return {"first": None, "last": None, "min": None, "max": None, "mean": None}
    return {"first": finite[0], "last": finite[-1], "min": min(finite), "max": max(finite),
            "mean": round(sum(finite) / len(finite), 6)}


def evidence(data: Any, depth: int = 0) -> Any:
    """A diagnosis or efficiency report with every string and list bounded."""
    if isinstance(data, str):
        return short_text(data, TEXT_CHARS)
    if isinstance(data, list):
        return [evidence(item, depth + 1) for item in data[:20]]
    if isinstance(data, dict) and depth < 6:
        return {key: evidence(value, depth + 1) for key, value in data.items()}
    return data


def iso(epoch: float | None) -> str | None:
    """An epoch time as ISO 8601 UTC, as jobs carry theirs."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(float(epoch), timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
