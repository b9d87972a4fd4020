"""End-to-end metric ingest: points per second through the HTTP API into the store.

Starts a server (SQLite in its home, or --db), creates runs, and has several clients post
batches the way the SDK does (per key, packed base64 columns, a batch id each) until
--points points are stored. Afterwards it checks every run holds exactly what was sent.

    .venv/bin/python bench/metrics_ingest.py                 # 20,000,000 points, 4 clients
    .venv/bin/python bench/metrics_ingest.py --db postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _common import Http, Server, add_common_args, emit, log, verdict  # noqa: E402

FLOOR = 1_000_000  # points/s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=20_000_000, help="Points to send in all.")
    parser.add_argument("--clients", type=int, default=4, help="Concurrent clients, each with its own runs.")
    parser.add_argument("--runs-per-client", type=int, default=2)
    parser.add_argument("--keys", type=int, default=10, help="Metric keys per batch.")
    parser.add_argument("--steps", type=int, default=10_000, help="Steps per key per batch.")
    parser.add_argument("--db", help="Database URL (default: SQLite in the server's home).")
    add_common_args(parser)
    args = parser.parse_args()

    per_batch = args.keys * args.steps
    batches_per_run = max(1, args.points // (per_batch * args.clients * args.runs_per_client))
    total = batches_per_run * per_batch * args.clients * args.runs_per_client
    rng = np.random.default_rng(0)
    values = base64.b64encode(rng.standard_normal(args.steps).astype("<f8").tobytes()).decode()
    times = base64.b64encode((time.time() + np.arange(args.steps) * 1e-3).astype("<f8").tobytes()).decode()
    keys = [f"train/metric_{k}" for k in range(args.keys)]

    with Server(gpus=0, keep_home=args.keep_home, profile=args.profile, db=args.db) as server:
        setup = Http(server.url)
        runs = [[setup.call("POST", "/api/v1/runs", {"project": "bench", "name": f"c{c}-r{r}"})["id"]
                 for r in range(args.runs_per_client)] for c in range(args.clients)]
        errors: list[str] = []
        start_gate = threading.Barrier(args.clients + 1)

        def client(run_ids: list[int]) -> None:
            http = Http(server.url, timeout=300)
            start_gate.wait()
            try:
                for b in range(batches_per_run):
                    steps = base64.b64encode(np.arange(b * args.steps, (b + 1) * args.steps, dtype="<i8").tobytes()).decode()
                    for run_id in run_ids:
                        body = {"batch_id": uuid.uuid4().hex, "metrics": [
                            {"key": k, "steps_i64": steps, "values_f64": values, "times_f64": times} for k in keys]}
                        answer = http.call("POST", f"/api/v1/runs/{run_id}/metrics", body)
                        if answer["accepted"] != per_batch:
                            errors.append(f"run {run_id} batch {b}: {answer}")
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(repr(exc))

        threads = [threading.Thread(target=client, args=(ids,)) for ids in runs]
        for t in threads:
            t.start()
        log(f"sending {total:,} points: {args.clients} clients x {args.runs_per_client} runs x {batches_per_run} "
            f"batches x {args.keys} keys x {args.steps} steps")
        start_gate.wait()
        began = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - began
        stored = sum(m["count"] for ids in runs for run_id in ids
                     for m in setup.call("GET", f"/api/v1/runs/{run_id}")["metrics"].values())
        rate = total / elapsed
        db = "PostgreSQL" if args.db else "SQLite"
        result = {"points": total, "stored": stored, "seconds": elapsed, "points_per_s": rate, "database": db,
                  "clients": args.clients, "errors": errors[:5], "floor": FLOOR, "verdict": verdict(rate, FLOOR, True)}
        emit(result, [
            (f"metric ingest through the API into {db}", rate, f"points/s ({result['verdict']}, floor {FLOOR:,})"),
            ("points sent / stored", f"{total:,} / {stored:,}", ""),
            ("elapsed", elapsed, "s"),
        ], args.json)
        if errors or stored != total:
            print(f"ERROR: {len(errors)} failed requests, {stored:,} of {total:,} points stored: {errors[:3]}",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
