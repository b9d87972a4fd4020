#!/usr/bin/env python3
"""What watching jobs costs the server: the sampler's own CPU time per sample.

    .venv/bin/python bench/monitor_sampler.py [--jobs 50] [--busy 3] [--samples 30] [--machine-processes 300]

Starts `--jobs` real jobs, each the leader of its own session (as the supervisor starts
them) with one child: `sh` waiting on a `sleep`, or, for `--busy` of them, on a busy
loop. Pads the machine with idle processes up to `--machine-processes`, since the
sampler scans every process on the machine each tick. GPUs come from recorded-shape
frames of 8 GPUs listing the jobs' pids (`ReplayedGpus`, as with CORRAL_GPU_REPLAY), so
the real NVML calls are not part of the figure. Then it takes `--samples` samples back to
back and reports the sampler's CPU time per sample (time.process_time: this process
only, not the jobs) and that as a share of one core at a 10 s and a 1 s interval.
Exits 1 when the share at 10 s is not below --limit-percent (1 %).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from _common import emit, log, median  # noqa: E402

from corral.monitor.nvml import gpu_source_from_env  # noqa: E402
from corral.monitor.processes import snapshot_processes  # noqa: E402
from corral.monitor.sampling import JobSampler, WatchedJob  # noqa: E402

GPUS = 8
GIB = 1 << 30
IDLE_JOB = ["sh", "-c", "sleep 600 & wait"]
BUSY_JOB = ["sh", "-c", "while :; do :; done & wait"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--busy", type=int, default=3, help="how many of the jobs burn a core (3)")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--machine-processes", type=int, default=300,
                        help="start idle processes until the machine has at least this many (300)")
    parser.add_argument("--limit-percent", type=float, default=1.0, help="of one core at a 10 s interval (1)")
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH",
                        help="Print (or also write) the figures as JSON.")
    args = parser.parse_args()

    started: list[subprocess.Popen[bytes]] = []
    frames_dir = tempfile.mkdtemp(prefix="corral-bench-gpus-")
    try:
        jobs = start_jobs(args.jobs, args.busy, started)
        padding = max(0, args.machine_processes - len(snapshot_processes()))
        for _ in range(padding):
            started.append(subprocess.Popen(["sleep", "600"], start_new_session=True))
        table = snapshot_processes()
        frames = os.path.join(frames_dir, "frames.jsonl")
        write_frames(frames, [table.job_pids(job.pid) for job in jobs])
        log(f"{len(jobs)} jobs ({args.busy} busy), {padding} idle padding processes, "
            f"{len(table)} processes on the machine")
        result, lines = measure(args, jobs, frames, len(table))
    finally:
        for proc in started:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # each was started as its own session and group
            except ProcessLookupError:
                pass
        for proc in started:
            proc.wait()
        for name in os.listdir(frames_dir):
            os.remove(os.path.join(frames_dir, name))
        os.rmdir(frames_dir)
    emit(result, lines, args.json)
    return 0 if result["verdict"] == "PASS" and result["verified"] else 1


def start_jobs(count: int, busy: int, started: list[subprocess.Popen[bytes]]) -> list[WatchedJob]:
    """`count` jobs, each a session leader with one child; waits until every child is there."""
    jobs = []
    for number in range(count):
        now = time.time()
        proc = subprocess.Popen(BUSY_JOB if number < busy else IDLE_JOB, start_new_session=True)
        started.append(proc)
        jobs.append(WatchedJob(job_id=number + 1, pid=proc.pid, gpu_ids=(number % GPUS,), cpus=1, start_time=now))
    deadline = time.monotonic() + 20
    while True:
        table = snapshot_processes()
        if all(len(table.job_pids(job.pid)) >= 2 for job in jobs):
            return jobs
        if time.monotonic() > deadline:
            raise RuntimeError("the jobs' children did not all start within 20 s")
        time.sleep(0.05)


def write_frames(path: str, job_pids: list[tuple[int, ...]]) -> None:
    """Three raw NVML frames of 8 80 GB GPUs; GPU i lists the processes of jobs i, i + 8, ..."""
    with open(path, "w") as f:
        for frame in range(3):
            gpus = []
            for index in range(GPUS):
                pids = [pid for number, pids in enumerate(job_pids) if number % GPUS == index for pid in pids]
                used = (2 * len(pids) + 1) * GIB
                gpus.append({
                    "index": index, "uuid": f"GPU-bench-{index}", "utilization": {"gpu": 50 + frame, "memory": 30},
                    "memory": {"total": 80 * GIB, "used": used, "free": 80 * GIB - used},
                    "power_mw": 400000 + 1000 * index, "temperature_c": 50 + index,
                    "processes": [{"pid": pid, "usedGpuMemory": 2 * GIB} for pid in pids],
                })
            f.write(json.dumps(gpus) + "\n")


def measure(args: argparse.Namespace, jobs: list[WatchedJob], frames: str,
            machine_processes: int) -> tuple[dict, list[tuple[str, object, str]]]:
    sampler = JobSampler(gpu_source=gpu_source_from_env({"CORRAL_GPU_REPLAY": frames}))
    sampler.sample(jobs)  # the first sample has no rates yet; the steady state is what costs
    cpu_ms, wall_ms = [], []
    samples = []
    for _ in range(args.samples):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        samples = sampler.sample(jobs)
        cpu_ms.append((time.process_time() - cpu0) * 1000)
        wall_ms.append((time.perf_counter() - wall0) * 1000)
    scan_cpu0 = time.process_time()
    for _ in range(args.samples):
        snapshot_processes()
    scan_ms = (time.process_time() - scan_cpu0) * 1000 / args.samples

    # Every job sampled, with its child, its GPU and a write rate: the figure is for the real work.
    verified = (len(samples) == len(jobs) and all(s.processes == 2 for s in samples)
                and all(s.gpu_memory_mb == 4096 and s.write_mb_s is not None for s in samples))
    per_sample_ms = sum(cpu_ms) / len(cpu_ms)
    at_10s, at_1s = per_sample_ms / 10_000 * 100, per_sample_ms / 1_000 * 100
    result = {
        "jobs": len(jobs), "busy_jobs": args.busy, "gpus": GPUS, "machine_processes": machine_processes,
        "samples": args.samples, "cpu_ms_per_sample": per_sample_ms, "cpu_ms_median": median(cpu_ms),
        "wall_ms_median": median(wall_ms), "scan_cpu_ms": scan_ms, "percent_of_core_at_10s": at_10s,
        "percent_of_core_at_1s": at_1s, "limit_percent": args.limit_percent, "verified": verified,
        "verdict": "PASS" if at_10s < args.limit_percent else "MISS",
    }
    lines: list[tuple[str, object, str]] = [
        ("processes on the machine", machine_processes, ""),
        ("jobs watched (2 processes each), GPUs", f"{len(jobs)}, {GPUS}", ""),
        ("sampler CPU per sample, mean", per_sample_ms, f"ms (median {median(cpu_ms):.2f} ms)"),
        ("  of which the process table scan", scan_ms, "ms"),
        ("sampler wall time per sample, median", median(wall_ms), "ms"),
        ("share of one core at a 10 s interval", at_10s,
         f"% ({result['verdict']}, limit < {args.limit_percent:g} %)"),
        ("share of one core at a 1 s interval", at_1s, "%"),
        ("every job sampled with its child and GPU", "yes" if verified else "NO", ""),
    ]
    return result, lines


if __name__ == "__main__":
    sys.exit(main())
