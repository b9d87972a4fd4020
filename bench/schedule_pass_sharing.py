#!/usr/bin/env python3
"""One scheduling pass on `schedule_pass.py`'s cluster with jobs that share GPUs (`corral.core.sharing`).

    .venv/bin/python bench/schedule_pass_sharing.py [--runs 5] [--seed 1] [--pending 10000] [--share 0.1]

The same seeded snapshot as `bench/schedule_pass.py` (1,000 nodes of 8 A100 80G, 5,000 running jobs,
the pending queue), then --share of the running 1-GPU jobs hold 20 GB of their GPU instead of all of it,
and --share of the pending 1-GPU jobs ask for 10, 20 or 40 GB of one GPU (`--gpu-mem SIZE --gpu-share`).
A sharing request is asked of every node where a GPU is shared, so this is what sharing costs a pass;
it is held to the same floor as the pass without sharing (100 ms for 10,000 pending jobs).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import random
import sys
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import schedule_pass as base  # noqa: E402 - the benchmark's own directory, put on the path above

GB = 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--share", type=float, default=0.1, help="Share of 1-GPU jobs that share a GPU (0.1).")
    args = parser.parse_args()
    snapshot = base.build(args.pending, args.seed)
    rng = random.Random(args.seed + 1)
    running = [dataclasses.replace(a, gpu_share_mb=20 * GB) if len(a.gpu_ids) == 1 and rng.random() < args.share
               else a for a in snapshot.running]
    pending = [dataclasses.replace(p, request=dataclasses.replace(p.request, gpu_share_mb=rng.choice((10, 20, 40)) * GB))
               if p.request.gpus == 1 and rng.random() < args.share else p for p in snapshot.pending]
    snapshot = dataclasses.replace(snapshot, running=running, pending=pending)
    passes, schedules = [], []
    decisions = None
    for i in range(args.runs + 1):
        gc.collect()
        _, decisions, tp, ts = base.one_pass(snapshot)
        if i:
            passes.append((tp + ts) * 1e3)
            schedules.append(ts * 1e3)
    assert decisions is not None
    floor = base.floor_ms(args.pending)
    total = median(passes)
    print(f"  sharing         {sum(1 for a in running if a.gpu_share_mb):,} running, "
          f"{sum(1 for p in pending if p.request.gpu_share_mb):,} pending")
    print(f"  pass            median {total:8.2f} ms  ({args.runs} runs, +1 warm-up)")
    print(f"    schedule      median {median(schedules):8.2f} ms")
    print(f"  started         {len(decisions.starts)} jobs ({sum(1 for a in decisions.starts if a.gpu_share_mb)} sharing)")
    print(f"  floor           median {floor:.0f} ms")
    print(f"  verdict         {base.verdict(total, floor, higher_is_better=False)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
