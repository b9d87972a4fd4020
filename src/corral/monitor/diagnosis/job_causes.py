"""Causes read in how a job ended or stalls: its node failed, it reached its time limit (with or
without checkpoints), or it runs without progress."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corral.core.monitoring.findings import CRITICAL, WARNING, Finding
from corral.core.units.iso_times import epoch_seconds
from corral.core.units.units import format_duration
from corral.monitor.diagnosis.findings import MIN_WARNING_LEAD_S, WARNING_LEAD_S, Evidence, span, utc_text
from corral.monitor.diagnosis.log_lines import LogLine


def node_fail(job: Mapping[str, Any], checkpoints: int) -> Finding | None:
    if job.get("state") != "NODE_FAIL":
        return None
    reason = job.get("reason")
    gpu_failed = isinstance(reason, str) and reason.startswith("GPU ")  # `GPU 1 of node7 failed: XID 79: ...`
    return Finding(
        cause="node_fail", title="Its GPU failed under it" if gpu_failed else "Its node or its supervisor died under it",
        evidence=(f"the job ended NODE_FAIL: {reason} (the GPU is drained until an admin resumes it)" if gpu_failed
                  else "the job ended NODE_FAIL: it stopped without recording an outcome",
                  f"its runs have {checkpoints} checkpoint{'s' if checkpoints != 1 else ''}"),
        fixes=(("Resubmit it: it resumes from its latest checkpoint if the script loads run.latest_checkpoint()."
                if checkpoints else
                "Resubmit it, and save checkpoints (run.save_checkpoint when run.checkpoint_due()) so the next "
                "failure costs less."),
               "If it happens again, look at the node (corral nodes) and the server's log."),
        severity=CRITICAL,
    )


def time_limit(job: Mapping[str, Any], checkpoints: int) -> Finding | None:
    if job.get("state") != "TIMEOUT":
        return None
    limit = job.get("time_limit_s")
    start, end = epoch_seconds(job.get("start_time")), epoch_seconds(job.get("end_time"))
    evidence = []
    if limit:
        ran = f"ran {format_duration(end - start)} of " if start is not None and end is not None else "reached "
        evidence.append(f"the job {ran}its {format_duration(limit)} time limit")
    more_time = f"--time {format_duration(limit * 2)}" if limit else "a longer --time"
    if checkpoints:
        evidence.append(f"its runs saved {checkpoints} checkpoint{'s' if checkpoints != 1 else ''}")
        return Finding(
            cause="timeout", title="Reached its time limit; its checkpoints let a resubmission resume",
            evidence=tuple(evidence),
            fixes=("Resubmit it: it resumes from its latest checkpoint if the script loads run.latest_checkpoint().",
                   f"Ask for more time to finish in one go: {more_time}."),
            severity=WARNING,
        )
    evidence.append("no checkpoint was saved: everything it computed is lost")
    return Finding(
        cause="timeout_no_checkpoint", title="Reached its time limit without saving a checkpoint",
        evidence=tuple(evidence),
        fixes=(
            "Save checkpoints: run = corral.init(...); if run.checkpoint_due(): run.save_checkpoint(state, step); "
            "and at start, resume from run.latest_checkpoint().",
            f"Ask for more time: {more_time}.",
            *_signal_fix(limit),
        ),
        severity=CRITICAL,
    )


def warning_lead_s(limit_s: float | None) -> int | None:
    """How long before its time limit a job should be warned (`--signal USR1@N`), from its own limit:
    a tenth of it, at most WARNING_LEAD_S; None when that leaves too little to save anything in."""
    if not limit_s:
        return WARNING_LEAD_S
    lead = min(WARNING_LEAD_S, int(limit_s // 10))
    return lead if lead >= MIN_WARNING_LEAD_S else None


def _signal_fix(limit_s: float | None) -> tuple[str, ...]:
    lead = warning_lead_s(limit_s)
    if lead is None:
        return ()
    of = f" (a tenth of its {format_duration(limit_s)} limit)" if limit_s and lead < WARNING_LEAD_S else ""
    return (f"Get a warning before the limit and checkpoint then: --signal USR1@{lead} sends SIGUSR1 "
            f"{span(lead)} before it{of}; save in a handler for it.",)


def hung(evidence: Evidence, lines: Sequence[LogLine], hung_after_s: float) -> Finding | None:
    job = evidence.job
    if job.get("state") != "RUNNING" or not evidence.now:
        return None
    start = epoch_seconds(job.get("start_time"))
    known = [t for t in (evidence.log_mtime, *(step[3] for step in evidence.last_steps)) if t is not None]
    if not known and lines:
        return None  # it printed something, and nothing says when
    moments = [t for t in (start, *known) if t is not None]
    if not moments:
        return None
    last = max(moments)
    quiet = evidence.now - last
    if quiet < hung_after_s:
        return None
    facts = []
    if evidence.log_mtime is not None:
        facts.append(f"no log output for {span(evidence.now - max(evidence.log_mtime, start or 0))} "
                     f"(last written {utc_text(evidence.log_mtime)})")
    elif not lines:
        facts.append(f"no log output at all in the {span(quiet)} since it started")
    if evidence.last_steps:
        run, key, step, at = max(evidence.last_steps, key=lambda s: s[3])
        facts.append(f"no tracked step for {span(evidence.now - at)}: the last was run {run!r} "
                     f"{key} step {step} at {utc_text(at)}")
    summary = evidence.summary
    if summary is not None and summary.gpu_utilization_mean is not None and (job.get("gpus") or 0):
        facts.append(f"GPU utilization averaged {summary.gpu_utilization_mean:.0f}% over its "
                     f"{summary.count} samples"
                     + (": busy GPUs with no progress is how ranks stuck in a collective (NCCL) look"
                        if summary.gpu_utilization_mean >= 90 else ""))
    node, ref = job.get("node"), job.get("ref") or job.get("id")
    return Finding(
        cause="hung", title=f"No progress for {span(quiet)}: the job looks hung",
        evidence=tuple(facts),
        fixes=(
            "See where it is stuck: py-spy dump --pid PID" + (f" on {node}" if node else "")
            + " for each of its processes (--native for C++/CUDA frames).",
            "For a multi-GPU job, rerun with --env NCCL_DEBUG=INFO and give collectives a timeout "
            "(init_process_group(..., timeout=datetime.timedelta(minutes=10))) so a stuck rank fails "
            "instead of hanging.",
            "faulthandler.dump_traceback_later(1800, repeat=True) at start prints every thread's stack "
            "whenever it stalls that long again.",
            f"If it is stuck, corral cancel {ref} frees its GPUs.",
        ),
        severity=CRITICAL,
    )
