"""How well a job used what it asked for (what `seff` reports), for local and Slurm jobs alike.

`local_efficiency` builds the report of a local job from its samples and its rusage;
`corral.backends.slurm.efficiency.efficiency` builds the same keys from sacct. `advice`
(`corral.core.monitoring.efficiency_advice`) and `format_efficiency` (`corral.cli.format_monitoring`) read
either, so `corral eff` looks the same on both backends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core.units.iso_times import epoch_seconds
from corral.core.monitoring.efficiency_advice import advice
from corral.core.monitoring.samples import SampleSummary
from corral.monitor.usage import job_usage


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
        # a container job's time bringing in its image, inside elapsed_s but not the program's
        "image_pull_s": rusage.get("image_pull_s"),
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


def _rounded(x: float | None) -> float | None:
    return round(x, 1) if x is not None else None

