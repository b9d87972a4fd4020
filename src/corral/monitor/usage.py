"""A job's usage figures, decided once: what `corral eff`, `corral diagnose` and the dashboard all quote.

Two sources count what a job used. Its samples, taken every few seconds while it runs, see the
processes of that moment; a job that allocates between two samples, or is killed for it, leaves
its peak unseen. Its supervisor's reading when the job ended is the kernel's own count: its
cgroup's peak memory and CPU time (every process, however detached), else wait4's rusage of the
processes it waited for. `job_usage` takes the accounting at the end over the samples where it
has it, and the samples while the job runs; each figure says where it came from, and every view
states the same number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from corral.core.monitoring.samples import SampleSummary
from corral.core.monitoring.usage_sources import CGROUP, RUSAGE, SAMPLES


@dataclass(frozen=True)
class JobUsage:
    """What a job used, each figure with its source (one of the keys of `corral.core.monitoring.usage_sources.SOURCE_WORDS`; None without one)."""

    peak_rss_mb: float | None
    memory_source: str | None
    cpu_time_s: float | None
    cpu_source: str | None
    gpu_utilization_mean: float | None
    gpu_utilization_max: float | None
    gpu_memory_peak_mb: float | None
    gpu_source: str | None
    """"samples" when there were GPU samples: no accounting counts GPU use."""
    samples: int
    """How many samples the figures drew on."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def job_usage(summary: SampleSummary | None, final: Mapping[str, Any] | None) -> JobUsage:
    """The job's figures from its samples and, once it ended, its supervisor's accounting.

    Args:
        summary: its samples, summarized; None if it was never sampled.
        final: `cpu_time_s`, `max_rss_mb` and `memory_source` ("cgroup" when the cgroup counted them)
            from the supervisor's result when the job ended; None while it runs.
    """
    final = final or {}
    sampled_rss = summary.rss_peak_mb if summary else None
    sampled_cpu = summary.cpu_time_s if summary else None
    counted_rss, counted_cpu = final.get("max_rss_mb"), final.get("cpu_time_s")
    cgroup = final.get("memory_source") == CGROUP

    if counted_rss is not None and cgroup:
        # every process's pages counted once, at the moment of the peak: never below a sample but
        # below the samples' sum when forked workers share pages, which the samples count again each
        peak, memory_source = float(counted_rss), CGROUP
    elif counted_rss is not None:
        # wait4 reports the largest single process, not their sum: the samples may have seen more
        peak, memory_source = _larger(counted_rss, sampled_rss, RUSAGE)
    elif sampled_rss is not None:
        peak, memory_source = float(sampled_rss), SAMPLES
    else:
        peak, memory_source = None, None

    if counted_cpu is not None and cgroup:
        cpu, cpu_source = float(counted_cpu), CGROUP
    elif counted_cpu is not None:
        # a job killed by a signal never waits for its children, whose time only the samples saw
        cpu, cpu_source = _larger(counted_cpu, sampled_cpu, RUSAGE)
    elif sampled_cpu is not None:
        cpu, cpu_source = float(sampled_cpu), SAMPLES
    else:
        cpu, cpu_source = None, None

    gpu_sampled = summary is not None and (summary.gpu_utilization_mean is not None
                                           or summary.gpu_memory_peak_mb is not None)
    return JobUsage(
        peak_rss_mb=_rounded(peak), memory_source=memory_source,
        cpu_time_s=_rounded(cpu), cpu_source=cpu_source,
        gpu_utilization_mean=_rounded(summary.gpu_utilization_mean) if summary else None,
        gpu_utilization_max=_rounded(summary.gpu_utilization_max) if summary else None,
        gpu_memory_peak_mb=_rounded(summary.gpu_memory_peak_mb) if summary else None,
        gpu_source=SAMPLES if gpu_sampled else None,
        samples=summary.count if summary else 0,
    )


def _larger(counted: float, sampled: float | None, counted_source: str) -> tuple[float, str]:
    if sampled is not None and sampled > counted:
        return float(sampled), f"{counted_source}+{SAMPLES}"
    return float(counted), counted_source


def _rounded(x: float | None) -> float | None:
    return round(x, 1) if x is not None else None
