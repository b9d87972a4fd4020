#!/usr/bin/env python3
"""Submitting a job array of 10,000 tasks through the REST API.

    .venv/bin/python bench/array_submit.py [--tasks 10000] [--samples 20] [--json [PATH]]

Starts a server with one declared GPU in a fresh temporary home, holds the GPU with
a blocker job, then POSTs --samples arrays of --tasks one-GPU tasks, one after
another, timing each request (sent -> answered). An array is one record until its
tasks start, so the cost must not grow with the number of tasks. Afterwards it checks
that each array lists exactly --tasks tasks waiting. Floor: median 100 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Http, Server, add_common_args, emit, log, median, percentile, verdict, wait_state  # noqa: E402

FLOOR_MEDIAN_MS = 100.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    with Server(gpus=1, keep_home=args.keep_home, profile=args.profile) as server:
        http = Http(server.url)
        blocker = http.call("POST", "/api/v1/jobs", {"command": ["sleep", "600"], "gpus": 1, "workdir": server.home},
                            expect=201)
        wait_state(http, blocker["id"], {"RUNNING"}, 60)
        body = {"command": ["true"], "gpus": 1, "workdir": server.home, "array": f"0-{args.tasks - 1}"}
        times, ids = [], []
        for _ in range(args.samples):
            t0 = time.perf_counter()
            array = http.call("POST", "/api/v1/jobs", body, expect=201)
            times.append((time.perf_counter() - t0) * 1000)
            ids.append(array["id"])
        counted = []
        for array_id in ids:
            job = http.call("GET", f"/api/v1/jobs/{array_id}")
            waiting = job["ref"].split("[", 1)[1].rstrip("]")
            first, _, last = waiting.partition("-")
            counted.append(int(last or first) - int(first) + 1 if "," not in waiting else -1)
        http.close()
    ok = all(c >= args.tasks - 1 for c in counted)  # one task may have been given its own record to wait
    med = median(times)
    return {
        "benchmark": "array_submit", "tasks": args.tasks, "samples": args.samples,
        "submit_ms": {"median": med, "p90": percentile(times, 90), "max": max(times)},
        "verified": ok, "floor_median_ms": FLOOR_MEDIAN_MS, "verdict": verdict(med, FLOOR_MEDIAN_MS, False),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000, help="Tasks per array (default 10000).")
    parser.add_argument("--samples", type=int, default=20, help="Arrays submitted (default 20).")
    add_common_args(parser)
    args = parser.parse_args()
    log(f"submitting {args.samples} arrays of {args.tasks} tasks")
    r = run(args)
    s = r["submit_ms"]
    emit(r, [
        ("benchmark", "array_submit", ""),
        ("array", f"{r['tasks']} tasks x {r['samples']} submits", ""),
        ("submit", f"median {s['median']:7.2f}  p90 {s['p90']:7.2f}  max {s['max']:7.2f}", "ms  (POST sent -> answered)"),
        ("verified", "yes" if r["verified"] else "NO", "(each array holds its tasks, waiting)"),
        ("floor", f"median {r['floor_median_ms']:.0f}", "ms"),
        ("verdict", r["verdict"], ""),
    ], args.json)
    return 0 if r["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
