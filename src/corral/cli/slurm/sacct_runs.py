"""A requeued job's runs as Slurm 22.05's accounting keeps them: a record per run (captured on the testbed:
tests/cli/slurm/golden/sacct_requeued_*.txt).

Slurm ends a run that is requeued (`scontrol requeue`, a preemption, a node failure) with a record of its
own, REQUEUED (PREEMPTED for a preemption), ending when it was requeued, its `.batch` and steps under it;
the next run is a new record, submitted at that moment, whose steps are numbered from 0 again. `sacct`
shows a job's newest record; `-D/--duplicates` shows every one, oldest first.

corral's job holds its newest run, and its timeline (`events`) each start and each requeue: from those, and
each step's `restart` (the run it ran in), the records are made here as job dicts for `sacct_format`.
Only the standard library's cheap parts: sacct imports it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    Job = Mapping[str, Any]


def records(job: Job, *, duplicates: bool) -> list[dict[str, Any]]:
    """The job's records to print, oldest first: its newest run's alone, or (`duplicates`) one per run.

    Each is the job's dict with its run's times, state and `steps`; an earlier run's carries `batch_state`,
    `batch_exit` (`code:signal`) and `batch_end_time` for its `.batch` line, and `usage_known` False (corral
    keeps the newest run's usage only)."""
    restarts = int(job.get("restarts") or 0)
    steps = list(job.get("steps") or ())
    ends = [event for event in job.get("events") or () if event.get("kind") == "requeued"]
    newest = dict(job, steps=[step for step in steps if int(step.get("restart") or 0) == restarts])
    if not restarts or not ends:
        return [newest]
    if ends[-1].get("time"):  # the run now is a new record: submitted when the last one was requeued
        newest["submit_time"] = ends[-1]["time"]
        newest["begin_time"] = None
    if not duplicates:
        return [newest]
    starts = [event for event in job.get("events") or () if event.get("kind") == "started"]
    preempted = [event.get("time") for event in job.get("events") or () if event.get("kind") == "preempted"]
    earlier = []
    submitted = job.get("submit_time")
    for run, end in enumerate(ends[:restarts]):
        when = end.get("time")
        start = next((event.get("time") for event in reversed(starts) if (event.get("time") or "") <= (when or "")),
                     None)
        # a preemption's requeue follows its preemption (asked at or before it, since the run's start)
        was_preempted = any(start is not None and when is not None and start <= moment <= when
                            for moment in preempted)
        earlier.append(dict(
            job, state="PREEMPTED" if was_preempted else "REQUEUED", submit_time=submitted, begin_time=None,
            start_time=start, end_time=when, node=_node(starts, start) or job.get("node"), reason=None,
            exit_code=end.get("exit_code") or 0, signal=None, usage_known=False,
            batch_state=_batch_state(end), batch_exit=f"{end.get('exit_code') or 0}:{end.get('signal') or 0}",
            batch_end_time=end.get("ended") or when,
            steps=[step for step in steps if int(step.get("restart") or 0) == run],
        ))
        submitted = when
    return [*earlier, newest]


def _batch_state(end: Mapping[str, Any]) -> str:
    """How a run's batch shell ended, as its `.batch` line says: killed by a signal, CANCELLED; else by its exit
    code, or the state it had ended in for a job requeued once it had ended (a time limit's is CANCELLED)."""
    if end.get("signal"):
        return "CANCELLED"
    state = str(end.get("state") or "")
    if state in ("TIMEOUT", "CANCELLED"):
        return "CANCELLED"
    if state:
        return state
    return "FAILED" if end.get("exit_code") else "COMPLETED"


def _node(starts: list[Mapping[str, Any]], start: str | None) -> str | None:
    for event in starts:
        if event.get("time") == start:
            return event.get("node")
    return None
