#!/usr/bin/env python3
"""What `run.log()` costs the training loop.

    .venv/bin/python bench/sdk_log.py [--calls 1000000] [--repeats 5] [--limit-us 5]

A run logs `{"loss": x, "acc": y}` at an explicit step, `--calls` times per repeat; the
figure is the median over the repeats of (wall time of the loop / calls), loop overhead
included. It is measured twice: offline (spool in a temporary directory) and online, with
a real server started for it. The run's background thread converts, batches and sends (or
spools) the same points meanwhile: it shares the interpreter's lock with the loop, so its
work is part of what is measured. Exits 1 when a median exceeds --limit-us.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

import corral  # noqa: E402
from _common import Server, emit, verdict  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--limit-us", type=float, default=5.0)
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH", help="Print (or also write) the figures as JSON.")
    args = parser.parse_args()

    offline, finish_s, points = measure(args, mode="offline")
    with Server(gpus=0) as server:
        online, online_finish_s, _ = measure(args, mode="online", url=server.url)
    median_us, online_us = statistics.median(offline) / 1000, statistics.median(online) / 1000
    worst = max(median_us, online_us)
    result = {
        "median_us": median_us, "online_median_us": online_us, "runs_us": [ns / 1000 for ns in offline],
        "online_runs_us": [ns / 1000 for ns in online], "calls": args.calls, "repeats": args.repeats,
        "finish_s": finish_s, "online_finish_s": online_finish_s, "points": points, "limit_us": args.limit_us,
        "verdict": verdict(worst, args.limit_us, False),
        "detail": f"online {online_us:.2f} us; median of {args.repeats} x {args.calls:,} calls",
    }
    emit(result, [
        ("run.log(), offline (spooling), median", median_us, f"µs per call ({result['verdict']}, limit {args.limit_us:g} µs)"),
        ("run.log(), online (sending to a server), median", online_us, "µs per call"),
        ("  offline runs", ", ".join(f"{ns / 1000:.2f}" for ns in offline), "µs"),
        ("  online runs", ", ".join(f"{ns / 1000:.2f}" for ns in online), "µs"),
        (f"finish() after {points:,} points, offline / online", f"{finish_s:.2f} / {online_finish_s:.2f}", "s"),
    ], args.json)
    return 0 if worst <= args.limit_us else 1


def measure(args: argparse.Namespace, *, mode: str, url: str | None = None) -> tuple[list[float], float, int]:
    """ns per call for each repeat, seconds finish() took, points logged."""
    spool = tempfile.mkdtemp(prefix="corral-bench-spool-")
    try:
        run = corral.init(project="bench", mode=mode, url=url, spool_dir=spool, checkpoint_dir=spool)
        per_call_ns = []
        step = 0
        for _ in range(args.repeats):
            log = run.log
            start = time.perf_counter_ns()
            for i in range(step, step + args.calls):
                log({"loss": i * 1e-6, "acc": 0.5}, step=i)
            per_call_ns.append((time.perf_counter_ns() - start) / args.calls)
            step += args.calls
        started = time.perf_counter()
        run.finish()
        return per_call_ns, time.perf_counter() - started, 2 * step
    finally:
        shutil.rmtree(spool, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
