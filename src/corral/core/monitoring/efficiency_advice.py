"""What a job should ask for next time, from its efficiency report (local or Slurm): a pure reading
of the figures against its request, with the numbers behind each tip."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from corral.core.monitoring.samples import LOW_GPU_UTILIZATION
from corral.core.units.units import format_mb, format_peak_mb

LOW_MEMORY_EFFICIENCY = 0.25
"""Below this share of its memory request used, advice suggests a smaller --mem ..."""
MIN_MEMORY_ADVICE_MB = 2048
"""... for requests of at least this much (a few hundred MB too many cost nobody anything)."""
LOW_CPU_EFFICIENCY = 0.25
"""Below this share of its cores busy, advice suggests fewer CPUs ..."""
MIN_CPU_ADVICE = 4
"""... for jobs with at least this many."""
HEADROOM = 1.25
"""Suggested requests leave this factor over the peak seen."""
MIN_SUGGESTED_MB = 128
"""The least memory advice suggests: below it, a request saves nobody anything, and a headroom in
percent of a peak of a few MB means nothing."""


def advice(report: Mapping[str, Any], *, job_ref: str = "JOB") -> list[str]:
    """What to ask for next time, with the numbers behind it; [] when the request fit.

    Reads a local report or a Slurm one (which has no GPU keys).
    """
    tips: list[str] = []
    requested, peak, mem_eff = report.get("mem_requested_mb"), report.get("max_rss_mb"), report.get("mem_efficiency")
    if (requested and peak is not None and mem_eff is not None
            and requested >= MIN_MEMORY_ADVICE_MB and mem_eff < LOW_MEMORY_EFFICIENCY):
        tips.append(f"Memory: asked for {format_mb(requested)}, peaked at {format_peak_mb(peak)}: "
                    f"{_memory_request(peak)}.")
    cpus, cpu_eff = report.get("cpus") or 0, report.get("cpu_efficiency")
    if cpu_eff is not None and cpus >= MIN_CPU_ADVICE and cpu_eff < LOW_CPU_EFFICIENCY:
        busy = cpu_eff * cpus
        suggest = max(1, math.ceil(busy * HEADROOM))
        tips.append(f"CPU: {cpus} cores allocated, {busy:.1f} busy on average ({cpu_eff * 100:.0f}%): "
                    f"-c/--cpus-per-task {suggest} would do.")
    gpus = report.get("gpus") or 0
    util_mean, util_max = report.get("gpu_utilization_mean"), report.get("gpu_utilization_max")
    if gpus and util_max is not None and util_max <= 0 and not report.get("gpu_memory_peak_mb"):
        tips.append(f"GPU: the job never used its {_count(gpus, 'GPU')}: check CUDA_VISIBLE_DEVICES, "
                    "torch.cuda.is_available() and that the model and batches are moved with .to('cuda'); "
                    "or submit without --gpus.")
    elif gpus and util_mean is not None and util_mean < LOW_GPU_UTILIZATION:
        tips.append(f"GPU: utilization averaged {util_mean:.0f}% over its {_count(gpus, 'GPU')}: "
                    f"`corral diagnose {job_ref}` says what they wait for.")
    return tips


def _memory_request(peak_mb: float) -> str:
    """`--mem 4G would do (29% headroom)`: the peak and a quarter, rounded up to whole GB, or under a GB to
    MIN_SUGGESTED_MB's multiples (at the least of them, no headroom is worth stating)."""
    wanted = peak_mb * HEADROOM
    if wanted > 1024:
        suggest_mb, text = math.ceil(wanted / 1024) * 1024, f"{math.ceil(wanted / 1024)}G"
    else:
        suggest_mb = max(1, math.ceil(wanted / MIN_SUGGESTED_MB)) * MIN_SUGGESTED_MB
        text = "1G" if suggest_mb == 1024 else f"{suggest_mb}M"
    if suggest_mb == MIN_SUGGESTED_MB and wanted < MIN_SUGGESTED_MB:
        return f"--mem {text} would do (the least worth asking for)"
    return f"--mem {text} would do ({(suggest_mb - peak_mb) / peak_mb * 100:.0f}% headroom)"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
