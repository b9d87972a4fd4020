#!/usr/bin/env python3
"""What `run.log()` costs the training loop.

    .venv/bin/python bench/sdk_log.py [--calls 1000000] [--repeats 5] [--limit-us 5]

An offline run (spool in a temporary directory, so no network) logs
`{"loss": x, "acc": y}` at an explicit step, `--calls` times per repeat; the figure is
the median over the repeats of (wall time of the loop / calls), loop overhead included.
The run's background thread converts, batches and spools the same points meanwhile: it
shares the interpreter's lock with the loop, so its work is part of what is measured.
Exits 1 when the median exceeds --limit-us.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

import corral  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--limit-us", type=float, default=5.0)
    args = parser.parse_args()

    spool = tempfile.mkdtemp(prefix="corral-bench-spool-")
    try:
        run = corral.init(project="bench", mode="offline", spool_dir=spool, checkpoint_dir=spool)
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
        finish_s = time.perf_counter() - started
        points = 2 * step
    finally:
        shutil.rmtree(spool, ignore_errors=True)

    median_us = statistics.median(per_call_ns) / 1000
    runs = ", ".join(f"{ns / 1000:.2f}" for ns in per_call_ns)
    print(f"run.log(): {median_us:.2f} µs per call (median of {args.repeats} runs of {args.calls:,} calls; "
          f"runs: {runs} µs)")
    print(f"finish(): {finish_s:.2f} s to spool the last of {points:,} points")
    if median_us > args.limit_us:
        print(f"FAIL: over the {args.limit_us:g} µs limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
