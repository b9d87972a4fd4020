"""Causes read in a job's log: a program that could not start, CUDA and host out-of-memory, NCCL
timeouts, NaN/inf losses, Python tracebacks, and what the exit status says when nothing else does."""

from __future__ import annotations

import math
import re
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from corral.core.monitoring.findings import CRITICAL, WARNING, Finding
from corral.core.monitoring.samples import SampleSummary
from corral.core.units.units import format_mb, format_peak_mb
from corral.core.monitoring.usage_sources import source_words
from corral.monitor.diagnosis.findings import gib, span
from corral.monitor.diagnosis.log_lines import LogLine, cited, matching
from corral.monitor.usage import JobUsage

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


def command_not_found(job: Mapping[str, Any], lines: Sequence[LogLine]) -> Finding | None:
    exit_127 = job.get("exit_code") == 127
    if not exit_127 and job.get("state") != "FAILED":
        return None
    pattern = _NOT_FOUND if exit_127 else _NOT_FOUND_STRICT
    # FileNotFoundError and friends are the program's own errors, reported as python_error
    matches = [line for line in matching(lines, pattern) if not _EXCEPTION.match(line.text.strip())]
    if not matches and not exit_127:
        return None
    evidence = cited(matches) if matches else []
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


def cuda_oom(job: Mapping[str, Any], lines: Sequence[LogLine], summary: SampleSummary | None) -> Finding | None:
    matches = matching(lines, _CUDA_OOM)
    if not matches:
        return None
    # the line with PyTorch's numbers says the most; among those, the last is the one that ended it
    detailed = [i for i, line in enumerate(matches) if "Tried to allocate" in line.text]
    which = detailed[-1] if detailed else len(matches) - 1
    numbers = _cuda_oom_numbers(matches[which].text)
    tried, total, free = numbers["tried"], numbers["total"], numbers["free"]
    allocated, unallocated, gpu = numbers["allocated"], numbers["unallocated"], numbers["gpu"]
    evidence = cited(matches, which)
    if tried is not None:
        parts = [f"{gib(total)} total" if total is not None else "", f"{gib(free)} free" if free is not None else ""]
        where = f" on GPU {gpu:.0f}" if gpu is not None else ""
        detail = ", ".join(p for p in parts if p)
        evidence.append(f"PyTorch tried to allocate {gib(tried)}{where}" + (f" ({detail})" if detail else ""))
    fragmented = False
    if allocated is not None and unallocated is not None:
        evidence.append(f"PyTorch held {gib(allocated)} allocated and {gib(unallocated)} reserved but unallocated")
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


def host_oom(job: Mapping[str, Any], lines: Sequence[LogLine], usage: JobUsage) -> Finding | None:
    matches = matching(lines, _HOST_OOM)
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
        evidence.extend(cited(matches, len(matches) - 1))
    limits = [int(m.group(1)) for line in matches if (m := _CORRAL_MEMORY_KILL.search(line.text))]
    limit = limits[-1] if limits else requested
    if peak is not None:
        # the figure `corral eff` states, to the same decimal, with where it comes from
        evidence.append(f"its memory peaked at {format_peak_mb(peak)} ({source_words(usage.memory_source)})"
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


def nccl_timeout(job: Mapping[str, Any], lines: Sequence[LogLine]) -> Finding | None:
    matches = matching(lines, _NCCL_TIMEOUT)
    if not matches:
        return None
    evidence = cited(matches)
    op = re.search(r"OpType=(\w+)", matches[0].text)
    timeout = re.search(r"Timeout\(ms\)=(\d+)", matches[0].text)
    if op and timeout:
        evidence.append(f"the {op.group(1)} collective waited {span(int(timeout.group(1)) / 1000)} "
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


def nan_loss(nonfinite: Sequence[tuple[str, str, int]], lines: Sequence[LogLine]) -> Finding | None:
    matches = [line for line in lines if _NAN_LOSS.search(line.text) or _NAN_ANOMALY.search(line.text)]
    if not nonfinite and not matches:
        return None
    evidence = [f"run {run!r}: {key} became NaN/inf at step {step}"
                for run, key, step in sorted(nonfinite, key=lambda item: item[2])[:3]]
    if len(nonfinite) > 3:
        evidence.append(f"({len(nonfinite) - 3} more metrics became NaN/inf)")
    if matches:
        evidence.extend(cited(matches))  # the first: where it began
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


def python_error(job: Mapping[str, Any], lines: Sequence[LogLine]) -> Finding | None:
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


def exit_status(job: Mapping[str, Any], lines: Sequence[LogLine]) -> Finding:
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
