"""Alerts about GPUs rather than jobs. Each fatal fault (`corral.core.gpu_health`) is a firing of its own,
`gpu-health`, critical, about no job (so admins see it in `corral alert list` and on the dashboard; the owners of the
jobs it stopped hear of them through their jobs' NODE_FAIL, as any state rule fires).

It is sent to the channels of the admins' rules that watch every job for NODE_FAIL (`state == NODE_FAIL`,
`state in (FAILED, NODE_FAIL)`, no job, label or user scope): whoever asked to hear of failed nodes hears of
a failed GPU, with or without a job on it. A process newly found on a GPU outside corral
(`corral.core.outside_use`) is a `gpu-outside` warning to the same admins: it keeps jobs off that GPU (or shares
it), which they may want to take up with its owner. A sharing job warned of going over its GPU memory budget
(`corral.server.share_budgets`) is a `gpu-share-budget` warning about that job, sent where its failure would be
(the rules watching it for FAILED): its owner hears of it within the grace, while the job can still be saved.
Runs on the monitor's worker thread, which owns the evaluator.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from corral.core import alerts as A
from corral.core.gpu_health import HealthEvent
from corral.core.outside_use import OutsideProcess
from corral.core.sharing import gigabytes
from corral.core.states import JobState

if TYPE_CHECKING:
    from corral.core.sharing import OverBudget
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


def fire_gpu_faults(evaluator: RuleEvaluator, faults: Sequence[HealthEvent], now: float) -> None:
    """Record a firing for each fault, with its deliveries, in one transaction; then wake the sender."""
    if not faults:
        return
    channels = node_fail_channels(evaluator)
    with evaluator.engine.begin() as conn:
        for fault in faults:
            row = {"rule_id": None, "rule": RULE, "severity": "critical", "condition": "GPU fault (NVML)",
                   "job_id": None, "job_name": None, "user": None, "value": fault.what,
                   "message": f"{fault.describe()}; drained, the jobs on it stopped (corral resume once it is fixed)",
                   "fired_at": now}
            evaluator.store.fire(conn, row, channels, now, status="fired")
            log.error("alert %s fired: %s", RULE, fault.describe())
    evaluator.on_fired()
    evaluator.announcer.publish_threadsafe("alerts", {"fired": len(faults), "resolved": 0})


def fire_outside(evaluator: RuleEvaluator, processes: Sequence[OutsideProcess], now: float) -> None:
    """Record a `gpu-outside` firing for each process newly found on a GPU outside corral, with its deliveries."""
    if not processes:
        return
    channels = node_fail_channels(evaluator)
    with evaluator.engine.begin() as conn:
        for process in processes:
            memory = f", {process.mem_mb:.0f} MB" if process.mem_mb is not None else ""
            what = f"GPU {process.gpu} in use outside corral by {process.user} (pid {process.pid}{memory})"
            row = {"rule_id": None, "rule": OUTSIDE_RULE, "severity": "warning", "condition": "GPU process of no job (NVML)",
                   "job_id": None, "job_name": None, "user": None, "value": f"pid {process.pid}",
                   "message": f"{what}; jobs are kept off it by [node] outside_processes until it ends", "fired_at": now}
            evaluator.store.fire(conn, row, channels, now, status="fired")
            log.warning("alert %s fired: %s", OUTSIDE_RULE, what)
    evaluator.on_fired()
    evaluator.announcer.publish_threadsafe("alerts", {"fired": len(processes), "resolved": 0})


def fire_over_budget(evaluator: RuleEvaluator, warned: Sequence[tuple[A.JobFacts, OverBudget]], now: float) -> None:
    """Record a `gpu-share-budget` firing for each sharing job just warned of going over its GPU memory budget
    (`facts`: the job as it was then, taken on the event loop), delivered to the channels of the rules that
    watch that job for FAILED, in one transaction."""
    if not warned:
        return
    with evaluator.engine.begin() as conn:
        for facts, verdict in warned:
            rules = [rule for rule in evaluator.rules if rule.condition.kind == "state"
                     and JobState.FAILED.value in rule.condition.states and rule.scope.covers(facts)]
            # a channel goes out if any of these rules' owners may still use it (one owner's loss is not another's)
            usable = {c for rule in rules for c in rule.channels if c not in evaluator.refused(rule)}
            channels = list(dict.fromkeys(c for rule in rules for c in rule.channels))
            refused = {c: why for rule in rules for c, why in evaluator.refused(rule).items() if c not in usable}
            row = {"rule_id": None, "rule": BUDGET_RULE, "severity": "warning",
                   "condition": "GPU memory over its budget (NVML)", "job_id": facts.job_id, "job_name": facts.name,
                   "user": facts.user, "value": gigabytes(verdict.used_mb),
                   "message": f"job {facts.job_id} ({facts.name}): {verdict.warning()}", "fired_at": now}
            evaluator.store.fire(conn, row, channels, now, refused, status="fired")
            log.warning("alert %s fired for job %d: %s", BUDGET_RULE, facts.job_id, verdict.reason())
    evaluator.on_fired()
    evaluator.announcer.publish_threadsafe("alerts", {"fired": len(warned), "resolved": 0})
