"""What diagnosis reads (`Evidence`), its thresholds and causes, and the words its findings share
(time spans, GPU counts, GiB). What it reports, `Finding` and its severities, is core's (`corral.core.monitoring.findings`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.core.monitoring.samples import SampleSummary
from corral.monitor.usage import JobUsage, job_usage

HUNG_AFTER_S = 1800.0
"""A running job with no log output and no tracked step for this long is reported as hung."""
MIN_SAMPLED_S = 300.0
"""GPU findings need samples spanning this long: the first minutes of a job are loading, not training."""
MIN_SAMPLES = 3
SATURATED_CPU = 75.0
"""CPU utilization (% of the allocated cores) at which the CPUs, not the GPUs, set the pace."""
QUOTE_CHARS = 300
WARNING_LEAD_S = 120
"""The warning before the time limit diagnosis suggests (`--signal USR1@120`) when the limit allows it ..."""
MIN_WARNING_LEAD_S = 2
"""... a tenth of the limit when that is shorter, and none below this (a job too short to checkpoint)."""

CAUSES = (
    "image_unavailable", "container_path_refused", "command_not_found", "cuda_oom", "host_oom", "gpu_over_budget", "nccl_timeout", "nan_loss", "python_error", "node_fail",
    "timeout_no_checkpoint", "hung", "exit_status", "timeout", "gpus_unused", "data_loading", "gpu_idle",
    "oversized_request",
)
"""Every cause diagnosis reports, most important first among findings of one severity (root causes
before their consequences)."""
LOG_ERROR_CAUSES = frozenset({"command_not_found", "cuda_oom", "host_oom", "nccl_timeout"})
"""Causes whose error the failure's final traceback line merely reports again."""


@dataclass(frozen=True)
class Evidence:
    """What diagnosis reads about one job; the caller gathers it, diagnosis does no I/O."""

    job: Mapping[str, Any]
    """The job as the API shows it (`Job.to_dict`); times may be ISO text or epoch seconds."""
    summary: SampleSummary | None
    log_lines: Sequence[tuple[str, int, str]]
    """(stream "stdout"/"stderr", 1-based line number, text): the last few hundred lines of each."""
    nonfinite: Sequence[tuple[str, str, int]]
    """(run name, metric key, first step where it was NaN or inf)."""
    checkpoints: int
    """Checkpoints its runs registered or that were found in its checkpoint directory."""
    last_steps: Sequence[tuple[str, str, int, float]] = ()
    """(run name, metric key, last step, epoch time it was logged) of its tracked metrics."""
    now: float = 0.0
    """The time, epoch seconds; 0 leaves out what needs it (hung)."""
    log_mtime: float | None = None
    """When its log files were last written, if the caller knows."""
    usage: JobUsage | None = None
    """Its figures as `corral eff` states them (`corral.monitor.usage`); None: read from `summary` alone."""
    gpu_driver: bool | None = None
    """Whether the sampler reads GPUs where the job runs (False: no GPU driver; None: not known)."""

    @property
    def figures(self) -> JobUsage:
        return self.usage if self.usage is not None else job_usage(self.summary, None)


def gpu_count(n: int) -> str:
    return "GPU" if n == 1 else f"{n} GPUs"


def gib(gib: float) -> str:
    return f"{gib:.2f} GiB"


def span(seconds: float) -> str:
    """`45 s`, `47 min`, `2 h 05 min`: a stretch of time a person reads at a glance."""
    seconds = max(0, round(seconds))
    if seconds < 90:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def utc_text(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
