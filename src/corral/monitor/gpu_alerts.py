"""Alerts for GPU faults (`corral.core.gpu_health`): each fatal fault is a firing of its own, `gpu-health`,
critical, about no job (so admins see it in `corral alert list` and on the dashboard; the owners of the
jobs it stopped hear of them through their jobs' NODE_FAIL, as any state rule fires).

It is sent to the channels of the admins' rules that watch every job for NODE_FAIL (`state == NODE_FAIL`,
`state in (FAILED, NODE_FAIL)`, no job, label or user scope): whoever asked to hear of failed nodes hears of
a failed GPU, with or without a job on it. Runs on the monitor's worker thread, which owns the evaluator.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from corral.core import alerts as A
from corral.core.gpu_health import HealthEvent
from corral.core.states import JobState

if TYPE_CHECKING:
    from corral.monitor.rules import RuleEvaluator

log = logging.getLogger("corral.monitor")

RULE = "gpu-health"


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
