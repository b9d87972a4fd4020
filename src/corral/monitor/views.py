"""The monitor's rows as the API shows them, and back: rules, channels, firings, samples, findings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from corral.core.monitoring import alerts as A
from corral.store.monitoring import SAMPLE_COLUMNS

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job
    from corral.monitor.sampling import JobSample


def rule_of(row: Mapping[str, Any]) -> A.Rule:
    label = row["scope_label"]
    scope = A.Scope(row["scope_job"], tuple(label.split("=", 1)) if label else None, row["scope_user"])
    return A.Rule(row["id"], row["name"], row["severity"], A.parse_condition(row["condition"]), row["message"],
                  scope, tuple(row["channels"] or ()), row["owner"])


def rule_view(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "severity": row["severity"], "condition": row["condition"],
            "message": row["message"], "job": row["scope_job"], "label": row["scope_label"], "user": row["scope_user"],
            "channels": list(row["channels"] or ()), "owner": row["owner"], "created": row["created"]}


def channel_view(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": row["name"], "type": row["type"], "config": redacted(row["config"]), "created": row["created"],
            "owner": row["owner"], "shared_with": list(row["shared_with"] or [])}


def redacted(config: Mapping[str, Any]) -> dict[str, Any]:
    """A channel's settings fit to show: a webhook URL's path and header values are secrets (Slack's are)."""
    from urllib.parse import urlsplit

    shown = dict(config)
    if isinstance(shown.get("url"), str):
        parts = urlsplit(shown["url"])
        shown["url"] = f"{parts.scheme}://{parts.netloc}/" + ("…" if parts.path.strip("/") else "")
    if isinstance(shown.get("headers"), Mapping):
        shown["headers"] = {k: "…" for k in shown["headers"]}
    return shown


def firing_view(row: Mapping[str, Any]) -> dict[str, Any]:
    view = {k: row[k] for k in ("id", "rule", "severity", "condition", "job_id", "job_name", "user", "status", "value",
                                "message", "fired_at", "resolved_at", "acknowledged_at", "acknowledged_by")}
    view["deliveries"] = [{k: d[k] for k in ("channel", "event", "status", "attempts", "last_error", "sent_at",
                                             "next_attempt_at")} for d in row.get("deliveries", [])]
    return view


def notification(firing: Mapping[str, Any], event: str) -> Any:
    from corral.monitor.channels import Notification

    return Notification(
        firing_id=firing["id"], rule=firing["rule"], severity=firing["severity"], status=event,
        condition=firing["condition"], message=firing["message"], job_id=firing["job_id"], job_name=firing["job_name"],
        user=firing["user"], value=firing["value"], fired_at=firing["fired_at"],
        resolved_at=firing["resolved_at"] if event == "resolved" else None,
    )


def sample_row(sample: JobSample) -> dict[str, Any]:
    return {"job_id": sample.job_id, "time": sample.time, **{name: getattr(sample, name) for name in SAMPLE_COLUMNS}}


def sample_view(sample: JobSample) -> dict[str, Any]:
    view: dict[str, Any] = {"time": sample.time}
    for name in SAMPLE_COLUMNS:
        value = getattr(sample, name)
        view[name] = round(value, 2) if isinstance(value, float) else value
    view["gpus"] = [{"index": g[0], "utilization": g[1], "memory_used_mb": g[2], "memory_total_mb": g[3]}
                    for g in sample.gpus]
    view["stray_gpus"] = list(sample.stray_gpus)
    return view


def job_view(job: Job) -> dict[str, Any]:
    """The job as the API shows it, with its times also in epoch seconds for the arithmetic."""
    view: dict[str, Any] = {**job.to_dict(detail=False)}
    view.update(submit_time_s=job.submit_time, start_time_s=job.start_time, end_time_s=job.end_time)
    return view


def finding_view(finding: Any) -> dict[str, Any]:
    return {"cause": finding.cause, "title": finding.title, "severity": finding.severity,
            "evidence": list(finding.evidence), "fixes": list(finding.fixes)}
