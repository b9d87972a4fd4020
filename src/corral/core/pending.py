"""A waiting job as the scheduler sees it: what it asks for and what orders it (`corral.core.priority` ranks
these, `corral.core.policy.schedule` places them)."""

from __future__ import annotations

from dataclasses import dataclass

from corral.core.resources import Request


@dataclass(frozen=True, slots=True)
class PendingJob:
    job_id: int
    request: Request
    user: str = ""
    partition: str | None = None
    qos: str | None = None
    time_limit_s: int | None = None
    held: bool = False
    submit_time: float = 0.0
    nice: int = 0
    preemptible: bool = False
