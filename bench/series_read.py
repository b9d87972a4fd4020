"""Reading a long metric series downsampled: GET /api/v1/runs/{run}/series?max_points=2000.

Stores one series of --points points (a noisy decaying curve with a few spikes) through the
API, then times reading it back downsampled, end to end over HTTP, whole and zoomed into a
tenth of it. Checks that the spikes, the first and the last point are in every answer.

    .venv/bin/python bench/series_read.py          # 10,000,000 points, 2,000 returned
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _common import Http, Server, add_common_args, emit, log, median, percentile, verdict  # noqa: E402

FLOOR_MS = 50.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--max-points", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100_000, help="Points per logged batch.")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--db", help="Database URL (default: SQLite in the server's home).")
    add_common_args(parser)
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    steps = np.arange(args.points, dtype="<i8")
    values = (np.exp(-steps / (args.points / 5)) + 0.05 * rng.standard_normal(args.points)).astype("<f8")
    spikes = rng.choice(args.points, 5, replace=False)
    values[spikes] = 100.0 + np.arange(5)
    times = (1.7e9 + steps * 0.01).astype("<f8")

    with Server(gpus=0, keep_home=args.keep_home, profile=args.profile, db=args.db) as server:
        http = Http(server.url, timeout=300)
        run = http.call("POST", "/api/v1/runs", {"project": "bench", "name": "long"})["id"]
        began = time.perf_counter()
        for lo in range(0, args.points, args.batch):
            part = slice(lo, lo + args.batch)
            http.call("POST", f"/api/v1/runs/{run}/metrics", {"batch_id": uuid.uuid4().hex, "metrics": [{
                "key": "loss", "steps_i64": _b64(steps[part]), "values_f64": _b64(values[part]),
                "times_f64": _b64(times[part])}]})
        log(f"stored {args.points:,} points in {time.perf_counter() - began:.1f} s")

        def read(query: str) -> tuple[list[float], dict]:
            path = f"/api/v1/runs/{run}/series?key=loss&max_points={args.max_points}{query}"
            http.call("GET", path)  # warm
            times_ms = []
            for _ in range(args.samples):
                t = time.perf_counter()
                answer = http.call("GET", path)
                times_ms.append((time.perf_counter() - t) * 1000)
            return times_ms, answer

        whole_ms, whole = read("")
        lo, hi = args.points // 2, args.points // 2 + args.points // 10
        zoom_ms, zoom = read(f"&start={lo}&end={hi}")

        problems = []
        got = set(whole["steps"])
        if whole["count"] != args.points or len(whole["steps"]) > args.max_points:
            problems.append(f"whole: count {whole['count']}, {len(whole['steps'])} points")
        for step in [0, args.points - 1, *spikes.tolist()]:
            if step not in got:
                problems.append(f"whole: step {step} missing")
        zoom_steps = set(zoom["steps"])
        for step in [lo, hi, *[s for s in spikes.tolist() if lo <= s <= hi]]:
            if step not in zoom_steps:
                problems.append(f"zoom: step {step} missing")
        result = {
            "points": args.points, "max_points": args.max_points, "returned": len(whole["steps"]),
            "median_ms": median(whole_ms), "p90_ms": percentile(whole_ms, 90), "zoom_median_ms": median(zoom_ms),
            "floor_ms": FLOOR_MS, "verdict": verdict(median(whole_ms), FLOOR_MS, False), "problems": problems,
        }
        emit(result, [
            (f"read {args.points:,} points as {args.max_points:,}, median", result["median_ms"],
             f"ms ({result['verdict']}, floor {FLOOR_MS:.0f} ms)"),
            ("  p90", result["p90_ms"], "ms"),
            (f"zoomed to a tenth ({hi - lo + 1:,} points), median", result["zoom_median_ms"], "ms"),
            ("points returned (first, last, spikes kept)", f"{len(whole['steps'])}, {'yes' if not problems else 'NO'}", ""),
        ], args.json)
        if problems:
            print("ERROR: " + "; ".join(problems), file=sys.stderr)
            return 1
    return 0


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(array.tobytes()).decode()


if __name__ == "__main__":
    sys.exit(main())
