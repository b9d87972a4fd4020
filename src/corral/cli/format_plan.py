"""`corral plan`'s text: when a job would start, where, why, who holds what it needs, and what would start it sooner.

The what-if is "it", never "Job N": the id it would get is the next submit's, whoever makes it."""

from __future__ import annotations

from typing import Any

from corral.cli.terminal import escaped


@escaped
def forecast_text(answer: dict[str, Any]) -> str:
    """The forecast as a person reads it: when, where, why, who holds what it needs, and what would be sooner."""
    from corral.core.units.units import format_duration

    lines = []
    limit = format_duration(answer.get("time_limit_s"))
    where = _where(answer.get("node"), answer.get("gpus") or [])
    if answer["start"] is None:
        lines.append(f"It would not start as things stand: {answer['reason']}.")
    elif not answer["start_in_s"]:
        lines.append(f"It would start now{where}, partition {answer['partition']}, time limit {limit}.")
    else:
        lines.append(f"It would start at {_when(answer['start'], answer['start_in_s'])}{where}, "
                     f"partition {answer['partition']}, time limit {limit}.")
        lines.append(f"Why: {answer['reason']}.")
        if answer.get("waits_for"):
            lines.append(f"Waits for: {', '.join(_RESOURCES.get(r, r) for r in answer['waits_for'])}.")
    if answer.get("ahead"):
        lines.append(f"Ahead of it in the queue: {answer['ahead']} pending job{'s' if answer['ahead'] > 1 else ''}.")
    blockers = answer.get("blockers") or []
    if blockers:
        lines.append("Held by:")
        rows = [("JOB", "USER", "KIND", "NODE", "GPUS", "CPUS", "FROM", "UNTIL")]
        for b in blockers:
            start = b["start"] if b["kind"] == "reserved" else None
            until = "no time limit" if b["end"] is None and b["kind"] != "waiting" else (
                _when(b["end"], b["ends_in_s"]) if b["end"] else "-")
            rows.append((str(b["job_id"]), b["user"], b["kind"], b.get("node") or "-",
                         ",".join(map(str, b.get("gpus") or [])) or "-", str(b.get("cpus") or "-"),
                         _local(start) if start else "-", until))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    alternatives = answer.get("alternatives") or []
    if alternatives:
        lines.append("Sooner:")
        width = max(len(a["option"]) for a in alternatives)
        for a in alternatives:
            when = "starts now" if not a["start_in_s"] else f"starts at {_when(a['start'], a['start_in_s'])}"
            lines.append(f"  {a['option'].ljust(width)}  {when}{_where(a.get('node'), a.get('gpu_ids') or [])}")
    for note in answer.get("notes") or []:
        lines.append(f"Note: {note}")
    if answer.get("preempts"):
        lines.append(f"Preempts: {', '.join(map(str, answer['preempts']))}")
    return "\n".join(lines)


_RESOURCES = {"gpus": "GPUs", "cpus": "CPUs", "memory": "memory"}


def _where(node: str | None, gpus: list[int]) -> str:
    if not node:
        return ""
    return f" on {node}" + (f" (GPUs {','.join(map(str, gpus))})" if gpus else "")


def _local(text: str) -> str:
    from corral.cli.format import local_time

    return local_time(text)


def _when(text: str, in_s: float | None) -> str:
    from corral.core.units.units import format_duration

    return f"{_local(text)} (in {format_duration(in_s)})" if in_s is not None else _local(text)
