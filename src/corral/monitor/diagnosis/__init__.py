"""Why a job is (or was) sick: its state, samples, log and metrics read into findings a person can act on.

`diagnose` is a pure function of an `Evidence` snapshot (the caller gathers the job, its
samples, the tail of its logs and its runs' metrics, and passes the time): each finding
names a stable cause, quotes the numbers and log lines it rests on (`stderr:1843: ...`)
and says what to change. Findings about why a job failed ("critical") come before those
about why it is slow ("warning").

Here: `diagnose` and `unchecked`; what they read and report (`findings`), the log as they read it
(`log_lines`), and the causes by what they are read in: the log (`log_causes`), how the job ended
or stalls (`job_causes`), what it used (`usage_causes`), its container (`container_causes`).
"""

from __future__ import annotations

from corral.core.monitoring.findings import CRITICAL, WARNING, Finding
from corral.monitor.diagnosis.findings import (
    CAUSES, HUNG_AFTER_S, LOG_ERROR_CAUSES, MIN_SAMPLED_S, MIN_SAMPLES, Evidence, gpu_count, span,
)
from corral.monitor.diagnosis.container_causes import image_unavailable, mount_refused
from corral.monitor.diagnosis.sharing_causes import over_gpu_budget
from corral.monitor.diagnosis.job_causes import hung, node_fail, time_limit, warning_lead_s
from corral.monitor.diagnosis.log_causes import (
    command_not_found, cuda_oom, exit_status, host_oom, nan_loss, nccl_timeout, python_error,
)
from corral.monitor.diagnosis.log_lines import read_lines
from corral.monitor.diagnosis.usage_causes import gpu_use, oversized_request

__all__ = ["CAUSES", "CRITICAL", "WARNING", "Evidence", "Finding", "diagnose", "unchecked", "warning_lead_s"]


def diagnose(evidence: Evidence, *, hung_after_s: float = HUNG_AFTER_S) -> list[Finding]:
    """Everything found wrong with the job, most important first; [] when nothing is.

    Args:
        evidence: the job, its samples, log tail, metrics and the time.
        hung_after_s: how long a running job may go without output or a tracked step.
    """
    lines = read_lines(evidence.log_lines)
    job = evidence.job
    found = [f for f in (
        image_unavailable(job, lines),
        mount_refused(job),
        command_not_found(job, lines),
        cuda_oom(job, lines, evidence.summary),
        host_oom(job, lines, evidence.figures),
        over_gpu_budget(job),
        nccl_timeout(job, lines),
        nan_loss(evidence.nonfinite, lines),
        node_fail(job, evidence.checkpoints),
        time_limit(job, evidence.checkpoints),
        hung(evidence, lines, hung_after_s),
    ) if f is not None]
    log_errors = {f.cause for f in found if f.cause in LOG_ERROR_CAUSES}
    if not log_errors:
        error = python_error(job, lines)
        if error is not None:
            found.append(error)
    if job.get("state") == "FAILED" and not any(f.severity == CRITICAL for f in found):
        found.append(exit_status(job, lines))
    found.extend(gpu_use(job, evidence.summary, crashed=bool(log_errors) or any(
        f.cause == "python_error" for f in found)))
    oversized = oversized_request(job, evidence.figures, quiet=any(f.severity == CRITICAL for f in found))
    if oversized is not None:
        found.append(oversized)
    return sorted(found, key=lambda f: (f.severity != CRITICAL, CAUSES.index(f.cause)))


def unchecked(evidence: Evidence) -> list[str]:
    """What diagnosis could not look at for want of figures, and why: "no problem found" means no more than this allows."""
    job, summary, figures = evidence.job, evidence.summary, evidence.figures
    out = []
    gpus = job.get("gpus") or 0
    ran = job.get("start_time") is not None
    if gpus and ran:
        what = f"GPU use of its {gpu_count(gpus)}"
        if figures.gpu_source is None:
            if evidence.gpu_driver is False:
                why = "no GPU driver (NVML) answers where it ran, so no sample has GPU figures"
            elif summary is None:
                why = "it has no samples (it ended before the first one)"
            else:
                why = f"none of its {summary.count} sample{'s' if summary.count != 1 else ''} has GPU figures"
            out.append(f"{what}: {why}.")
        elif summary is not None and (summary.count < MIN_SAMPLES or summary.duration_s < MIN_SAMPLED_S):
            out.append(f"{what}: its {summary.count} sample{'s' if summary.count != 1 else ''} span "
                       f"{span(summary.duration_s)}; GPU findings need {MIN_SAMPLES} or more samples across "
                       f"{span(MIN_SAMPLED_S)} (the first minutes of a job are loading, not training).")
    if ran and figures.memory_source is None:
        out.append("Host memory use: no samples and no accounting of it.")
    if ran and figures.cpu_source is None:
        out.append("CPU use: no samples and no accounting of it.")
    if ran and not evidence.log_lines:
        out.append("Its log: nothing to read (empty, or not readable by the server).")
    return out
