"""A finding of `corral diagnose`: one thing wrong with a job, the evidence for it and what to do,
and how serious it is. Pure data: the monitor makes findings, the API sends them, the CLI prints them."""

from __future__ import annotations

from dataclasses import dataclass

CRITICAL = "critical"
"""Why it failed (or will)."""
WARNING = "warning"
"""Why it is slow or wasteful."""


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a job, the evidence for it and what to do."""

    cause: str
    """A stable id, one of CAUSES: "data_loading", "gpu_idle", "nan_loss", "cuda_oom", "host_oom", ..."""
    title: str
    evidence: tuple[str, ...]
    """Numbers and log lines (with their `stream:line`) the finding rests on."""
    fixes: tuple[str, ...]
    severity: str
    """CRITICAL (why it failed) or WARNING (why it is slow)."""
