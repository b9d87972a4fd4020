"""Why a job is (or was) sick: its state, samples, log and metrics read into findings a person can act on.

`diagnose` is a pure function of an `Evidence` snapshot (the caller gathers the job, its
samples, the tail of its logs and its runs' metrics, and passes the time): each finding
names a stable cause, quotes the numbers and log lines it rests on (`stderr:1843: ...`)
and says what to change. Findings about why a job failed ("critical") come before those
about why it is slow ("warning").
"""

from __future__ import annotations

import datetime as dt
import math
import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.core.units import format_duration
from corral.monitor.efficiency import (
    HEADROOM, LOW_CPU_EFFICIENCY, LOW_MEMORY_EFFICIENCY, MIN_CPU_ADVICE, MIN_MEMORY_ADVICE_MB, epoch_seconds, format_mb,
)
from corral.core.samples import LOW_GPU_UTILIZATION, SampleSummary
from corral.monitor.usage import JobUsage, job_usage, source_words

CRITICAL = "critical"
"""Why it failed (or will)."""
WARNING = "warning"
"""Why it is slow or wasteful."""

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
    "command_not_found", "cuda_oom", "host_oom", "nccl_timeout", "nan_loss", "python_error", "node_fail",
    "timeout_no_checkpoint", "hung", "exit_status", "timeout", "gpus_unused", "data_loading", "gpu_idle",
    "oversized_request",
)
"""Every cause diagnosis reports, most important first among findings of one severity (root causes
before their consequences)."""
# causes whose error the failure's final traceback line merely reports again
_LOG_ERROR_CAUSES = frozenset({"command_not_found", "cuda_oom", "host_oom", "nccl_timeout"})

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")  # torchrun's prefix on each rank's lines
_CUDA_OOM = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED")
_CORRAL_MEMORY_KILL = re.compile(r"corral: job exceeded its memory limit of (\d+) MB")
_HOST_OOM = re.compile(
    r"corral: job exceeded its memory limit|\boom[-_ ]kill|Out of memory: Kill(?:ed)? process"
    r"|out-of-memory handler|DataLoader worker \(pid[^)]*\) is killed by signal: Killed"
    r"|^\s*Killed\s*$|line \d+:\s+\d+ Killed\b", re.IGNORECASE)
_NCCL_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout|NCCL[^\n]{0,80}timed out", re.IGNORECASE)
_NAN_LOSS = re.compile(r"loss.{0,40}?(?<![\w.])[-+]?(?:nan|inf)(?![\w-])", re.IGNORECASE)
_NAN_ANOMALY = re.compile(r"returned nan values|Detected (?:NaN|inf)\b", re.IGNORECASE)
_NOT_FOUND_STRICT = re.compile(r"command not found|corral: cannot run|can't open file")
_NOT_FOUND = re.compile(
    r"command not found|corral: cannot run|can't open file|: not found\s*$|No such file or directory")
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):")
_EXCEPTION = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Failure))(?::\s*(.*))?$")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
_WRAPPERS = ("ChildFailedError",)  # torchrun's report that a rank failed; the rank's own error says why
_SIZE = r"([\d.]+) ([KMGT]i?B)"
_UNIT_MB = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2}


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


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a job, the evidence for it and what to do."""

    cause: str
    """A stable id, one of CAUSES: "data_loading", "gpu_idle", "nan_loss", "cuda_oom", "host_oom", ..."""
    title: str
    evidence: tuple[str, ...]
    """Numbers and log lines (with their `stream:line`) the finding rests on."""
    fixes: tuple[str, ...]
    severity: str
    """CRITICAL (why it failed) or WARNING (why it is slow)."""


@dataclass(frozen=True)
class _Line:
    stream: str
    number: int
    text: str
    """Without colour codes and without torchrun's `[rankN]:` prefix."""
    raw: str

    def cite(self) -> str:
        return f"{self.stream}:{self.number}: {_clip(self.raw.strip())}"


def diagnose(evidence: Evidence, *, hung_after_s: float = HUNG_AFTER_S) -> list[Finding]:
    """Everything found wrong with the job, most important first; [] when nothing is.

    Args:
        evidence: the job, its samples, log tail, metrics and the time.
        hung_after_s: how long a running job may go without output or a tracked step.
    """
    lines = _lines(evidence.log_lines)
    job = evidence.job
    found = [f for f in (
        _command_not_found(job, lines),
        _cuda_oom(job, lines, evidence.summary),
        _host_oom(job, lines, evidence.figures),
        _nccl_timeout(job, lines),
        _nan_loss(evidence.nonfinite, lines),
        _node_fail(job, evidence.checkpoints),
        _timeout(job, evidence.checkpoints),
        _hung(evidence, lines, hung_after_s),
    ) if f is not None]
    log_errors = {f.cause for f in found if f.cause in _LOG_ERROR_CAUSES}
    if not log_errors:
        error = _python_error(job, lines)
        if error is not None:
            found.append(error)
    if job.get("state") == "FAILED" and not any(f.severity == CRITICAL for f in found):
        found.append(_exit_status(job, lines))
    found.extend(_gpu_use(job, evidence.summary, crashed=bool(log_errors) or any(
        f.cause == "python_error" for f in found)))
    oversized = _oversized(job, evidence.figures, quiet=any(f.severity == CRITICAL for f in found))
    if oversized is not None:
        found.append(oversized)
    return sorted(found, key=lambda f: (f.severity != CRITICAL, CAUSES.index(f.cause)))


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


def unchecked(evidence: Evidence) -> list[str]:
    """What diagnosis could not look at for want of figures, and why: "no problem found" means no more than this allows."""
    job, summary, figures = evidence.job, evidence.summary, evidence.figures
    out = []
    gpus = job.get("gpus") or 0
    ran = job.get("start_time") is not None
    if gpus and ran:
        what = f"GPU use of its {_gpu_count(gpus)}"
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
                       f"{_span(summary.duration_s)}; GPU findings need {MIN_SAMPLES} or more samples across "
                       f"{_span(MIN_SAMPLED_S)} (the first minutes of a job are loading, not training).")
    if ran and figures.memory_source is None:
        out.append("Host memory use: no samples and no accounting of it.")
    if ran and figures.cpu_source is None:
        out.append("CPU use: no samples and no accounting of it.")
    if ran and not evidence.log_lines:
        out.append("Its log: nothing to read (empty, or not readable by the server).")
    return out


# -- log reading ----------------------------------------------------------------------------------


def _lines(log_lines: Iterable[tuple[str, int, str]]) -> list[_Line]:
    out = []
    for stream, number, text in log_lines:
        # a progress bar rewrites its line with \r: each version is a line of its own
        for piece in text.split("\r"):
            clean = _ANSI.sub("", piece).rstrip("\n")
            if clean.strip():
                out.append(_Line(stream, number, _RANK_PREFIX.sub("", clean), clean))
    return out


def _matching(lines: Sequence[_Line], pattern: re.Pattern[str]) -> list[_Line]:
    return [line for line in lines if pattern.search(line.text)]


def _cited(matches: Sequence[_Line], which: int = 0) -> list[str]:
    """The chosen matching line, cited, and how many more there were."""
    out = [matches[which].cite()]
    if len(matches) > 1:
        out.append(f"({len(matches) - 1} more line{'s' if len(matches) > 2 else ''} like it)")
    return out


def _clip(text: str) -> str:
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 3] + "..."


# -- the causes -----------------------------------------------------------------------------------


def _command_not_found(job: Mapping[str, Any], lines: Sequence[_Line]) -> Finding | None:
    exit_127 = job.get("exit_code") == 127
    if not exit_127 and job.get("state") != "FAILED":
        return None
    pattern = _NOT_FOUND if exit_127 else _NOT_FOUND_STRICT
    # FileNotFoundError and friends are the program's own errors, reported as python_error
    matches = [line for line in _matching(lines, pattern) if not _EXCEPTION.match(line.text.strip())]
    if not matches and not exit_127:
        return None
    evidence = _cited(matches) if matches else []
    if exit_127:
        evidence.insert(0, "exit code 127: the program could not be found or started")
    workdir = job.get("workdir")
    return Finding(
        cause="command_not_found", title="The program could not be found or started",
        evidence=tuple(evidence),
        fixes=(
            "Check the program's path: relative paths start from the job's working directory"
            + (f" ({workdir})" if workdir else "") + "; use an absolute path or -D/--chdir.",
            "Run programs from a virtual environment or module by their full path (.venv/bin/python), "
            "or activate the environment in the script before calling them.",
            "With --export=NONE the job gets a minimal PATH; --export=ALL (the default) passes yours.",
            "A script must be executable (chmod +x) and start with a #! line, or be run by its interpreter "
            "(python train.py).",
        ),
        severity=CRITICAL,
    )


def _cuda_oom(job: Mapping[str, Any], lines: Sequence[_Line], summary: SampleSummary | None) -> Finding | None:
    matches = _matching(lines, _CUDA_OOM)
    if not matches:
        return None
    # the line with PyTorch's numbers says the most; among those, the last is the one that ended it
    detailed = [i for i, line in enumerate(matches) if "Tried to allocate" in line.text]
    which = detailed[-1] if detailed else len(matches) - 1
    numbers = _cuda_oom_numbers(matches[which].text)
    tried, total, free = numbers["tried"], numbers["total"], numbers["free"]
    allocated, unallocated, gpu = numbers["allocated"], numbers["unallocated"], numbers["gpu"]
    evidence = _cited(matches, which)
    if tried is not None:
        parts = [f"{_gib(total)} total" if total is not None else "", f"{_gib(free)} free" if free is not None else ""]
        where = f" on GPU {gpu:.0f}" if gpu is not None else ""
        detail = ", ".join(p for p in parts if p)
        evidence.append(f"PyTorch tried to allocate {_gib(tried)}{where}" + (f" ({detail})" if detail else ""))
    fragmented = False
    if allocated is not None and unallocated is not None:
        evidence.append(f"PyTorch held {_gib(allocated)} allocated and {_gib(unallocated)} reserved but unallocated")
        # reserved-but-free memory the allocation could not use: the cache is fragmented
        fragmented = unallocated >= max(tried or 0.0, 0.1 * (total or 0.0))
    if summary is not None and summary.gpu_memory_peak_mb is not None:
        evidence.append(f"GPU memory in use peaked at {format_mb(summary.gpu_memory_peak_mb)} in the samples")
    expandable = ("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (--env) to fight fragmentation"
                  + (": here the reserved-but-unallocated memory could have held the allocation." if fragmented
                     else " when much memory is reserved but unallocated."))
    fixes = [
        "Halve the batch size and keep the effective batch with gradient accumulation "
        "(call optimizer.step() every 2 micro-batches).",
        "Train in bf16 mixed precision: with torch.autocast('cuda', dtype=torch.bfloat16).",
        "Recompute activations instead of keeping them: gradient checkpointing "
        "(torch.utils.checkpoint, or model.gradient_checkpointing_enable() in Hugging Face).",
        "Spread parameters, gradients and optimizer state over more GPUs with FSDP or DeepSpeed ZeRO "
        "(more --gpus), or ask for GPUs with more memory (--gpu-mem).",
    ]
    fixes.insert(0 if fragmented else len(fixes), expandable)
    return Finding(cause="cuda_oom", title="CUDA ran out of GPU memory", evidence=tuple(evidence),
                   fixes=tuple(fixes), severity=WARNING if job.get("state") == "COMPLETED" else CRITICAL)


def _cuda_oom_numbers(text: str) -> dict[str, float | None]:
    """GiB figures from PyTorch's message (the 2.x wording and the 1.x one); absent ones are None."""
    def size(*patterns: str) -> float | None:
        for pattern in patterns:
            match = re.search(pattern, text)
            if match:
                return float(match.group(1)) * _UNIT_MB[match.group(2)[0].upper()] / 1024
        return None

    gpu = re.search(r"\(?GPU (\d+)", text)
    allocated = size(rf"{_SIZE} is allocated by PyTorch", rf"{_SIZE} already allocated")
    unallocated = size(rf"{_SIZE} is reserved by PyTorch but unallocated")
    reserved = size(rf"{_SIZE} reserved in total by PyTorch")
    if unallocated is None and reserved is not None and allocated is not None:
        unallocated = max(0.0, reserved - allocated)
    return {
        "tried": size(rf"Tried to allocate {_SIZE}"),
        "total": size(rf"total capacity of {_SIZE}", rf"{_SIZE} total capacity"),
        "free": size(rf"of which {_SIZE} is free", rf"{_SIZE} free"),
        "allocated": allocated, "unallocated": unallocated,
        "gpu": float(gpu.group(1)) if gpu else None,
    }


def _host_oom(job: Mapping[str, Any], lines: Sequence[_Line], usage: JobUsage) -> Finding | None:
    matches = _matching(lines, _HOST_OOM)
    requested = job.get("mem_mb") or 0
    peak = usage.peak_rss_mb
    killed_by_9 = job.get("signal") == 9 or job.get("exit_code") == 137
    near_limit = killed_by_9 and requested and peak is not None and peak >= 0.9 * requested
    if job.get("state") != "OUT_OF_MEMORY" and not matches and not near_limit:
        return None
    evidence = []
    if job.get("state") == "OUT_OF_MEMORY":
        evidence.append("the job ended OUT_OF_MEMORY: killed for using more host memory than it asked for")
    if matches:
        evidence.extend(_cited(matches, len(matches) - 1))
    limits = [int(m.group(1)) for line in matches if (m := _CORRAL_MEMORY_KILL.search(line.text))]
    limit = limits[-1] if limits else requested
    if peak is not None:
        # the figure `corral eff` states, to the same decimal, with where it comes from
        evidence.append(f"its memory peaked at {peak:.1f} MB ({source_words(usage.memory_source)})"
                        + (f", against the {format_mb(limit)} requested" if limit else ""))
    if near_limit and peak is not None and job.get("state") != "OUT_OF_MEMORY":
        evidence.append(f"it was killed by signal 9 (SIGKILL) with its memory at {peak / requested * 100:.0f}% "
                        "of its request: the kernel's or Slurm's out-of-memory killer")
    # killed at the limit, so it needed more than the limit: half as much again
    suggest_gb = max(1, math.ceil(max(limit or 0, peak or 0) * 1.5 / 1024))
    return Finding(
        cause="host_oom", title="Killed for running out of host memory",
        evidence=tuple(evidence),
        fixes=(
            f"Ask for more host memory: --mem {suggest_gb}G"
            + (f" (the peak seen was {format_mb(peak)}; it was stopped there, so it needs more)" if peak else "")
            + ".",
            "Use fewer DataLoader workers or a smaller prefetch_factor: each worker holds its own copy of what "
            "the dataset keeps in Python objects.",
            "Memory-map the dataset instead of loading it whole (numpy.load(..., mmap_mode='r'), Arrow / "
            "Hugging Face datasets) and keep it in numpy arrays rather than lists of Python objects.",
        ),
        severity=WARNING if job.get("state") == "COMPLETED" else CRITICAL,
    )


def _nccl_timeout(job: Mapping[str, Any], lines: Sequence[_Line]) -> Finding | None:
    matches = _matching(lines, _NCCL_TIMEOUT)
    if not matches:
        return None
    evidence = _cited(matches)
    op = re.search(r"OpType=(\w+)", matches[0].text)
    timeout = re.search(r"Timeout\(ms\)=(\d+)", matches[0].text)
    if op and timeout:
        evidence.append(f"the {op.group(1)} collective waited {_span(int(timeout.group(1)) / 1000)} "
                        "for the other ranks")
    return Finding(
        cause="nccl_timeout", title="A collective (NCCL) operation timed out: a rank stopped or fell behind",
        evidence=tuple(evidence),
        fixes=(
            "Look for the rank that failed first: its traceback is earlier in the log, before the timeouts.",
            "Make every rank run the same collectives: no all_reduce or barrier inside a rank-dependent branch, "
            "and the same number of batches on each (DistributedSampler(..., drop_last=True)).",
            "Rerun with --env NCCL_DEBUG=INFO to see which rank and which connection stalled.",
            "If it hangs again, `py-spy dump --pid PID` on each rank shows where each one waits.",
        ),
        severity=WARNING if job.get("state") == "COMPLETED" else CRITICAL,
    )


def _nan_loss(nonfinite: Sequence[tuple[str, str, int]], lines: Sequence[_Line]) -> Finding | None:
    matches = [line for line in lines if _NAN_LOSS.search(line.text) or _NAN_ANOMALY.search(line.text)]
    if not nonfinite and not matches:
        return None
    evidence = [f"run {run!r}: {key} became NaN/inf at step {step}"
                for run, key, step in sorted(nonfinite, key=lambda item: item[2])[:3]]
    if len(nonfinite) > 3:
        evidence.append(f"({len(nonfinite) - 3} more metrics became NaN/inf)")
    if matches:
        evidence.extend(_cited(matches))  # the first: where it began
    return Finding(
        cause="nan_loss", title="The loss became NaN/inf: training diverged",
        evidence=tuple(evidence),
        fixes=(
            "Lower the learning rate (say by 10x) or lengthen its warm-up.",
            "Clip gradients before optimizer.step(): torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).",
            "Check the data for NaN/inf (torch.isfinite(batch).all()) and the loss for log(0) or division by zero.",
            "In fp16, train in bf16 instead (torch.autocast('cuda', dtype=torch.bfloat16)), or keep loss "
            "scaling with torch.amp.GradScaler.",
            "Find the first operation that produces it with torch.autograd.set_detect_anomaly(True) on a short run.",
        ),
        severity=CRITICAL,
    )


def _python_error(job: Mapping[str, Any], lines: Sequence[_Line]) -> Finding | None:
    if job.get("state") != "FAILED":
        return None
    candidates: list[tuple[int, re.Match[str]]] = []
    seen_traceback = False
    for i, line in enumerate(lines):
        if _TRACEBACK.match(line.text):
            seen_traceback = True
        elif seen_traceback and (exception := _EXCEPTION.match(line.text)):
            candidates.append((i, exception))
    if not candidates:
        return None
    own = [(i, m) for i, m in candidates if not m.group(1).endswith(_WRAPPERS)]
    at, exception = (own or candidates)[-1]
    line = lines[at]
    if _NAN_LOSS.search(line.text) or _NAN_ANOMALY.search(line.text):
        return None  # nan_loss says it, with better advice
    name, message = exception.groups()
    evidence = [line.cite()]
    for earlier in reversed(lines[:at]):
        frame = _FRAME.match(earlier.text) if earlier.stream == line.stream else None
        if frame is not None:
            path, number, function = frame.groups()
            evidence.append(f"raised in {function} at {path}:{number} ({earlier.stream}:{earlier.number})")
            break
    ref = job.get("ref") or job.get("id")
    return Finding(
        cause="python_error", title=f"The program failed with {name.rsplit('.', 1)[-1]}",
        evidence=tuple(evidence),
        fixes=(*_python_fixes(name, message or "", job), f"The whole traceback: corral logs {ref} --stderr"),
        severity=CRITICAL,
    )


def _python_fixes(name: str, message: str, job: Mapping[str, Any]) -> tuple[str, ...]:
    short = name.rsplit(".", 1)[-1]
    if short in ("ModuleNotFoundError", "ImportError"):
        module = re.search(r"No module named '([^']+)'", message)
        what = f"`{module.group(1).split('.')[0]}`" if module else "the missing package"
        return (f"Install {what} in the environment the job runs in, or activate that environment in the script "
                "(or run its python by full path, e.g. .venv/bin/python).",)
    if short in ("FileNotFoundError", "IsADirectoryError", "NotADirectoryError"):
        workdir = job.get("workdir")
        return ("Relative paths start from the job's working directory" + (f" ({workdir})" if workdir else "")
                + ": use absolute paths, or -D/--chdir.",)
    if "device-side assert" in message:
        return ("Rerun with --env CUDA_LAUNCH_BLOCKING=1 to see the operation that failed; it is often a "
                "label outside [0, num_classes) given to the loss, or an index out of range in an embedding.",)
    if "NCCL" in message or short == "DistBackendError":
        return ("Rerun with --env NCCL_DEBUG=INFO to see which rank and connection failed.",)
    return ("Reproduce it quickly: run the failing code on a small slice of the data, outside the job.",)


def _exit_status(job: Mapping[str, Any], lines: Sequence[_Line]) -> Finding:
    """A failure nothing more specific explains: what its exit status and its last error output say."""
    sig, code = job.get("signal"), job.get("exit_code")
    try:
        sig_name = signal.Signals(sig).name if sig else None
    except ValueError:
        sig_name = None
    what = (f"was killed by signal {sig}" + (f" ({sig_name})" if sig_name else "") if sig
            else f"exited with code {code}")
    evidence = [f"the job ended FAILED: its program {what}"]
    # stderr says why; a job whose stderr goes to its stdout file has only the one stream
    last = next((line for line in reversed(lines) if line.stream == "stderr"), lines[-1] if lines else None)
    if last is not None:
        evidence.append(f"its last {'error ' if last.stream == 'stderr' else ''}output: {last.cite()}")
    fixes = []
    if sig == signal.SIGKILL:
        fixes.append("Nothing in the job asked for SIGKILL: the kernel's out-of-memory killer on a full node, "
                     "or a person, stopped it; check the node's memory (corral nodes) and dmesg.")
    elif sig == signal.SIGSEGV or sig == signal.SIGBUS:
        fixes.append("A crash in native code: check that torch, CUDA and the driver match, and run with "
                     "python -X faulthandler to see where it happened.")
    ref = job.get("ref") or job.get("id")
    fixes.append(f"Read the end of its output: corral logs {ref} --stderr (and without --stderr).")
    return Finding(cause="exit_status", title=f"The program {what}", evidence=tuple(evidence), fixes=tuple(fixes),
                   severity=CRITICAL)


def _node_fail(job: Mapping[str, Any], checkpoints: int) -> Finding | None:
    if job.get("state") != "NODE_FAIL":
        return None
    return Finding(
        cause="node_fail", title="Its node or its supervisor died under it",
        evidence=("the job ended NODE_FAIL: it stopped without recording an outcome",
                  f"its runs have {checkpoints} checkpoint{'s' if checkpoints != 1 else ''}"),
        fixes=(("Resubmit it: it resumes from its latest checkpoint if the script loads run.latest_checkpoint()."
                if checkpoints else
                "Resubmit it, and save checkpoints (run.save_checkpoint when run.checkpoint_due()) so the next "
                "failure costs less."),
               "If it happens again, look at the node (corral nodes) and the server's log."),
        severity=CRITICAL,
    )


def _timeout(job: Mapping[str, Any], checkpoints: int) -> Finding | None:
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
            f"{_span(lead)} before it{of}; save in a handler for it.",)


def _hung(evidence: Evidence, lines: Sequence[_Line], hung_after_s: float) -> Finding | None:
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
        facts.append(f"no log output for {_span(evidence.now - max(evidence.log_mtime, start or 0))} "
                     f"(last written {_utc(evidence.log_mtime)})")
    elif not lines:
        facts.append(f"no log output at all in the {_span(quiet)} since it started")
    if evidence.last_steps:
        run, key, step, at = max(evidence.last_steps, key=lambda s: s[3])
        facts.append(f"no tracked step for {_span(evidence.now - at)}: the last was run {run!r} "
                     f"{key} step {step} at {_utc(at)}")
    summary = evidence.summary
    if summary is not None and summary.gpu_utilization_mean is not None and (job.get("gpus") or 0):
        facts.append(f"GPU utilization averaged {summary.gpu_utilization_mean:.0f}% over its "
                     f"{summary.count} samples"
                     + (": busy GPUs with no progress is how ranks stuck in a collective (NCCL) look"
                        if summary.gpu_utilization_mean >= 90 else ""))
    node, ref = job.get("node"), job.get("ref") or job.get("id")
    return Finding(
        cause="hung", title=f"No progress for {_span(quiet)}: the job looks hung",
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


def _gpu_use(job: Mapping[str, Any], summary: SampleSummary | None, *, crashed: bool) -> list[Finding]:
    """GPUs never used, starved by data loading, or idle: from samples that span enough of the job."""
    gpus = job.get("gpus") or 0
    if (not gpus or summary is None or summary.gpu_utilization_mean is None
            or summary.count < MIN_SAMPLES or summary.duration_s < MIN_SAMPLED_S):
        return []
    mean, over = summary.gpu_utilization_mean, f"over {summary.count} samples across {_span(summary.duration_s)}"
    if summary.gpu_utilization_max == 0 and not summary.gpu_memory_peak_mb:
        if crashed:
            return []  # it may have failed before it reached its GPUs
        return [Finding(
            cause="gpus_unused", title=f"The job never used its {_gpu_count(gpus)}",
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


def _oversized(job: Mapping[str, Any], usage: JobUsage, *, quiet: bool) -> Finding | None:
    """An ended job that asked for far more memory or cores than it used, as `corral eff` would advise;
    none for a job that failed for another reason (its figures stop where it broke)."""
    if quiet or job.get("state") not in ("COMPLETED", "TIMEOUT", "CANCELLED"):
        return None
    evidence, fixes = [], []
    requested, peak = job.get("mem_mb") or 0, usage.peak_rss_mb
    if requested >= MIN_MEMORY_ADVICE_MB and peak is not None and peak < LOW_MEMORY_EFFICIENCY * requested:
        suggest_gb = max(1, math.ceil(peak * HEADROOM / 1024))
        evidence.append(f"it asked for {format_mb(requested)} of host memory and peaked at {peak:.1f} MB "
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
                            f"({usage.cpu_time_s:.1f} CPU seconds over {_span(end - start)})")
            fixes.append(f"Ask for -c {max(1, math.ceil(busy * HEADROOM))} next time.")
    if not evidence:
        return None
    return Finding(cause="oversized_request", title="It asked for far more than it used",
                   evidence=tuple(evidence), fixes=tuple(fixes), severity=WARNING)


# -- small helpers --------------------------------------------------------------------------------


def _job_heading(job: Mapping[str, Any]) -> str:
    ref = job.get("ref") or job.get("id")
    name = f" ({job['name']})" if job.get("name") else ""
    state = job.get("state") or "?"
    if job.get("signal"):
        state += f", signal {job['signal']}"
    elif job.get("exit_code") not in (None, 0):
        state += f", exit code {job['exit_code']}"
    return f"Job {ref}{name}, {state}"


def _gpu_count(n: int) -> str:
    return "GPU" if n == 1 else f"{n} GPUs"


def _gib(gib: float) -> str:
    return f"{gib:.2f} GiB"


def _span(seconds: float) -> str:
    """`45 s`, `47 min`, `2 h 05 min`: a stretch of time a person reads at a glance."""
    seconds = max(0, round(seconds))
    if seconds < 90:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _utc(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
