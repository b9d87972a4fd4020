#!/usr/bin/env python3
"""Each everyday CLI call, process start to exit, beside the interpreter's own start.

    .venv/bin/python bench/cli_calls.py [--samples 20] [--warmup 2] [--json [PATH]]

Starts a server with two declared GPUs in a fresh temporary home and times, with subprocess.run,

    corral submit --parsable --hold -- true      sbatch --parsable -H --wrap true
    corral queue                                 squeue
    corral show ID                               sacct
    corral cancel ID                             scontrol show job ID
    corral logs ID                               scancel ID
    corral --version

(the Slurm commands are corral's, from `corral slurm-path`), each run followed by one of
`python -c pass` (A B A B ...): the ratio is taken pair by pair, so a machine whose speed drifts moves
both sides of a pair alike, and the median of the ratios is the figure. Floor: 2.0 for every command.
Submits are held (nothing runs beside the timing), each cancel cancels a held job of its own.

Where a real Slurm answers (`scontrol ping`), its `sbatch --parsable -H --wrap true` and `squeue` are
timed the same way, for comparison (no floor); the jobs submitted there, under a name of this run's own, are
cancelled at the end (no other job of the uid).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import CORRAL, Server, add_common_args, emit, log, median, percentile, verdict  # noqa: E402

FLOOR_RATIO = 2.0
_deadline = float("inf")


def _once(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    if time.monotonic() > _deadline:
        raise RuntimeError(f"out of time at {' '.join(argv)}")
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    elapsed = (time.perf_counter() - t0) * 1e3
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace")[-500:]
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {stderr}")
    return elapsed, proc


def _paired(argvs: list[list[str]], n: int, warmup: int, env: dict[str, str]) -> dict[str, Any]:
    """Run argvs[i] (one command line per run: each cancel its own job) and `python -c pass` in turn."""
    baseline = [sys.executable, "-c", "pass"]
    ms, base_ms, ratios = [], [], []
    for i in range(warmup + n):
        a, _ = _once(argvs[i % len(argvs)], env)
        b, _ = _once(baseline, env)
        if i >= warmup:
            ms.append(a)
            base_ms.append(b)
            ratios.append(a / b)
    return {"median_ms": median(ms), "p90_ms": percentile(ms, 90), "min_ms": min(ms),
            "python_pass_median_ms": median(base_ms), "ratio_median": median(ratios),
            "ratio_p90": percentile(ratios, 90)}


def _slurm_answers() -> bool:
    if not (os.path.exists("/usr/bin/sbatch") and shutil.which("scontrol")):
        return False
    try:
        return subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=10).stdout.count("UP") > 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def run(args: argparse.Namespace) -> dict[str, Any]:
    global _deadline
    _deadline = time.monotonic() + args.timeout
    n, warmup = args.samples, args.warmup
    with Server(gpus=2, keep_home=args.keep_home) as server:
        env = server.env()
        home = ["--home", server.home]

        def corral(*argv: str) -> str:
            return _once([CORRAL, *home, *argv], env)[1].stdout.decode().strip()

        job = corral("submit", "--parsable", "--hold", "--", "sh", "-c", "echo hello")
        held = [corral("submit", "--parsable", "--hold", "--", "true") for _ in range(2 * (n + warmup))]
        slurm = corral("slurm-path")
        calls: list[tuple[str, list[list[str]]]] = [
            ("corral submit --parsable --hold -- true", [[CORRAL, *home, "submit", "--parsable", "--hold", "--", "true"]]),
            ("corral queue", [[CORRAL, *home, "queue"]]),
            ("corral show ID", [[CORRAL, *home, "show", job]]),
            ("corral cancel ID", [[CORRAL, *home, "cancel", j] for j in held[:n + warmup]]),
            ("corral logs ID", [[CORRAL, *home, "logs", job]]),
            ("corral --version", [[CORRAL, "--version"]]),
            ("sbatch --parsable -H --wrap true", [[f"{slurm}/sbatch", "--parsable", "-H", "--wrap", "true"]]),
            ("squeue", [[f"{slurm}/squeue"]]),
            ("sacct", [[f"{slurm}/sacct"]]),
            ("scontrol show job ID", [[f"{slurm}/scontrol", "show", "job", job]]),
            ("scancel ID", [[f"{slurm}/scancel", j] for j in held[n + warmup:]]),
        ]
        rows = []
        for name, argvs in calls:
            log(f"timing {n} x {name} beside python -c pass")
            row = {"command": name, **_paired(argvs, n, warmup, env)}
            row["verdict"] = verdict(row["ratio_median"], FLOOR_RATIO, higher_is_better=False)
            rows.append(row)
    real: list[dict[str, Any]] = []
    if _slurm_answers():
        plain_env = {k: v for k, v in os.environ.items() if not k.startswith("CORRAL_")}
        # A name of this run's own: the clean-up cancels the jobs it submitted, never another's held job of this uid
        mine = f"corral-bench-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            for name, argv in (("real sbatch --parsable -H --wrap true", ["/usr/bin/sbatch", "--parsable", "-H",
                                                                          f"--job-name={mine}", "--wrap", "true"]),
                               ("real squeue", ["/usr/bin/squeue"])):
                log(f"timing {n} x {name} beside python -c pass")
                real.append({"command": name, **_paired([argv], n, warmup, plain_env)})
        finally:
            subprocess.run(["/usr/bin/scancel", f"--name={mine}", f"--user={os.getuid()}"], capture_output=True)
    worst = max(rows, key=lambda r: r["ratio_median"])
    return {
        "benchmark": "cli_calls",
        "samples": n,
        "warmup": warmup,
        "commands": rows,
        "real_slurm": real,
        "worst": {"command": worst["command"], "ratio_median": worst["ratio_median"]},
        "floor_ratio": FLOOR_RATIO,
        "verdict": "PASS" if all(r["verdict"] == "PASS" for r in rows) else "MISS",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=20, help="Timed pairs per command (default 20).")
    parser.add_argument("--warmup", type=int, default=2, help="Pairs run first and not counted (default 2).")
    parser.add_argument("--timeout", type=float, default=600.0, help="Give up after this many seconds (default 600).")
    add_common_args(parser)
    args = parser.parse_args()
    if args.samples < 1 or args.warmup < 0:
        parser.error("--samples must be at least 1, --warmup not negative")
    r = run(args)
    width = max(len(row["command"]) for row in r["commands"] + r["real_slurm"])
    lines: list[tuple[str, Any, str]] = [("benchmark", "cli_calls", f"({r['samples']} pairs + {r['warmup']} warm-up each)"),
                                         ("command".ljust(width), "median ms  python -c pass ms  ratio (median of pairs)", "")]
    for row in r["commands"] + r["real_slurm"]:
        mark = f"  {row['verdict']}" if "verdict" in row else "  (real Slurm: no floor)"
        lines.append((row["command"].ljust(width), f"{row['median_ms']:9.1f}  {row['python_pass_median_ms']:17.1f}  "
                                                   f"{row['ratio_median']:6.2f}x", mark))
    lines += [("worst", f"{r['worst']['ratio_median']:.2f}x", f"({r['worst']['command']})"),
              ("floor", f"{r['floor_ratio']:.1f}x", "python -c pass, for every command"),
              ("verdict", r["verdict"], "")]
    emit(r, lines, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
