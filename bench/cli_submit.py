#!/usr/bin/env python3
"""One `corral submit` CLI call, end to end: process start to exit.

    .venv/bin/python bench/cli_submit.py [--samples 30] [--warmup 2] [--json [PATH]]

Starts a server with one declared GPU in a fresh temporary home, submits a
blocker job that holds the GPU, then times --samples runs of

    <venv>/bin/corral --home HOME submit --gpus 1 --parsable -- true

with subprocess.run (fork/exec, the interpreter's start-up, imports, option
parsing, one HTTP round trip, exit). The submitted jobs stay PENDING behind the
blocker, so no job process competes for the CPUs. Floor: median 100 ms.

To show where the time goes it also times, the same way,
    python -c pass         the venv's interpreter start-up (site, .pth files)
    corral --version       the CLI's imports and click, no HTTP
and runs one submit under `python -X importtime` to list the costliest imports.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    CORRAL, Http, Server, add_common_args, emit, log, median, percentile, verdict, wait_state,
)

FLOOR_MEDIAN_MS = 100.0


_deadline = float("inf")


def _time_runs(argv: list[str], n: int, warmup: int, env: dict[str, str], check_output: bool = False) -> list[float]:
    out: list[float] = []
    for i in range(warmup + n):
        if time.monotonic() > _deadline:
            raise RuntimeError(f"out of time after {len(out)} runs of {argv[0]}")
        t0 = time.perf_counter()
        proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0:
            stderr = proc.stderr.decode(errors="replace")[-500:]
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {stderr}")
        if check_output and not proc.stdout.strip().isdigit():
            raise RuntimeError(f"expected a job id from --parsable, got {proc.stdout!r}")
        if i >= warmup:
            out.append(elapsed * 1e3)
    return out


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": median(values), "p90": percentile(values, 90), "min": min(values), "max": max(values)}


def _importtime(argv: list[str], env: dict[str, str], top: int) -> dict[str, Any]:
    """Run once under -X importtime; the costliest imports by cumulative time (top level and any level)."""
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"importtime run exited {proc.returncode}: {proc.stderr[-500:]}")
    rows: list[dict[str, Any]] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line[len("import time:"):].split("|")
        self_us, cum_us, raw = int(parts[0]), int(parts[1]), parts[2]
        depth = (len(raw) - len(raw.lstrip(" ")) - 1) // 2
        rows.append({"module": raw.strip(), "self_ms": self_us / 1e3, "cumulative_ms": cum_us / 1e3, "depth": depth})
    shallow = sorted((r for r in rows if r["depth"] <= 2), key=lambda r: -r["cumulative_ms"])
    by_self = sorted(rows, key=lambda r: -r["self_ms"])
    return {
        "total_ms": sum(r["self_ms"] for r in rows),
        "modules": len(rows),
        "by_cumulative_depth_le_2": shallow[:top],
        "by_self": by_self[:top],
        "cumulative_of": {r["module"]: r["cumulative_ms"] for r in rows
                          if r["module"] in ("click", "importlib.metadata", "corral.client", "corral.cli.main",
                                             "http.client", "json", "site", "typing", "corral")},
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    global _deadline
    _deadline = time.monotonic() + args.timeout
    with Server(gpus=1, keep_home=args.keep_home, profile=args.profile) as server:
        http = Http(server.url)
        blocker = http.call("POST", "/api/v1/jobs", {"command": ["sleep", "600"], "gpus": 1, "workdir": server.home,
                                                     "name": "blocker"})
        wait_state(http, blocker["id"], {"RUNNING"}, timeout=30)
        http.close()
        env = server.env()
        submit = [CORRAL, "--home", server.home, "submit", "--gpus", "1", "--parsable", "--", "true"]
        log(f"timing {args.samples} x: {' '.join(submit)}")
        cli = _time_runs(submit, args.samples, args.warmup, env, check_output=True)
        log("timing baselines: python -c pass, corral --version")
        python_pass = _time_runs([sys.executable, "-c", "pass"], args.baseline_samples, 1, env)
        version = _time_runs([CORRAL, "--version"], args.baseline_samples, 1, env)
        imports = _importtime([sys.executable, "-X", "importtime", "-m", "corral.cli", "--home", server.home, "submit",
                               "--gpus", "1", "--parsable", "--", "true"], env, args.top)
    return {
        "benchmark": "cli_submit",
        "command": "corral --home HOME submit --gpus 1 --parsable -- true",
        "samples": len(cli),
        "warmup": args.warmup,
        "cli_submit_ms": _stats(cli),
        "python_startup_ms": _stats(python_pass),
        "corral_version_ms": _stats(version),
        "imports": imports,
        "floor_median_ms": FLOOR_MEDIAN_MS,
        "verdict": verdict(median(cli), FLOOR_MEDIAN_MS, higher_is_better=False),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=30, help="Timed submits (default 30).")
    parser.add_argument("--warmup", type=int, default=2, help="Submits run first and not counted (default 2).")
    parser.add_argument("--baseline-samples", type=int, default=10, help="Runs of each baseline (default 10).")
    parser.add_argument("--timeout", type=float, default=300.0, help="Give up after this many seconds (default 300).")
    parser.add_argument("--top", type=int, default=14, help="Imports to list (default 10).")
    add_common_args(parser)
    args = parser.parse_args()
    if args.samples < 1 or args.baseline_samples < 1 or args.warmup < 0:
        parser.error("--samples and --baseline-samples must be at least 1, --warmup not negative")
    r = run(args)

    def row(label: str, f: dict[str, float], note: str = "") -> tuple[str, str, str]:
        return (label, f"median {f['median']:7.2f}  p90 {f['p90']:7.2f}  min {f['min']:7.2f}", f"ms{note}")

    imp = r["imports"]
    lines = [
        ("benchmark", "cli_submit", ""),
        ("samples", r["samples"], f"(+{r['warmup']} warm-up) of: {r['command']}"),
        row("corral submit", r["cli_submit_ms"], "  (process start -> exit)"),
        row("python -c pass", r["python_startup_ms"], "  (interpreter start-up)"),
        row("corral --version", r["corral_version_ms"], "  (start-up + CLI imports, no HTTP)"),
        ("imports (submit)", f"{imp['total_ms']:.1f} ms self time over {imp['modules']} modules", "(-X importtime)"),
    ]
    for m in imp["by_cumulative_depth_le_2"]:
        indent = "  " * m["depth"]
        lines.append(("  heaviest imports", f"{m['cumulative_ms']:7.2f} ms cumulative  {indent}{m['module']}", ""))
    for m in imp["by_self"][:5]:
        lines.append(("  costliest self time", f"{m['self_ms']:7.2f} ms  {m['module']}", ""))
    lines += [
        ("floor", f"median {r['floor_median_ms']:.0f}", "ms"),
        ("verdict", r["verdict"], ""),
    ]
    emit(r, lines, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
