"""Causes read in what a job used: GPUs never used, starved by data loading or idle, and requests
far larger than the use."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from corral.core.monitoring.efficiency_advice import (
    HEADROOM, LOW_CPU_EFFICIENCY, LOW_MEMORY_EFFICIENCY, MIN_CPU_ADVICE, MIN_MEMORY_ADVICE_MB,
)
from corral.core.monitoring.findings import WARNING, Finding
from corral.core.units.iso_times import epoch_seconds
from corral.core.monitoring.samples import LOW_GPU_UTILIZATION, SampleSummary
from corral.core.units.units import format_mb, format_peak_mb
from corral.core.monitoring.usage_sources import source_words
from corral.monitor.diagnosis.findings import MIN_SAMPLED_S, MIN_SAMPLES, SATURATED_CPU, gpu_count, span
from corral.monitor.usage import JobUsage


def gpu_use(job: Mapping[str, Any], summary: SampleSummary | None, *, crashed: bool) -> list[Finding]:
    """GPUs never used, starved by data loading, or idle: from samples that span enough of the job."""
    gpus = job.get("gpus") or 0
    if (not gpus or summary is None or summary.gpu_utilization_mean is None
            or summary.count < MIN_SAMPLES or summary.duration_s < MIN_SAMPLED_S):
        return []
    mean, over = summary.gpu_utilization_mean, f"over {summary.count} samples across {span(summary.duration_s)}"
    if summary.gpu_utilization_max == 0 and not summary.gpu_memory_peak_mb:
        if crashed:
            return []  # it may have failed before it reached its GPUs
        return [Finding(
            cause="gpus_unused", title=f"The job never used its {gpu_count(gpus)}",
            evidence=(f"{gpus} GPU{'s' if gpus != 1 else ''} allocated; {over} their utilization never rose above 0% "
                      "and no GPU memory was in use",),
            fixes=(
                "Check that the program sees them: print(torch.cuda.is_available(), "
                "os.environ.get('CUDA_VISIBLE_DEVICES')) at start; a CPU-only torch build has "
                "torch.version.cuda None.",
                "Move the model and every batch to the GPU: model.to('cuda'), x = x.to('cuda').",
                "If it needs no GPU, submit it without --gpus and leave them to others.",
            ),
            severity=WARNING,
        )]
    if mean >= LOW_GPU_UTILIZATION:
        return []
    low = f" (below {LOW_GPU_UTILIZATION:.0f}% in {summary.low_gpu_fraction * 100:.0f}% of them)" \
        if summary.low_gpu_fraction is not None else ""
    cpu = summary.cpu_utilization_mean
    cpus = job.get("cpus") or 0
    cores = f"{cpus} core{'s' if cpus != 1 else ''}" if cpus else "its cores"
    if cpu is not None and cpu >= SATURATED_CPU:
        workers = max(cpus - 1, 1)
        return [Finding(
            cause="data_loading", title="Data loading starves the GPUs",
            evidence=(f"GPU utilization averaged {mean:.0f}% {over}{low} while CPU ran at {cpu:.0f}% of {cores}",),
            fixes=(
                f"Load batches in parallel: DataLoader(..., num_workers={workers}, pin_memory=True, "
                "persistent_workers=True); about one worker per CPU, leaving one for the training loop.",
                f"Ask for more CPUs so the workers have cores to run on: -c {max(cpus * 2, 4)} "
                "(--cpus-per-task).",
                "Read from fast local storage (copy the dataset to node-local disk or $TMPDIR first) and "
                "decode, resize or tokenize offline once rather than in every epoch.",
            ),
            severity=WARNING,
        )]
    cpu_text = f" while CPU ran at only {cpu:.0f}% of {cores}" if cpu is not None else ""
    peak = summary.gpu_memory_peak_mb
    return [Finding(
        cause="gpu_idle", title="The GPUs sit idle, waiting on something other than the CPUs",
        evidence=(f"GPU utilization averaged {mean:.0f}% {over}{low}{cpu_text}",)
        + ((f"GPU memory peaked at {format_mb(peak)}",) if peak else ()),
        fixes=(
            "Profile a few steps (torch.profiler) to see what the GPU waits for.",
            "I/O: read from local storage and let the DataLoader prefetch (num_workers > 0, prefetch_factor).",
            "Synchronisation: avoid loss.item(), .cpu() or printing on every step; log every N steps.",
            "Small batches leave the GPU idle between kernels: raise the batch size while GPU memory allows.",
        ),
        severity=WARNING,
    )]


def oversized_request(job: Mapping[str, Any], usage: JobUsage, *, quiet: bool) -> Finding | None:
    """An ended job that asked for far more memory or cores than it used, as `corral eff` would advise;
    none for a job that failed for another reason (its figures stop where it broke)."""
    if quiet or job.get("state") not in ("COMPLETED", "TIMEOUT", "CANCELLED"):
        return None
    evidence, fixes = [], []
    requested, peak = job.get("mem_mb") or 0, usage.peak_rss_mb
    if requested >= MIN_MEMORY_ADVICE_MB and peak is not None and peak < LOW_MEMORY_EFFICIENCY * requested:
        suggest_gb = max(1, math.ceil(peak * HEADROOM / 1024))
        evidence.append(f"it asked for {format_mb(requested)} of host memory and peaked at {format_peak_mb(peak)} "
                        f"({peak / requested * 100:.0f}%, from {source_words(usage.memory_source)})")
        fixes.append(f"Ask for --mem {suggest_gb}G next time: memory held and unused keeps other jobs waiting.")
    cpus = job.get("cpus") or 0
    start, end = epoch_seconds(job.get("start_time")), epoch_seconds(job.get("end_time"))
    # only the accounting at the end covers the whole run: the samples' CPU time stops at the last one
    counted = usage.cpu_source is not None and usage.cpu_source != "samples"
    if (cpus >= MIN_CPU_ADVICE and counted and usage.cpu_time_s is not None
            and start is not None and end is not None and end > start):
        busy = usage.cpu_time_s / (end - start)
        if busy < LOW_CPU_EFFICIENCY * cpus:
            evidence.append(f"it held {cpus} cores and kept {busy:.1f} busy on average "
                            f"({usage.cpu_time_s:.1f} CPU seconds over {span(end - start)})")
            fixes.append(f"Ask for -c {max(1, math.ceil(busy * HEADROOM))} next time.")
    if not evidence:
        return None
    return Finding(cause="oversized_request", title="It asked for far more than it used",
                   evidence=tuple(evidence), fixes=tuple(fixes), severity=WARNING)
