#!/usr/bin/env python3
"""What running in a container image adds to a job's start: submit -> its process running, plain and in an
image, side by side in one run.

    .venv/bin/python bench/container_start.py [--samples 30] [--warmup 2] [--json [PATH]]

Needs root and Podman (scripts/containers.sh), as the container tests do. Starts a server with two declared
GPUs in a fresh temporary home, builds an image of this Python locally (tests/containers.py; nothing is pulled), and
submits one job at a time, alternating: `python -S -c` writing `time.time()` to a file, on the host and the
same interpreter in the image (two GPUs, so the device and CUDA_VISIBLE_DEVICES paths are taken; busybox's
date has no sub-second format). Each measures

    latency = the job's timestamp - the client's time.time() just before sending the POST

and the container job's share after its supervisor forked: the image looked up (`podman image inspect`), the
environment file written, `podman run` (runc creating the container in the job's cgroup).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from _common import Http, Server, add_common_args, emit, log, median, percentile, wait_end  # noqa: E402

CONF = "/tmp/corral-test-containers/containers.conf"
PYTHON = os.path.realpath(sys.executable)  # at the same path in the image


def _image() -> str:
    """The tests' Python image (this interpreter, at its path here), built if absent; their Podman configuration."""
    from tests.containers import CONF_DIR, _build, python_image_name, python_tar

    os.makedirs(CONF_DIR, exist_ok=True)
    with open(CONF, "w") as f:
        f.write('[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\n'
                'events_logger = "file"\n')
    os.environ["CONTAINERS_CONF"] = CONF
    image = python_image_name()
    _build("podman", image, python_tar, ["PATH=/bin"])  # as the tests build it
    return image


def _sample(http: Http, home: str, stamps: str, n: int, image: str | None, timeout: float) -> dict[str, float]:
    stamp = os.path.join(stamps, f"{n}.ts")
    record = f"import time; open({stamp!r}, 'w').write(repr(time.time()))"
    body: dict[str, Any] = {"command": [PYTHON, "-S", "-c", record], "gpus": 2 if image else 1,
                            "workdir": stamps, "name": f"start{n}"}
    if image:
        body["image"] = image
    t_send = time.time()
    job = http.call("POST", "/api/v1/jobs", body, expect=201)
    job = wait_end(http, job["id"], timeout)
    if job["state"] != "COMPLETED":
        raise RuntimeError(f"job {job['id']} ended {job['state']} (exit {job['exit_code']}): {job.get('reason')}")
    with open(stamp) as f:
        t_proc = float(f.read().strip())
    with open(os.path.join(home, "jobs", str(job["id"]), "started.json")) as f:
        t_fork = float(json.load(f)["start_time"])
    return {"e2e": t_proc - t_send, "after_fork": t_proc - t_fork}


def run(args: argparse.Namespace) -> dict[str, Any]:
    image = _image()
    plain: list[dict[str, float]] = []
    boxed: list[dict[str, float]] = []
    deadline = time.monotonic() + args.timeout
    stamps = tempfile.mkdtemp(prefix="corral-bench-stamps-")  # outside the home: a container may not mount that
    with Server(gpus=2, keep_home=args.keep_home, profile=args.profile) as server:
        http = Http(server.url)
        for n in range(args.warmup + args.samples):
            for kind, out in ((None, plain), (image, boxed)):
                left = max(5.0, deadline - time.monotonic())
                sample = _sample(http, server.home, stamps, 2 * n + (kind is not None), kind, left)
                if n >= args.warmup:
                    out.append(sample)
                time.sleep(args.gap)
        http.close()
    shutil.rmtree(stamps, ignore_errors=True)
    log(f"{len(plain)} + {len(boxed)} samples (+{args.warmup} warm-up pairs discarded)")

    def stats(samples: list[dict[str, float]], key: str) -> dict[str, float]:
        values = [s[key] * 1e3 for s in samples]
        return {"median": median(values), "p90": percentile(values, 90), "max": max(values), "min": min(values)}

    figures = {"plain": stats(plain, "e2e"), "container": stats(boxed, "e2e"),
               "plain_after_fork": stats(plain, "after_fork"), "container_after_fork": stats(boxed, "after_fork")}
    return {
        "benchmark": "container_start", "samples": len(plain), "warmup": args.warmup, "image": image,
        "runtime": "podman (runc, cgroupfs)", "latency_ms": figures,
        "added_ms": figures["container"]["median"] - figures["plain"]["median"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=30, help="Measured pairs (default 30).")
    parser.add_argument("--warmup", type=int, default=2, help="Pairs run first and not counted (default 2).")
    parser.add_argument("--gap", type=float, default=0.2, help="Idle seconds between jobs (default 0.2).")
    parser.add_argument("--timeout", type=float, default=600.0, help="Give up after this many seconds (default 600).")
    add_common_args(parser)
    args = parser.parse_args()
    r = run(args)
    f = r["latency_ms"]

    def row(label: str, s: dict[str, float]) -> tuple[str, str, str]:
        return (label, f"median {s['median']:7.1f}  p90 {s['p90']:7.1f}  max {s['max']:7.1f}", "ms")

    emit(r, [
        ("benchmark", "container_start", ""),
        ("samples", r["samples"], f"pairs (+{r['warmup']} warm-up), alternating, one job at a time"),
        row("plain job: submit->running", f["plain"]),
        row("in an image: submit->running", f["container"]),
        row("  plain: fork->running", f["plain_after_fork"]),
        row("  image: fork->running", f["container_after_fork"]),
        ("added by the container", f"{r['added_ms']:.1f}", "ms (median minus median)"),
    ], args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
