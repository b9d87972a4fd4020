"""Alerts about GPUs rather than jobs. Each fatal fault (`corral.core.monitoring.gpu_health`) is a firing of its own,
`gpu-health`, critical, about no job (so admins see it in `corral alert list` and on the dashboard; the owners of the
jobs it stopped hear of them through their jobs' NODE_FAIL, as any state rule fires).

It is sent to the channels of the admins' rules that watch every job for NODE_FAIL (`state == NODE_FAIL`,
`state in (FAILED, NODE_FAIL)`, no job, label or user scope): whoever asked to hear of failed nodes hears of
a failed GPU, with or without a job on it. A process newly found on a GPU outside corral
(`corral.core.monitoring.outside_use`) is a `gpu-outside` warning to the same admins: it keeps jobs off that GPU (or shares
it), which they may want to take up with its owner. A sharing job warned of going over its GPU memory budget
(`corral.server.share_budgets`) is a `gpu-share-budget` warning about that job, sent where its failure would be
(the rules watching it for FAILED): its owner hears of it within the grace, while the job can still be saved.
Runs on the monitor's worker thread, which owns the evaluator.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from corral.core.monitoring import alerts as A
from corral.core.monitoring.gpu_health import HealthEvent
from corral.core.monitoring.outside_use import OutsideProcess
from corral.core.scheduling.sharing import gigabytes
from corral.core.jobspec.states import JobState

if TYPE_CHECKING:
    from corral.core.scheduling.sharing import OverBudget
    from corral.monitor.rules import RuleEvaluator

log = logging.getLogger("corral.monitor")

RULE = "gpu-health"
OUTSIDE_RULE = "gpu-outside"
BUDGET_RULE = "gpu-share-budget"


def node_fail_channels(evaluator: RuleEvaluator) -> list[str]:
    """The channels of the admins' rules that watch every job for NODE_FAIL."""
    out: list[str] = []
    for rule in evaluator.rules:
        if (rule.condition.kind == "state" and JobState.NODE_FAIL.value in rule.condition.states
                and rule.scope == A.Scope() and (rule.owner is None or evaluator.is_admin(rule.owner))):
            out += rule.channels
    return list(dict.fromkeys(out))


_Firing = tuple[dict[str, object], Sequence[str], Mapping[str, str]]
"""A firing's row, its channels, and those of them refused (each with why)."""


def _fire(evaluator: RuleEvaluator, firings: Sequence[_Firing], now: float) -> None:
    """Record each firing with its deliveries, in one transaction; then wake the sender. Each is about something
    nothing clears: "fired", never "resolved"."""
    if not firings:
        return
    with evaluator.engine.begin() as conn:
        for row, channels, refused in firings:
            evaluator.store.fire(conn, row, channels, now, refused, status="fired")
    evaluator.on_fired()
    evaluator.announcer.publish_threadsafe("alerts", {"fired": len(firings), "resolved": 0})


def _row(rule: str, severity: str, condition: str, value: str, message: str, now: float,
         about: A.JobFacts | None = None) -> dict[str, object]:
    return {"rule_id": None, "rule": rule, "severity": severity, "condition": condition,
            "job_id": about.job_id if about else None, "job_name": about.name if about else None,
            "user": about.user if about else None, "value": value, "message": message, "fired_at": now}


def fire_gpu_faults(evaluator: RuleEvaluator, faults: Sequence[HealthEvent], now: float) -> None:
    """Record a `gpu-health` firing for each fault, to the admins' NODE_FAIL channels."""
    channels = node_fail_channels(evaluator)
    for fault in faults:
        log.error("alert %s fired: %s", RULE, fault.describe())
    _fire(evaluator, [(_row(RULE, "critical", "GPU fault (NVML)", fault.what,
                            f"{fault.describe()}; drained, the jobs on it stopped (corral resume once it is fixed)",
                            now), channels, {}) for fault in faults], now)


def fire_outside(evaluator: RuleEvaluator, processes: Sequence[OutsideProcess], now: float) -> None:
    """Record a `gpu-outside` firing for each process newly found on a GPU outside corral, to the admins'
    NODE_FAIL channels."""
    channels = node_fail_channels(evaluator)
    firings: list[_Firing] = []
    for process in processes:
        memory = f", {process.mem_mb:.0f} MB" if process.mem_mb is not None else ""
        what = f"GPU {process.gpu} in use outside corral by {process.user} (pid {process.pid}{memory})"
        log.warning("alert %s fired: %s", OUTSIDE_RULE, what)
        firings.append((_row(OUTSIDE_RULE, "warning", "GPU process of no job (NVML)", f"pid {process.pid}",
                             f"{what}; jobs are kept off it by [node] outside_processes until it ends", now),
                        channels, {}))
    _fire(evaluator, firings, now)


def fire_over_budget(evaluator: RuleEvaluator, warned: Sequence[tuple[A.JobFacts, OverBudget]], now: float) -> None:
    """Record a `gpu-share-budget` firing for each sharing job just warned of going over its GPU memory budget
    (`facts`: the job as it was then, taken on the event loop), to the channels of the rules that watch that job
    for FAILED."""
    firings: list[_Firing] = []
    for facts, verdict in warned:
        rules = [rule for rule in evaluator.rules if rule.condition.kind == "state"
                 and JobState.FAILED.value in rule.condition.states and rule.scope.covers(facts)]
        # a channel goes out if any of these rules' owners may still use it (one owner's loss is not another's)
        usable = {c for rule in rules for c in rule.channels if c not in evaluator.refused(rule)}
        channels = list(dict.fromkeys(c for rule in rules for c in rule.channels))
        refused = {c: why for rule in rules for c, why in evaluator.refused(rule).items() if c not in usable}
        log.warning("alert %s fired for job %d: %s", BUDGET_RULE, facts.job_id, verdict.reason())
        firings.append((_row(BUDGET_RULE, "warning", "GPU memory over its budget (NVML)", gigabytes(verdict.used_mb),
                             f"job {facts.job_id} ({facts.name}): {verdict.warning()}", now, facts),
                        channels, refused))
    _fire(evaluator, firings, now)
