"""What `corral eff` and `corral diagnose` print: a job's efficiency report and its findings, for a terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corral.core.monitoring.efficiency_advice import advice
from corral.core.monitoring.findings import Finding
from corral.core.units.units import format_peak_mb
from corral.core.monitoring.usage_sources import source_words


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
        (f"Job Wall-clock time: {_number(elapsed)} s" + (f" (of which {_number(pull)} s bringing in its image)"
                                                         if (pull := report.get("image_pull_s")) else ""))
        if elapsed is not None else "Job Wall-clock time: -",
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


def format_diagnosis(job: Mapping[str, Any], findings: Sequence[Finding], unchecked: Sequence[str] = ()) -> str:
    """The findings for a terminal, then what could not be checked; says what was checked when nothing was found.

    Args:
        unchecked: what diagnosis could not look at and why (`unchecked`), one line each.
    """
    head = _job_heading(job)
    not_checked = ["", "Not checked:", *(f"  - {item}" for item in unchecked)] if unchecked else []
    if not findings:
        return "\n".join([
            f"{head}: no problem found.",
            "Checked: the job's state and exit status; its log tail for CUDA and host out-of-memory errors, "
            "NaN/inf losses, tracebacks, missing programs and NCCL timeouts; NaN/inf in its tracked metrics; "
            "its CPU, memory and GPU use against its request, where there are figures for them; its time limit "
            "and checkpoints; and, while it runs, whether it still makes progress.",
            *not_checked])
    count = f"{len(findings)} problem{'s' if len(findings) > 1 else ''} found"
    out = [f"{head}: {count}."]
    for n, finding in enumerate(findings, 1):
        out.append("")
        out.append(f"{n}. [{finding.severity}] {finding.title}  ({finding.cause})")
        if finding.evidence:
            out.append("   Evidence:")
            out.extend(f"     - {item}" for item in finding.evidence)
        if finding.fixes:
            out.append("   Fix:")
            out.extend(f"     - {item}" for item in finding.fixes)
    return "\n".join(out + not_checked)


def _job_heading(job: Mapping[str, Any]) -> str:
    ref = job.get("ref") or job.get("id")
    name = f" ({job['name']})" if job.get("name") else ""
    state = job.get("state") or "?"
    if job.get("signal"):
        state += f", signal {job['signal']}"
    elif job.get("exit_code") not in (None, 0):
        state += f", exit code {job['exit_code']}"
    return f"Job {ref}{name}, {state}"


def _from(source: str | None) -> str:
    """` (peak by the kernel's count ...)`: a Slurm report, which names no source, says nothing."""
    return f" (peak, from {source_words(source)})" if source else ""


def _number(x: float) -> str:
    """Whole numbers without a fraction (Slurm's integer seconds print as before)."""
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"
