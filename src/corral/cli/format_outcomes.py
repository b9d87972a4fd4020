"""What became of a job that `corral cancel` or `corral requeue` named: one line, in words (the states are in
`--json` and `corral show`)."""

from __future__ import annotations

from corral.cli.format import elapsed
from corral.cli.terminal import escape

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STOPPING = "SIGTERM sent, SIGKILL after the grace period"


def cancelled(asked: str, job: dict[str, Any]) -> str:
    """`job 15: cancelled before it started`, `job 14: being stopped (...)`, ..."""
    state, head = job["state"], f"job {asked}:"
    if job.get("array") and job.get("array_job_id") is None:  # the array: its own state is its tasks'
        if state == "PENDING":
            return f"{head} cancelled: no more of its tasks start; its running tasks are being stopped ({STOPPING})"
        if state == "CANCELLED":
            return f"{head} cancelled: no more of its tasks start, and none runs"
    elif state == "CANCELLED":
        if job.get("start_time") is None:
            return f"{head} cancelled before it started"
        return f"{head} cancelled: stopped after running {elapsed(job)}"
    elif state == "RUNNING":
        return f"{head} being stopped ({STOPPING}); it ends CANCELLED"
    elif state != "PENDING":
        return f"{head} ended {state} before the cancel stopped it"
    return f"{head} {state}" + _reason(job)


def requeued(asked: str, job: dict[str, Any]) -> str:
    """`job 13: queued again (restart 1), waiting: Priority`, `job 13: being stopped, to be queued again`, ..."""
    state, head = job["state"], f"job {asked}:"
    if state == "RUNNING":
        return f"{head} being stopped, to be queued again"  # as a preemption stops it: its --signal, if any
    if state != "PENDING":
        return f"{head} {state}" + _reason(job)
    line = f"{head} queued again" + (f" (restart {job['restarts']})" if job.get("restarts") else "")
    if job.get("held"):
        return f"{line}; held: it starts once released (corral release {job['id']})"
    reason = job.get("reason")
    return line + (f"; waiting: {escape(reason)}" if reason and reason != "None" else "")


def _reason(job: dict[str, Any]) -> str:
    return f" ({escape(job['reason'])})" if job.get("reason") else ""
