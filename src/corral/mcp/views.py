"""corral's JSON (jobs, the cluster, the queue, runs) shaped for an agent: the fields it acts on,
bounded, with the next step spelled out. Pure functions of what the server answered."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from corral.core.units.iso_times import iso_utc
from corral.core.jobspec.job_fields import JobFields
from corral.core.tracking.nonfinite import json_number
from corral.core.units.units import format_duration, format_memory
from corral.mcp.bounds import (
    MAX_LIST, MAX_TAGS, NAME_CHARS, RESULT_BYTES, TEXT_CHARS, capped, fit_items, json_size, short_text,
)
from corral.mcp.results import (
    ForecastAlternative, ForecastBlocker, ForecastView, GpuList, JobView, QueueView, Workload,
)

_REASONS = {
    "Resources": "it is first in line, waiting for GPUs, CPUs or memory to free up",
    "Priority": "jobs of higher priority are ahead of it",
    "Dependency": "it waits for the jobs it depends on",
    "BeginTime": "its start time has not come yet",
    "JobHeldUser": "it is held; release it with `corral release`",
    "JobHeldAdmin": "an administrator holds it",
    "BadConstraints": "no node can ever run it: stop it and ask for fewer or other resources",
    "DependencyNeverSatisfied": "its dependency can never hold: stop it",
    "ReqNodeNotAvail": ("only drained GPUs or nodes, or GPUs in use outside corral, could run it; it waits until an "
                        "admin resumes them or the process outside corral ends"),
    "None": "just queued; the scheduler places it within a moment",
}
CONFIG_CHARS = 300
"""The most characters of one run's config a listing shows."""
RUN_METRIC_KEYS = 20
MAX_WARNINGS = 10
_NONFINITE = {"nan": "NaN", "infinity": "Infinity", "inf": "Infinity", "+infinity": "Infinity", "+inf": "Infinity",
              "-infinity": "-Infinity", "-inf": "-Infinity"}


def public_id(job: Mapping[str, Any]) -> int | str:
    """The id an agent passes back for the job: `12`, or `"12_3"` for task 3 of array 12."""
    if job.get("array_job_id") is not None and job.get("array_task_id") is not None:
        return f"{job['array_job_id']}_{job['array_task_id']}"
    return int(job["id"])


def checkpoint_dir(home: str | None, job_id: int) -> str | None:
    """The job's `$CORRAL_CHECKPOINT_DIR`: `<home>/checkpoints/<id>`, the same after a requeue."""
    return None if not home else f"{home.rstrip('/')}/checkpoints/{job_id}"


def next_step(job: Mapping[str, Any]) -> str:
    """What an agent should do about the job now, in a sentence or two."""
    state = job["state"]
    if state == "PENDING":
        reason = job.get("reason") or "None"
        why = _REASONS.get(reason.partition(",")[0], "see `queue` for what is ahead of it")
        start = f" Estimated start: {job['estimated_start']}." if job.get("estimated_start") else ""
        return (f"Waiting in the queue, reason {reason}: {why}.{start} GPU jobs can wait minutes or hours: check again "
                "with view_gpu_job every minute or two, and see `queue` for what is ahead; do not resubmit it.")
    if state == "RUNNING":
        return ("Running." + _expected_end_sentence(job) + " Check again with view_gpu_job every 30-60 s (less often "
                "for long jobs); read more output with workload_logs (pass nextOffset back as since); see its GPU use "
                "with metrics_query.")
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
              "NODE_FAIL": "its GPU, its node or its supervisor failed; "}.get(state, "")
    return (f"Ended {state} ({detail}{how}). The stderr tail shows the error; call diagnose_job for the likely "
            "cause and the fix before resubmitting.")


def _expected_end_sentence(job: Mapping[str, Any]) -> str:
    end = job.get("expected_end")
    if not end:
        return ""
    if job.get("expected_end_source") == "eta":
        return f" Expected to end about {end}, by its tracked run's ETA (its time limit is the latest)."
    return f" It ends by {end} at the latest, when its time limit runs out."


def api_job(answer: Mapping[str, Any]) -> JobFields:
    """The API's JSON for a job, read as the fields `corral.core.jobspec.job_fields` declares: the views below
    read no key that declaration lacks, so a field renamed or dropped there is a type error here."""
    return cast(JobFields, answer)


def job_view(answer: Mapping[str, Any], *, home: str | None, given: int | str | None = None) -> JobView:
    """The job as view_gpu_job describes it (without log tails), from the API's answer for it.

    Args:
        given: the id the agent named the job by, kept as `job_id` (an array task's internal id
            stays what the agent wrote); else the job's own (`12`, or `12_3` for a task).
    """
    job = api_job(answer)
    view: JobView = {
        "job_id": public_id(job) if given is None else given, "ref": str(job.get("ref") or job["id"]),
        "name": job["name"], "user": job["user"], "state": job["state"],
        "reason": job.get("reason"), "exit_code": job.get("exit_code"), "signal": job.get("signal"),
        "submit_time": job.get("submit_time"), "start_time": job.get("start_time"), "end_time": job.get("end_time"),
        "estimated_start": job.get("estimated_start"), "expected_end": job.get("expected_end"),
        "expected_end_source": job.get("expected_end_source"), "time_limit": format_duration(job.get("time_limit_s")),
        "gpus": int(job.get("gpus") or 0), "gpu_type": job.get("gpu_type"),
        "gpu_memory": format_memory(job.get("gpu_mem_mb")), "gpu_ids": list(job.get("gpu_ids") or []),
        "cpus": int(job.get("cpus") or 1), "memory": format_memory(job.get("mem_mb")), "node": job.get("node"),
        "working_directory": job.get("workdir") or "", "image": _image(job), "stdout_path": job.get("stdout_path"),
        "stderr_path": job.get("stderr_path"), "checkpoint_dir": checkpoint_dir(home, int(job["id"])),
        "restarts": int(job.get("restarts") or 0), "labels": bounded_labels(job.get("labels")),
        "next_step": next_step(job),
    }
    if job.get("warnings"):
        view["warnings"] = [short_text(w) for w in job["warnings"][:MAX_WARNINGS]]
    return view


def workload_view(answer: Mapping[str, Any], *, home: str | None) -> Workload:
    """The job in the seed's workload shape (camelCase), from the API's answer for it."""
    job = api_job(answer)
    view: Workload = {
        "workloadId": str(public_id(job)), "name": job["name"], "image": _image(job), "state": job["state"],
        "reason": job.get("reason"), "exitCode": job.get("exit_code"), "submitTime": job.get("submit_time"),
        "startTime": job.get("start_time"), "endTime": job.get("end_time"), "gpus": int(job.get("gpus") or 0),
        "gpuType": job.get("gpu_type"), "gpuMemoryMb": job.get("gpu_mem_mb"),
        "labels": bounded_labels(job.get("labels")),
        "preemptible": bool(job.get("preemptible")), "maxRuntimeSeconds": job.get("time_limit_s"),
        "logs": {"stdout": job.get("stdout_path"), "stderr": job.get("stderr_path")},
        "checkpointDir": checkpoint_dir(home, int(job["id"])), "nextStep": next_step(job),
    }
    if job.get("warnings"):
        view["warnings"] = [short_text(w) for w in job["warnings"][:MAX_WARNINGS]]
    return view


def _image(job: JobFields) -> str | None:
    image = job.get("image")
    return short_text(image) if image else None


def bounded_labels(labels: Mapping[str, Any] | None) -> dict[str, str]:
    """At most MAX_TAGS labels, each key and value cut to NAME_CHARS."""
    return {short_text(str(k), NAME_CHARS): short_text(str(v), NAME_CHARS)
            for k, v in list((labels or {}).items())[:MAX_TAGS]}


def gpu_list(cluster: Mapping[str, Any]) -> GpuList:
    """Every GPU, free or held and by whom, with totals per type (from `GET /api/v1/cluster`)."""
    gpus = []
    by_type: dict[tuple[str | None, int | None], dict[str, Any]] = {}
    for node in cluster.get("nodes", []):
        for gpu in node.get("gpus", []):
            unavailable = _unavailable(gpu)
            free = gpu.get("job_id") is None and unavailable is None
            gpus.append({"node": short_text(str(node["name"]), NAME_CHARS), "index": gpu["index"],
                         "type": gpu.get("type"), "mem_mb": gpu.get("mem_mb"), "free": free,
                         "job_id": _holder_id(gpu), "user": gpu.get("user"), "utilization": gpu.get("utilization"),
                         "memory_used_mb": gpu.get("memory_used_mb"),
                         **({"unavailable": unavailable} if unavailable is not None else {}), **_placement(gpu)})
            group = by_type.setdefault((gpu.get("type"), gpu.get("mem_mb")),
                                       {"type": gpu.get("type"), "mem_mb": gpu.get("mem_mb"), "total": 0, "free": 0})
            group["total"] += 1
            group["free"] += free
    free_count = sum(g["free"] for g in gpus)
    view: GpuList = {
        "total": len(gpus), "free": free_count, "busy": len(gpus) - free_count,
        "by_type": list(by_type.values())[:MAX_LIST], "gpus": [], "truncated": False,
        "note": "Free right now (a drained GPU, one in use outside corral, or one shared by small jobs is not free: "
                "see its unavailable). A job with share_gpu and a gpu_memory budget may share a GPU. "
                "A job asking for more GPUs than are free waits in the queue until they are; "
                "gpu_type and gpu_memory pick among the types listed."}
    shown, over_limit = capped(gpus, MAX_LIST)
    view["gpus"], over_budget = fit_items(shown, RESULT_BYTES - json_size(view))
    view["truncated"] = over_limit or over_budget
    return view


def _unavailable(gpu: Mapping[str, Any]) -> str | None:
    """Why no job is placed on a GPU though it may look idle: drained (by an admin, or by corral for a fault),
    or in use outside corral."""
    drained = gpu.get("drained")
    if drained:
        return short_text(f"drained by {drained.get('by')}: {drained.get('reason')}", NAME_CHARS * 2)
    if gpu.get("outside"):
        return "in use outside corral"
    shared = gpu.get("shared")
    if shared and shared.get("jobs"):
        return f"shared by {len(shared['jobs'])} job(s): {shared.get('free_mb')} MB left for jobs with share_gpu"
    return None


def _placement(gpu: Mapping[str, Any]) -> dict[str, Any]:
    """What an agent choosing GPUs should know beyond free or held: a MIG slice's GPU, the GPU's NVLink group."""
    out: dict[str, Any] = {}
    if gpu.get("parent") is not None:
        out["mig_slice_of"] = gpu["parent"]
    if gpu.get("nvlink"):
        out["nvlink_group"] = gpu["nvlink"]
    return out


def _holder_id(gpu: Mapping[str, Any]) -> int | str | None:
    """The id of the job holding a GPU as every tool names it (12, or "12_3"), not corral's internal one."""
    ref, job_id = gpu.get("job_ref"), gpu.get("job_id")
    if isinstance(ref, str) and ref:
        return int(ref) if ref.isdigit() else ref
    return job_id


def queue_view(page: Mapping[str, Any], limit: int) -> QueueView:
    """Running jobs, then pending ones in priority order, with reasons and estimated starts.

    Names are cut and the list ends where its JSON would pass RESULT_BYTES; `total` counts them all.
    """
    jobs = []
    for job in page.get("jobs", [])[:limit]:
        entry = {
            "job_id": public_id(job), "name": short_text(str(job["name"]), NAME_CHARS),
            "user": short_text(str(job["user"]), NAME_CHARS), "state": job["state"],
            "reason": job.get("reason"), "gpus": job.get("gpus"), "gpu_type": job.get("gpu_type"),
            "gpu_ids": job.get("gpu_ids"), "submit_time": job.get("submit_time"), "start_time": job.get("start_time"),
            "estimated_start": job.get("estimated_start"), "expected_end": job.get("expected_end"),
            "expected_end_source": job.get("expected_end_source"), "time_limit": format_duration(job.get("time_limit_s")),
        }
        if job["state"] == "PENDING":
            entry["priority"] = job.get("priority")
        if job.get("progress"):
            entry["progress"] = {k: job["progress"].get(k) for k in ("step", "total", "rate", "eta_s")}
        jobs.append(entry)
    total = int(page.get("total", len(jobs)))
    view: QueueView = {"total": total, "running": int(page.get("running", 0)), "pending": int(page.get("pending", 0)),
                       "jobs": [], "truncated": False}
    view["jobs"], _ = fit_items(jobs, RESULT_BYTES - json_size(view))
    view["truncated"] = total > len(view["jobs"])
    return view


def run_view(run: Mapping[str, Any], job_id: int | str | None = None) -> dict[str, Any]:
    """A tracked run: identity, state, its job, a bounded config and each metric's last/min/max.

    `job_id`: its job as the tools name it (`12`, or `"12_3"` for a task); else the run's own record of it.

    A config longer than CONFIG_CHARS as JSON is given as that JSON's text, cut with a marker.
    """
    metrics = run.get("metrics") or {}
    keys = sorted(metrics)[:RUN_METRIC_KEYS]
    config = run.get("config") or {}
    text = json.dumps(config, default=str, ensure_ascii=False)
    tags = [short_text(str(tag), NAME_CHARS) for tag in list(run.get("tags") or [])[:MAX_TAGS]]
    return {
        "id": run["id"], "uid": _short(run.get("uid")), "project": _short(run.get("project")),
        "name": _short(run.get("name")), "state": run.get("state"),
        "job_id": run.get("job_id") if job_id is None else job_id,
        "start_time": iso_utc(run.get("start_time")), "end_time": iso_utc(run.get("end_time")),
        "last_step": run.get("last_step"), "tags": tags, "tags_total": len(run.get("tags") or []),
        "config": config if len(text) <= CONFIG_CHARS else short_text(text, CONFIG_CHARS),
        "metrics": {short_text(k, NAME_CHARS): {f: number(metrics[k].get(f)) if f in ("last", "min", "max")
                                                 else metrics[k].get(f)
                                                 for f in ("count", "last_step", "last", "min", "max")}
                    for k in keys},
        "metric_keys_total": len(metrics),
    }


def _short(value: Any) -> Any:
    return short_text(value, NAME_CHARS) if isinstance(value, str) else value


def number(value: Any) -> Any:
    """A metric value as the tools write it: finite numbers as numbers, NaN and the infinities as
    the strings "NaN", "Infinity" and "-Infinity" (JSON has no such numbers), None as None."""
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, str):
        return _NONFINITE.get(value.lower(), value)
    return value


def series_summary(values: Sequence[Any]) -> dict[str, Any]:
    """First, last, min, max and mean of a series, and how many of its values are not finite.

    `first` and `last` are the values as they are, so a loss that ended in NaN reads `"NaN"`;
    min, max, mean and `last_finite` count finite values only (None when there are none).
    Missing values (None: not measured) are skipped.
    """
    present = [number(v) for v in values if v is not None]
    finite = [float(v) for v in present if isinstance(v, int | float) and not isinstance(v, bool)]
    summary: dict[str, Any] = {
        "first": present[0] if present else None, "last": present[-1] if present else None,
        "last_finite": finite[-1] if finite else None, "min": None, "max": None, "mean": None,
        "nonfinite": len(present) - len(finite),
    }
    if finite:
        summary.update(min=min(finite), max=max(finite), mean=round(sum(finite) / len(finite), 6))
    return summary


_EVIDENCE_CAPS = ((20, TEXT_CHARS), (10, 200), (5, NAME_CHARS), (2, 40))
"""(list items, string characters) tried in turn until a report fits RESULT_BYTES."""


def evidence(data: Any, max_bytes: int = RESULT_BYTES) -> Any:
    """A diagnosis or efficiency report with every string and list bounded, within `max_bytes` of JSON."""
    trimmed = data
    for items, chars in _EVIDENCE_CAPS:
        trimmed = _trim(data, items, chars, 0)
        if json_size(trimmed) <= max_bytes:
            break
    return trimmed


def _trim(data: Any, items: int, chars: int, depth: int) -> Any:
    if isinstance(data, str):
        return short_text(data, chars)
    if isinstance(data, float):
        return number(data)
    if isinstance(data, list):
        return [_trim(item, items, chars, depth + 1) for item in data[:items]]
    if isinstance(data, dict) and depth < 6:
        return {key: _trim(value, items, chars, depth + 1) for key, value in list(data.items())[:items * 5]}
    return data if depth < 6 or not isinstance(data, dict | list) else "…"


MAX_BLOCKERS = 20


def forecast_view(answer: Mapping[str, Any], *, gpu_type: str | None) -> ForecastView:
    """The forecast as forecast_gpu_job describes it, from the API's answer; alternatives as create_gpu_job's arguments."""
    alternatives: list[ForecastAlternative] = []
    for alt in answer.get("alternatives") or []:
        if alt["change"] == "time":
            change, arguments = "time_limit", {"time_limit": format_duration(alt["time_limit_s"])}
        else:
            change, arguments = "gpus", {"gpus": alt["gpus"]}
        alternatives.append({"change": change, "create_gpu_job_arguments": arguments,
                             "starts": "now" if not alt["start_in_s"] else alt["start"],
                             "starts_in": _starts_in(alt["start_in_s"]) or "now"})
    blockers: list[ForecastBlocker] = [
        {"job_id": b["job_id"], "user": short_text(b["user"]), "kind": b["kind"], "gpu_ids": list(b.get("gpus") or []),
         "cpus": int(b.get("cpus") or 0), "until": b.get("end")} for b in (answer.get("blockers") or [])[:MAX_BLOCKERS]]
    start_in = answer.get("start_in_s")
    return {
        "would_start": answer.get("start"), "starts_in": _starts_in(start_in), "node": answer.get("node"),
        "gpu_ids": list(answer.get("gpus") or []), "reason": short_text(answer["reason"]), "code": answer["code"],
        "waits_for": [str(r) for r in answer.get("waits_for") or []],
        "jobs_ahead": int(answer.get("ahead") or 0), "time_limit": format_duration(answer.get("time_limit_s")),
        "blockers": blockers, "alternatives": alternatives,
        "notes": [short_text(n) for n in (answer.get("notes") or [])[:MAX_WARNINGS]],
        "next_step": _forecast_step(answer, alternatives),
    }


def _starts_in(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return "now" if seconds <= 0 else format_duration(seconds)


def _forecast_step(answer: Mapping[str, Any], alternatives: Sequence[ForecastAlternative]) -> str:
    sooner = "; ".join(f"{a['create_gpu_job_arguments']} starts it "
                       + ("now" if a["starts"] == "now" else f"in {a['starts_in']}") for a in alternatives)
    if answer["code"] == "Unsatisfiable":
        return ("No machine here could ever run it as asked: change what the reason names"
                + (f" ({sooner})." if sooner else "."))
    if answer.get("start_in_s") == 0:
        return "create_gpu_job with the same arguments starts it now (unless someone else submits first)."
    if sooner:
        return (f"Starting sooner: {sooner}. If the job fits in that, create it so; else create it as asked and "
                "poll view_gpu_job patiently.")
    if answer.get("start") is None:
        return "It would wait with no foreseeable start: see the reason and blockers before creating it."
    return "create_gpu_job queues it; it should start around would_start. Poll view_gpu_job every minute or two."
