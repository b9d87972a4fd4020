"""Tables for the monitoring commands: `corral top`, `corral alert ...`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from corral.cli.format import table
from corral.cli.terminal import escaped
from corral.core.units.units import format_duration


@escaped
def top_table(rows: Sequence[Mapping[str, Any]], now: float) -> str:
    """One line per running job: its GPUs (index:utilization/memory), CPU, RSS and training progress."""
    if not rows:
        return "no running jobs"
    lines = []
    for row in rows:
        sample = row.get("sample") or {}
        progress = row.get("progress") or {}
        gpus = " ".join(
            f"{g['index']}:{_pct(g.get('utilization'))}/{_gb(g.get('memory_used_mb'))}" for g in sample.get("gpus", [])
        ) or _unread_gpus(row)
        if sample.get("stray_gpus"):
            gpus += f" (also on {','.join(str(g) for g in sample['stray_gpus'])}!)"
        elapsed = now - row["start_time"] if row.get("start_time") else None
        lines.append([
            row["ref"], row["name"][:20], row["user"], format_duration(elapsed), gpus,
            _pct(sample.get("cpu_utilization")) + (f" of {row['cpus']}" if sample else ""),
            _gb(sample.get("rss_mb")), _step(progress), _rate(progress.get("rate")), _eta(progress, row, now),
        ])
    return table(["JOBID", "NAME", "USER", "TIME", "GPUS (util/mem)", "CPU", "RSS", "STEP", "RATE", "ETA"], lines)


def _unread_gpus(row: Mapping[str, Any]) -> str:
    """A job's GPUs with no figures: `0,1 no driver` once, not a `?` per GPU that reads as an error."""
    if not row["gpu_ids"]:
        return "-"
    ids = ",".join(str(i) for i in row["gpu_ids"])
    if row.get("gpu_driver") is False:
        return f"{ids} no driver"
    return f"{ids} not read yet"


@escaped
def rules_table(rules: Sequence[Mapping[str, Any]]) -> str:
    if not rules:
        return "no alert rules (add one: corral alert create NAME --condition 'state == FAILED')"
    rows = []
    for r in rules:
        scope = ", ".join(f"{k} {r[k]}" for k in ("job", "label", "user") if r.get(k)) or "all jobs"
        rows.append([r["name"], r["severity"].upper(), r["condition"], scope, ",".join(r["channels"]) or "-"])
    return table(["NAME", "SEVERITY", "CONDITION", "SCOPE", "CHANNELS"], rows)


_STATUS = {"fired": "FIRED (ended job)"}
"""A firing about a job that ended is an event, over once told: not RESOLVED, which reads as all well."""


@escaped
def firings_table(firings: Sequence[Mapping[str, Any]]) -> str:
    if not firings:
        return "no alerts"
    rows = []
    for f in firings:
        status = _STATUS.get(f["status"], f["status"].upper()) + (" ACK" if f.get("acknowledged_at") else "")
        rows.append([
            str(f["id"]), _time(f["fired_at"]), f["severity"].upper(), status, f["rule"],
            str(f["job_id"]) if f.get("job_id") is not None else "-", f["message"][:60], _deliveries(f["deliveries"]),
        ])
    return table(["ID", "FIRED", "SEVERITY", "STATUS", "RULE", "JOB", "MESSAGE", "SENT"], rows)


@escaped
def channels_table(channels: Sequence[Mapping[str, Any]]) -> str:
    if not channels:
        return "no alert channels (add one: corral alert channel add NAME --webhook URL)"
    rows = [[c["name"], c["type"], shared_with_text(c.get("shared_with") or []),
             ", ".join(f"{k}={v}" for k, v in c["config"].items())] for c in channels]
    return table(["NAME", "TYPE", "SHARED WITH", "SETTINGS"], rows)


def shared_with_text(users: Sequence[str]) -> str:
    """Who besides admins may name the channel in a rule."""
    if "*" in users:
        return "everyone"
    return ",".join(users) if users else "admins only"


def _deliveries(deliveries: Sequence[Mapping[str, Any]]) -> str:
    """`slack:sent mail:FAILED(3)`: a channel that fails shows it, never silently."""
    if not deliveries:
        return "-"
    parts = []
    for d in deliveries:
        if d["status"] == "sent":
            parts.append(f"{d['channel']}:sent")
        elif d["status"] == "failed":
            parts.append(f"{d['channel']}:FAILED({d['attempts']})")
        else:
            parts.append(f"{d['channel']}:" + (f"retrying({d['attempts']})" if d["attempts"] else "pending"))
    return " ".join(parts)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _gb(mb: float | None) -> str:
    if mb is None:
        return "-"
    return f"{mb / 1024:.1f}G" if mb >= 1024 else f"{mb:.0f}M"


def _step(progress: Mapping[str, Any]) -> str:
    if not progress:
        return "-"
    return f"{progress['step']}" + (f"/{progress['total']}" if progress.get("total") else "")


def _rate(rate: float | None) -> str:
    if rate is None:
        return "-"
    return f"{rate:.1f}/s" if rate >= 1 else f"{rate * 60:.1f}/min"


def _eta(progress: Mapping[str, Any], row: Mapping[str, Any], now: float) -> str:
    eta = progress.get("eta_s") if progress else None
    if eta is None:
        return "-"
    text = format_duration(eta)
    limit = row.get("time_limit_s")
    if limit and row.get("start_time") and now + eta > row["start_time"] + limit:
        text += " (past its time limit!)"
    return text


def _time(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts).strftime("%m-%d %H:%M:%S")
