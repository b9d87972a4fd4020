#!/usr/bin/env python3
"""Submit-to-start latency on an idle machine.

    .venv/bin/python bench/submit_latency.py [--samples 50] [--warmup 2] [--json [PATH]]

Starts a server with one declared GPU in a fresh temporary home and submits one
job at a time (each waits for the previous one to end, then the machine idles
--gap seconds). Each job is `sh -c 'date +%s.%N > FILE'`: it records the moment
its process runs. We use sh + date rather than `python -c 'time.time()'`,
whose interpreter start-up would add ~20 ms that is no part of corral; sh and
date add about a millisecond (fork/exec of sh, then of date).

    latency = date's timestamp - the client's time.time() just before sending the POST

Both clocks are this machine's wall clock. Also reported, per sample:
    server      start_time - submit_time from the API (ms resolution): queueing
                and scheduling inside the server
    ack         the POST's round trip (submit accepted and committed)
    spawn       start_time -> the supervisor's fork (jobs/ID/started.json): the
                server's launch work plus the start of the Python supervisor
    exec        supervisor fork -> date's timestamp: fork, exec sh, exec date
Floor: median 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    Http, Server, add_common_args, emit, iso_to_epoch, log, median, percentile, verdict, wait_end,
)

FLOOR_MEDIAN_MS = 50.0


def _sample(http: Http, home: str, n: int, timeout: float) -> dict[str, float]:
    stamp = os.path.join(home, "stamps", f"{n}.ts")
    body = {"command": ["sh", "-c", f"date +%s.%N > {stamp}"], "gpus": 1, "workdir": home, "name": f"lat{n}"}
    t_send = time.time()
    job = http.call("POST", "/api/v1/jobs", body, expect=201)
    t_ack = time.time()
    job = wait_end(http, job["id"], timeout)
    if job["state"] != "COMPLETED":
        raise RuntimeError(f"job {job['id']} ended {job['state']} (exit {job['exit_code']}): {job.get('reason')}")
    with open(stamp) as f:
        t_proc = float(f.read().strip())
    with open(os.path.join(home, "jobs", str(job["id"]), "started.json")) as f:
        t_fork = float(json.load(f)["start_time"])
    submit, start = iso_to_epoch(job["submit_time"]), iso_to_epoch(job["start_time"])
    return {
        "e2e": t_proc - t_send,
        "server": start - submit,
        "ack": t_ack - t_send,
        "spawn": t_fork - start,
        "exec": t_proc - t_fork,
    }


def _startup_ms(argv: list[str], n: int) -> float:
    """Median wall time of running argv (spawn to exit), for the breakdown's context."""
    times = []
    for _ in range(n + 1):
        t0 = time.perf_counter()
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=True, cwd="/")
        times.append((time.perf_counter() - t0) * 1e3)
    return median(times[1:])


def run(args: argparse.Namespace) -> dict[str, Any]:
    deadline = time.monotonic() + args.timeout
    samples: list[dict[str, float]] = []
    with Server(gpus=1, keep_home=args.keep_home, profile=args.profile) as server:
        os.makedirs(os.path.join(server.home, "stamps"))
        http = Http(server.url)
        time.sleep(args.gap)
        for n in range(args.warmup + args.samples):
            if time.monotonic() > deadline:
                raise RuntimeError(f"out of time after {len(samples)} samples")
            s = _sample(http, server.home, n, timeout=max(5.0, deadline - time.monotonic()))
            if n >= args.warmup:
                samples.append(s)
            time.sleep(args.gap)  # idle again: the previous job has been reaped, the loop sleeps
        http.close()
    log(f"{len(samples)} samples (+{args.warmup} warm-up discarded)")

    def stats(key: str) -> dict[str, float]:
        values = [s[key] * 1e3 for s in samples]
        return {"median": median(values), "p90": percentile(values, 90), "max": max(values), "min": min(values)}

    figures = {key: stats(key) for key in ("e2e", "server", "ack", "spawn", "exec")}
    # What the supervisor's start costs by itself: the interpreter, and the interpreter plus its imports.
    baseline = {
        "python_c_pass": _startup_ms([sys.executable, "-c", "pass"], 10),
        "python_import_supervisor": _startup_ms([sys.executable, "-c", "import corral.executor.supervisor"], 10),
    }
    return {
        "benchmark": "submit_latency",
        "samples": len(samples),
        "warmup": args.warmup,
        "job_command": "sh -c 'date +%s.%N > FILE'",
        "latency_ms": figures["e2e"],
        "server_start_minus_submit_ms": figures["server"],
        "breakdown_ms": {"ack": figures["ack"], "spawn": figures["spawn"], "exec": figures["exec"]},
        "baseline_ms": baseline,
        "floor_median_ms": FLOOR_MEDIAN_MS,
        "verdict": verdict(figures["e2e"]["median"], FLOOR_MEDIAN_MS, higher_is_better=False),
        "samples_ms": [{k: round(v * 1e3, 3) for k, v in s.items()} for s in samples],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=50, help="Measured jobs (default 50).")
    parser.add_argument("--warmup", type=int, default=2, help="Jobs run first and not counted (default 2).")
    parser.add_argument("--gap", type=float, default=0.2, help="Idle seconds between jobs (default 0.2).")
    parser.add_argument("--timeout", type=float, default=300.0, help="Give up after this many seconds (default 300).")
    add_common_args(parser)
    args = parser.parse_args()
    if args.samples < 1 or args.warmup < 0:
        parser.error("--samples must be at least 1 and --warmup not negative")
    r = run(args)

    def row(label: str, f: dict[str, float], note: str = "") -> tuple[str, str, str]:
        return (label, f"median {f['median']:7.2f}  p90 {f['p90']:7.2f}  max {f['max']:7.2f}", f"ms{note}")

    b = r["breakdown_ms"]
    emit(r, [
        ("benchmark", "submit_latency", ""),
        ("samples", r["samples"], f"(+{r['warmup']} warm-up), one at a time on an idle server"),
        ("job", r["job_command"], "(sh+date: ~1 ms; python -c would add ~20 ms)"),
        row("submit->start", r["latency_ms"], "  (POST sent -> job process running)"),
        row("server start-submit", r["server_start_minus_submit_ms"], "  (API start_time - submit_time)"),
        row("  ack", b["ack"], "  (POST round trip)"),
        row("  spawn", b["spawn"], "  (start_time -> supervisor fork)"),
        row("  exec", b["exec"], "  (supervisor fork -> date runs)"),
        ("python -c pass", f"median {r['baseline_ms']['python_c_pass']:7.2f}",
         "ms  (venv interpreter start-up, for scale)"),
        ("python -c 'import supervisor'", f"median {r['baseline_ms']['python_import_supervisor']:7.2f}",
         "ms  (what the supervisor's start costs before it forks)"),
        ("floor", f"median {r['floor_median_ms']:.0f}", "ms"),
        ("verdict", r["verdict"], ""),
    ], args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
