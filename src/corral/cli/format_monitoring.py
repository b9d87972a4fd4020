"""What `corral diagnose` prints: a job's findings, for a terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corral.core.findings import Finding


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
