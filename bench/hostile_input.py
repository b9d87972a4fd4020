#!/usr/bin/env python3
"""One user's big scripts and huge array against everyone else's listings (issue 15, items 6 and 8).

    .venv/bin/python bench/hostile_input.py                         # this checkout
    .venv/bin/python bench/hostile_input.py --compare /work/main/src  # and another corral's src, side by side

For each corral source tree (`--src`, default this checkout's `src`; `--compare` adds another),
starts a server (1 declared GPU) in a fresh home and:

  scripts: holds the GPU with a blocker job, then submits --scripts batch scripts of --script-mb MB
           each (1 GPU, so they stay PENDING). A server that refuses that size (corral's cap, 4 MB by
           default) gets scripts of its cap less 1 KB instead. Reports the size taken, the server's
           RSS after, then cancels them all and times `corral history` (median of --samples runs) and
           the worst /api/v1/health answer while a history request is running.
  array:   submits one array of --tasks listed indices (`0,2,4,...`) behind the blocker and measures
           `corral queue`'s output (bytes, lines) and time.

Figures go to stdout (one line each, or --json); progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, Http, Server, log, wait_state  # noqa: E402


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cli(server: Server, *args: str) -> tuple[float, bytes]:
    began = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, *args], capture_output=True,
                         timeout=600, env=server.env(), check=True).stdout
    return time.perf_counter() - began, out


def worst_health_during(http_url: str, work: Any) -> float:
    """The slowest /api/v1/health answer while `work()` runs (probed every 10 ms)."""
    done = threading.Event()
    worst = 0.0

    def probe() -> None:
        nonlocal worst
        probe_http = Http(http_url)
        while not done.is_set():
            began = time.perf_counter()
            probe_http.call("GET", "/api/v1/health")
            worst = max(worst, time.perf_counter() - began)
            time.sleep(0.01)
        probe_http.close()

    thread = threading.Thread(target=probe)
    thread.start()
    try:
        work()
    finally:
        done.set()
        thread.join()
    return worst


def measure(src: str, args: argparse.Namespace) -> dict[str, Any]:
    os.environ["PYTHONPATH"] = src  # the server and the CLI run this corral
    result: dict[str, Any] = {"src": src}
    with Server(gpus=1, prefix="corral-hostile-") as server:
        http = Http(server.url, timeout=600)
        blocker = http.call("POST", "/api/v1/jobs", {"command": ["sleep", "3600"], "gpus": 1, "name": "blocker"})
        wait_state(http, blocker["id"], {"RUNNING"}, 60)
        size_mb = args.script_mb
        ids = []
        for i in range(args.scripts):
            script = "#!/bin/sh\n" + "#" * ((size_mb << 20) - 1024) + f"\necho {i}\n"
            status, answer = http.request("POST", "/api/v1/jobs", {"script": script, "gpus": 1, "name": f"big{i}"})
            if status == 422 and answer["error"].get("field") == "script" and size_mb > 4:
                log(f"{src}: {size_mb} MB refused: {answer['error']['message']}")
                result["refused_mb"] = size_mb
                size_mb = 4
                script = "#!/bin/sh\n" + "#" * ((size_mb << 20) - 2048) + f"\necho {i}\n"
                status, answer = http.request("POST", "/api/v1/jobs", {"script": script, "gpus": 1, "name": f"big{i}"})
            assert status == 201, answer
            ids.append(answer["id"])
        result["script_mb"] = size_mb
        result["scripts"] = len(ids)
        result["rss_mb_after_scripts"] = round(rss_mb(server.pid), 1)
        log(f"{src}: {len(ids)} pending scripts of {size_mb} MB, server RSS {result['rss_mb_after_scripts']} MB")
        for job_id in ids:
            http.call("POST", f"/api/v1/jobs/{job_id}/cancel")
        times = [cli(server, "history")[0] for _ in range(args.samples)]
        result["history_s"] = round(statistics.median(times), 3)
        result["health_worst_during_history_ms"] = round(1000 * worst_health_during(
            server.url, lambda: http.call("GET", "/api/v1/jobs?scope=finished&limit=1000")), 1)
        log(f"{src}: corral history {result['history_s']} s, health worst {result['health_worst_during_history_ms']} ms")

        indices = ",".join(str(i) for i in range(0, 2 * args.tasks, 2))
        array = http.call("POST", "/api/v1/jobs", {"command": ["true"], "gpus": 1, "array": indices, "name": "wide"})
        seconds, out = cli(server, "queue")
        result["queue_bytes"] = len(out)
        result["queue_lines"] = out.count(b"\n")
        result["queue_s"] = round(seconds, 3)
        result["array_ref_chars"] = len(next(j for j in http.call("GET", "/api/v1/jobs")["jobs"]
                                             if j["id"] == array["id"])["ref"])
        log(f"{src}: corral queue {len(out)} bytes in {result['queue_lines']} lines, {seconds:.2f} s")
        http.call("POST", f"/api/v1/jobs/{array['id']}/cancel")
        http.call("POST", f"/api/v1/jobs/{blocker['id']}/cancel")
        http.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", default=os.path.join(REPO, "src"))
    parser.add_argument("--compare", help="another corral's src directory, measured the same way")
    parser.add_argument("--scripts", type=int, default=10)
    parser.add_argument("--script-mb", type=int, default=60)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [measure(os.path.abspath(args.src), args)]
    if args.compare:
        results.append(measure(os.path.abspath(args.compare), args))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    keys = ["script_mb", "scripts", "rss_mb_after_scripts", "history_s", "health_worst_during_history_ms",
            "queue_bytes", "queue_lines", "queue_s", "array_ref_chars"]
    print(f"{'':32}" + "".join(f"{r['src'][-28:]:>30}" for r in results))
    for key in keys:
        print(f"{key:32}" + "".join(f"{r.get(key, '-')!s:>30}" for r in results))


if __name__ == "__main__":
    main()
