"""A toy training loop with checkpoints: fits y = 3x + 1 by gradient descent, no dependencies.

Resumes from the newest checkpoint in $CORRAL_CHECKPOINT_DIR, so a requeued job continues.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    ckpt_dir = os.environ.get("CORRAL_CHECKPOINT_DIR", ".")
    ckpt = os.path.join(ckpt_dir, "toy.json")
    state = {"step": 0, "w": 0.0, "b": 0.0}
    if os.path.exists(ckpt):
        with open(ckpt) as f:
            state = json.load(f)
        print(f"resumed from step {state['step']}")
    print(f"job {os.environ.get('CORRAL_JOB_ID')} on GPUs {os.environ.get('CUDA_VISIBLE_DEVICES')!r}", flush=True)

    rng = random.Random(0)
    data = [(x, 3 * x + 1 + rng.gauss(0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(256))]
    while state["step"] < args.steps:
        gw = gb = 0.0
        for x, y in data:
            err = state["w"] * x + state["b"] - y
            gw += 2 * err * x / len(data)
            gb += 2 * err / len(data)
        state["w"] -= args.lr * gw * 10
        state["b"] -= args.lr * gb * 10
        state["step"] += 1
        loss = sum((state["w"] * x + state["b"] - y) ** 2 for x, y in data) / len(data)
        if state["step"] % 5 == 0:
            print(f"step {state['step']:3d}  loss {loss:.4f}  w {state['w']:.3f}  b {state['b']:.3f}", flush=True)
            tmp = ckpt + ".tmp"
            with open(tmp, "w") as f:
                json.dump(state, f)
            os.replace(tmp, ckpt)  # atomic: a kill mid-write never leaves a torn checkpoint
        time.sleep(0.05)


if __name__ == "__main__":
    main()
