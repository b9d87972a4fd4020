"""How well a job used what it asked for (what `seff` reports), for local and Slurm jobs alike.

`local_efficiency` builds the report of a local job from its samples and its rusage;
`corral.backends.slurm.efficiency.efficiency` builds the same keys from sacct. `advice`
and `format_efficiency` read either, so `corral eff` looks the same on both backends.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from corral.core.iso_times import epoch_seconds
from corral.core.samples import LOW_GPU_UTILIZATION, SampleSummary
from corral.core.units import format_mb, format_peak_mb
from corral.monitor.usage import job_usage, source_words

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


def local_efficiency(
    job: Mapping[str, Any], summary: SampleSummary | None, rusage: Mapping[str, Any] | None, *,
    now: float | None = None, gpu_memory_total_mb: float | None = None,
) -> dict[str, Any]:
    """The efficiency report of a local job, with the keys of the Slurm one plus GPU figures and advice.

    Args:
        job: the job as the API shows it (`Job.to_dict`); times may be ISO text or epoch seconds.
        summary: its samples, summarized (None if it was never sampled).
        rusage: `cpu_time_s` and `max_rss_mb` its supervisor read from the kernel when it ended
            (exact even for a job shorter than one sampling interval): its cgroup's CPU time and peak
            memory (`memory_source` "cgroup"), else wait4's rusage; None while it runs.
        now: the time, for a job still running (its elapsed time so far).
        gpu_memory_total_mb: the memory of its GPUs together, when known. (Samples' `gpu_memory_mb`,
            and so `gpu_memory_peak_mb`, is its processes' GPU memory summed over its GPUs.)

    Returns:
        `state, elapsed_s, cpus, cpu_time_s, cpu_efficiency, max_rss_mb, mem_requested_mb,
        mem_efficiency, source` ("samples", "cgroup" or "rusage", or both joined by "+"; None with neither),
        `memory_source, cpu_source` (where `max_rss_mb` and `cpu_time_s` come from: `corral.monitor.usage`),
        `gpus, gpu_utilization_mean, gpu_utilization_max, gpu_memory_peak_mb,
        gpu_memory_requested_mb, gpu_memory_total_mb` and `advice`. Efficiencies are shares (0.5 = 50 %).
    """
    rusage = rusage or {}
    start = epoch_seconds(job.get("start_time"))
    end = epoch_seconds(job.get("end_time"))
    if end is None:
        end = now if now is not None else (summary.last_time if summary else None)
    elapsed = round(max(0.0, end - start), 3) if start is not None and end is not None else None
    cpus = int(job.get("cpus") or 0)

    # one reading of the figures, shared with diagnosis and the dashboard (see corral.monitor.usage)
    usage = job_usage(summary, rusage)
    cpu_time = usage.cpu_time_s
    if cpu_time is not None and elapsed and cpus:
        cpu_efficiency: float | None = round(cpu_time / (elapsed * cpus), 4)
    elif summary is not None and summary.cpu_utilization_mean is not None:
        cpu_efficiency = round(summary.cpu_utilization_mean / 100, 4)
    else:
        cpu_efficiency = None
    max_rss = usage.peak_rss_mb
    requested = job.get("mem_mb") or None  # 0 asks for no memory and sets no limit
    sources = [name for name, used in (
        ("samples", summary is not None),
        # the kernel's count: the job's cgroup (every process, however detached), else wait4's rusage
        ("cgroup" if rusage.get("memory_source") == "cgroup" else "rusage",
         rusage.get("cpu_time_s") is not None or rusage.get("max_rss_mb") is not None),
    ) if used]

    gpus = int(job.get("gpus") or 0)
    gpu_mem = job.get("gpu_mem_mb")
    report: dict[str, Any] = {
        "state": job.get("state"), "elapsed_s": elapsed, "cpus": cpus,
        "cpu_time_s": round(cpu_time, 1) if cpu_time is not None else None, "cpu_efficiency": cpu_efficiency,
        "max_rss_mb": max_rss, "mem_requested_mb": requested,
        "mem_efficiency": round(max_rss / requested, 4) if max_rss is not None and requested else None,
        "source": "+".join(sources) or None,
        "memory_source": usage.memory_source, "cpu_source": usage.cpu_source,
        "gpus": gpus,
        "gpu_utilization_mean": usage.gpu_utilization_mean,
        "gpu_utilization_max": usage.gpu_utilization_max,
        "gpu_memory_peak_mb": usage.gpu_memory_peak_mb,
        "gpu_memory_requested_mb": gpu_mem * gpus if gpu_mem and gpus else None,
        "gpu_memory_total_mb": gpu_memory_total_mb,
    }
    report["advice"] = advice(report, job_ref=str(job.get("ref") or job.get("id") or "JOB"))
    return report


def advice(report: Mapping[str, Any], *, job_ref: str = "JOB") -> list[str]:
    """What to ask for next time, with the numbers behind it; [] when the request fit.

    Reads a local report or a Slurm one (which has no GPU keys).
    """
    tips: list[str] = []
    requested, peak, mem_eff = report.get("mem_requested_mb"), report.get("max_rss_mb"), report.get("mem_efficiency")
    if (requested and peak is not None and mem_eff is not None
            and requested >= MIN_MEMORY_ADVICE_MB and mem_eff < LOW_MEMORY_EFFICIENCY):
        suggest_gb = max(1, math.ceil(peak * HEADROOM / 1024))
        headroom = (suggest_gb * 1024 - peak) / peak * 100 if peak else 100.0
        tips.append(f"Memory: asked for {format_mb(requested)}, peaked at {format_mb(peak)}: "
                    f"--mem {suggest_gb}G would do ({headroom:.0f}% headroom).")
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


def format_efficiency(job: Mapping[str, Any], report: Mapping[str, Any]) -> str:
    """A seff-like report, with GPU lines when the report has them and the advice last."""
    cpu, mem = report.get("cpu_efficiency"), report.get("mem_efficiency")
    elapsed, cpus = report.get("elapsed_s"), report.get("cpus") or 0
    backend_id = job.get("backend_id")
    lines = [
        f"Job ID: {job['id']} (Slurm {backend_id})" if backend_id else f"Job ID: {job['id']}",
        f"State: {report['state']}",
        f"Cores: {cpus}",
        f"CPU Utilized: {report['cpu_time_s']:.1f} s" if report.get("cpu_time_s") is not None else "CPU Utilized: -",
        f"CPU Efficiency: {cpu * 100:.2f}% of {_number(elapsed * cpus)} core-seconds"
        if cpu is not None and elapsed is not None else
        (f"CPU Efficiency: {cpu * 100:.2f}%" if cpu is not None else "CPU Efficiency: -"),
        f"Job Wall-clock time: {_number(elapsed)} s" if elapsed is not None else "Job Wall-clock time: -",
        f"Memory Utilized: {format_peak_mb(report['max_rss_mb'])}" + _from(report.get("memory_source"))
        if report.get("max_rss_mb") is not None else "Memory Utilized: -",
        f"Memory Efficiency: {mem * 100:.2f}% of {report['mem_requested_mb']:.0f} MB" if mem is not None
        else "Memory Efficiency: - (no memory was requested)" if not report.get("mem_requested_mb")
        else "Memory Efficiency: -",
    ]
    if report.get("gpus"):
        lines.append(f"GPUs: {report['gpus']}" + (f" ({job['gpu_type']})" if job.get("gpu_type") else ""))
        mean, top = report.get("gpu_utilization_mean"), report.get("gpu_utilization_max")
        lines.append(f"GPU Utilization: {mean:.1f}% mean, {top:.0f}% max" if mean is not None and top is not None
                     else "GPU Utilization: - (no GPU samples: no GPU driver reads its GPUs)"
                     if report.get("gpu_driver") is False else "GPU Utilization: - (no GPU samples)")
        peak = report.get("gpu_memory_peak_mb")
        of = [f"{report[key]:.0f} MB {label}" for key, label in (
            ("gpu_memory_requested_mb", "requested"), ("gpu_memory_total_mb", "on its GPUs"))
            if report.get(key)]
        lines.append(f"GPU Memory Utilized: {peak:.0f} MB" + (f" (of {', '.join(of)})" if of else "")
                     if peak is not None else "GPU Memory Utilized: -")
    tips = report["advice"] if "advice" in report else advice(report, job_ref=str(job.get("ref") or job["id"]))
    if tips:
        lines.append("Advice:")
        lines.extend(f"  - {tip}" for tip in tips)
    return "\n".join(lines)


def _from(source: str | None) -> str:
    """` (peak by the kernel's count ...)`: a Slurm report, which names no source, says nothing."""
    return f" (peak, from {source_words(source)})" if source else ""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _number(x: float) -> str:
    """Whole numbers without a fraction (Slurm's integer seconds print as before)."""
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _rounded(x: float | None) -> float | None:
    return round(x, 1) if x is not None else None

