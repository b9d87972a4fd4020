"""The course tracker's request bodies, checked and turned into corral's own.

The course's tracker client (copied by many small trackers) speaks a handful of routes of its own:
`POST {TRACKER_API}/experiments/{id}/runs`, `/runs/{id}/metrics`, `/runs/{id}/metrics/batch`,
`/runs/{id}/artifacts`. This module is the one place its shapes are known: each function takes the
decoded body as the client sent it and gives the body corral's run API takes, or raises
InvalidRequest naming the course's own field. `api/compat/tracker_client.py` is the edge that serves it.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from corral.core.tracking.metrics_batch import MAX_STEP
from corral.errors import InvalidRequest

MAX_EXPERIMENT = 200
MAX_BATCH_METRICS = 10_000


@dataclass(frozen=True)
class TrackerRun:
    """A run the course's client asks for, in corral's terms."""

    project: str
    """The experiment id, as the project's name."""
    slurm_job_id: str | None
    """The job it runs in, as the client sent it (a corral job id, or the Slurm backend's id)."""
    body: dict[str, Any]
    """The body of corral's `POST /api/v1/runs`, without job_id (the edge resolves the job)."""


def tracker_run(experiment_id: str, body: Any) -> TrackerRun:
    """`POST /experiments/{experiment_id}/runs` with `{"slurm_job_id", "slurm_node", "config", "gpu_type"}`.

    Raises:
        InvalidRequest: the course field at fault.
    """
    if not experiment_id or len(experiment_id) > MAX_EXPERIMENT or not experiment_id.isprintable():
        raise InvalidRequest("experiment_id", f"{experiment_id!r} is not an experiment id",
                             f"use 1-{MAX_EXPERIMENT} printable characters; it names the corral project")
    body = _object(body, '{"slurm_job_id": "123", "slurm_node": "gpu01", "config": {"lr": 0.001}, "gpu_type": "A100"}')
    known = {"slurm_job_id", "slurm_node", "config", "gpu_type"}
    unknown = set(body) - known
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "unknown field", f"a run takes {', '.join(sorted(known))}")
    job = body.get("slurm_job_id")
    if isinstance(job, int) and not isinstance(job, bool):
        job = str(job)
    if job is not None and job != "":
        if not isinstance(job, str) or not is_job_id(job.strip()):
            raise InvalidRequest("slurm_job_id", f"{job!r} is not a job id",
                                 "send $SLURM_JOB_ID (digits, or 12_3 for an array task), or null outside a job")
        job = job.strip()
    else:
        job = None
    config = body.get("config")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise InvalidRequest("config", "must be a JSON object", 'e.g. {"lr": 0.001, "batch_size": 64}')
    run: dict[str, Any] = {"project": experiment_id, "config": config}
    for field, key, limit in (("slurm_node", "node", 128), ("gpu_type", "gpu_type", 64)):
        value = body.get(field)
        if value in (None, ""):
            continue
        if not isinstance(value, str) or len(value) > limit or not value.isprintable():
            raise InvalidRequest(field, f"{value!r} is not valid here", f"give 1-{limit} printable characters, or null")
        run[key] = value
    if job is not None:
        # a requeued job that starts the script again gets its run back, as corral.init's runs do
        run["resume_key"] = f"course:{experiment_id}:job:{job}"
    return TrackerRun(experiment_id, job, run)


def metric_body(body: Any) -> dict[str, Any]:
    """`POST /runs/{id}/metrics` with `{"name", "value", "step"}` as corral's metrics body (one point).

    Raises:
        InvalidRequest: the course field at fault.
    """
    body = _object(body, '{"name": "train_loss", "value": 0.42, "step": 100}')
    unknown = set(body) - {"name", "value", "step", "timestamp"}
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "unknown field", "a metric takes name, value, step (and timestamp)")
    point = {"key": _name(body.get("name"), "name"), "step": _step(body.get("step"), "step"),
             "value": _value(body.get("value"), "value")}
    if body.get("timestamp") is not None:
        point["time"] = parse_timestamp(body["timestamp"])
    return {"points": [point]}


def batch_body(body: Any) -> dict[str, Any]:
    """`POST /runs/{id}/metrics/batch` with `{"step", "metrics": {name: value}, "timestamp"}` as corral's body.

    Raises:
        InvalidRequest: the course field at fault.
    """
    body = _object(body, '{"step": 100, "metrics": {"train_loss": 0.42, "lr": 0.001}, "timestamp": "2026-01-15T08:00:00Z"}')
    unknown = set(body) - {"step", "metrics", "timestamp"}
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "unknown field", "a batch takes step, metrics and timestamp")
    step = _step(body.get("step"), "step")
    metrics = body.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        raise InvalidRequest("metrics", "must be an object of names and values", 'e.g. {"train_loss": 0.42}')
    if len(metrics) > MAX_BATCH_METRICS:
        raise InvalidRequest("metrics", f"{len(metrics)} metrics in one batch", f"send at most {MAX_BATCH_METRICS:,}")
    when = parse_timestamp(body["timestamp"]) if body.get("timestamp") is not None else None
    points = []
    for name, value in metrics.items():
        point = {"key": _name(name, f"metrics.{name}"), "step": step, "value": _value(value, f"metrics.{name}")}
        if when is not None:
            point["time"] = when
        points.append(point)
    return {"points": points}


def artifact_body(body: Any) -> dict[str, Any]:
    """`POST /runs/{id}/artifacts` with `{"path", "type", "size_bytes"}` as corral's artifacts body.

    Raises:
        InvalidRequest: the course field at fault.
    """
    body = _object(body, '{"path": "/scratch/ckpt/epoch10.pt", "type": "checkpoint", "size_bytes": 104857600}')
    unknown = set(body) - {"path", "type", "size_bytes"}
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "unknown field", "an artifact takes path, type and size_bytes")
    path = body.get("path")
    if not isinstance(path, str) or not 0 < len(path) <= 4096 or "\0" in path:
        raise InvalidRequest("path", f"{path!r} is not a path", "give the file's path")
    kind = body.get("type")
    if kind is not None and (not isinstance(kind, str) or not 0 < len(kind) <= 32 or not kind.isprintable()):
        raise InvalidRequest("type", f"{kind!r} is not an artifact type", 'give 1-32 printable characters, e.g. "checkpoint"')
    size = body.get("size_bytes")
    if size is not None and (type(size) is not int or not 0 <= size < 2**63):
        raise InvalidRequest("size_bytes", f"{size!r} is not a size", "give the file's size in bytes, a whole number")
    item: dict[str, Any] = {"path": path, "type": kind or "file"}
    if size is not None:
        item["size"] = size
    return {"artifacts": [item]}


def parse_timestamp(value: Any) -> float:
    """Epoch seconds of an ISO 8601 time; one without a zone is UTC (`datetime.utcnow().isoformat()`).

    Raises:
        InvalidRequest: not an ISO 8601 time.
    """
    if isinstance(value, str) and len(value) <= 64:
        try:
            moment = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            moment = None
        if moment is not None:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.timezone.utc)
            return moment.timestamp()
    raise InvalidRequest("timestamp", f"{value!r} is not an ISO 8601 time", 'e.g. "2026-01-15T08:00:00Z"')


def is_job_id(text: str) -> bool:
    """Whether `text` is a job id as $SLURM_JOB_ID gives it: digits, or `12_3` for an array task."""
    head, _, task = text.partition("_")
    return (head.isascii() and head.isdigit() and len(head) <= 18
            and (not task or (task.isascii() and task.isdigit() and len(task) <= 9)))


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 250 or not value.isprintable():
        raise InvalidRequest(field, f"{value!r} is not a metric name", "use 1-250 printable characters, e.g. train_loss")
    return value


def _step(value: Any, field: str) -> int:
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int or not 0 <= value < MAX_STEP:
        raise InvalidRequest(field, f"{value!r} is not a step", "send the step (or epoch) as a whole number >= 0")
    return value


def _value(value: Any, field: str) -> Any:
    if value is None:
        return None  # stored as NaN, as corral's own API does
    if type(value) not in (int, float):
        raise InvalidRequest(field, f"{value!r} is not a number", "send the metric's value as a number")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidRequest(field, "is too large for a 64-bit float") from None
    return number if math.isfinite(number) else _nonfinite(number)


def _nonfinite(number: float) -> Any:
    # corral's rows take these spellings for NaN and the infinities
    return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")


def _object(body: Any, example: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest("body", "must be a JSON object", f"e.g. {example}")
    return body
