#!/usr/bin/env python3
"""What relaying a fast-writing job's output costs its supervisor (in-process, no server).

    .venv/bin/python bench/log_relay.py [--mb 1000] [--repeats 3] [--json [PATH]]

Where the server limits logs, a job's stdout and stderr are pipes, and its supervisor moves what comes
out into the log files (corral.executor.log_relay: os.splice, one call and an add per chunk). This runs
real supervisors (corral.executor.launch.spawn_supervisor) on jobs that write --mb MB to stdout as fast as
they can, each way in turn, --repeats rounds:

    direct    no limits: the job writes its log file itself (no relay; the supervisor only waits)
    relay     max_log_mb above what it writes: the relay splices pipe -> file
    append    the same with --open-mode=append: copied through a buffer (splice cannot append)
    quota     relay plus a per-user quota (user_log_quota_mb) the job stays under: leases from the ledger

for two writers: `dd bs=1M` (1 MiB writes) and `yes | head -c` (8 KiB writes through a pipe of its own).
Figures per way, median of the rounds: the job's write rate (MB/s, start to end of the job), and the
supervisor's own CPU seconds per GB written (its threads' user and system time, read from /proc as it
exits: its start-up and its wait included, its job not), and how much of it the kernel spent (moving the
bytes into the page cache, which the job pays itself when it writes its file directly). Floor: the relay adds ≤ 0.5 CPU-seconds per GB to the supervisor.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit, log, median, verdict  # noqa: E402

FLOOR_USER_S_PER_GB = 0.25
WRITERS = {"dd": "dd if=/dev/zero bs=1M count={mb} status=none",
           "yes": "yes 0123456789abcdefghijklmnopqrstuvwxyz 2>/dev/null | head -c {mb}M"}
WAYS = ("direct", "relay", "append", "quota")


def run_once(root: str, way: str, command: str, mb: int) -> dict[str, float]:
    """One job's figures (rates in MB/s, CPU in seconds per GB)."""
    from corral.executor import files
    from corral.executor.launch import spawn_supervisor
    from corral.executor.launch_config import LaunchConfig

    job_dir = tempfile.mkdtemp(dir=root)
    out = os.path.join(job_dir, "out.log")
    limits: dict[str, object] = {}
    if way != "direct":
        limits["max_log_mb"] = mb * 4
    if way == "append":
        limits["append_logs"] = True
    if way == "quota":
        limits["log_quota"] = {"ledger": os.path.join(root, "ledger"), "user": "bench", "quota_mb": mb * 4}
    config = LaunchConfig(argv=("sh", "-c", command), env=dict(os.environ), cwd=root, stdout=out, stderr=out,
                          job_ref=os.path.basename(job_dir), **limits)  # type: ignore[arg-type]
    child = spawn_supervisor(job_dir, config)
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie still shows its own CPU times
    with open(f"/proc/{child.pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    user_s, system_s = int(fields[11]) / tick, int(fields[12]) / tick  # its own threads', not its children's
    child.wait()
    result = files.read_json(os.path.join(job_dir, files.RESULT)) or {}
    started = files.read_json(os.path.join(job_dir, files.STARTED)) or {}
    if result.get("state") != "COMPLETED" or os.path.getsize(out) != mb << 20:
        raise SystemExit(f"{way}: the job ended {result.get('state')} with {os.path.getsize(out)} bytes: {result}")
    wall = float(result["end_time"]) - float(started["start_time"])
    shutil.rmtree(job_dir)
    gb = mb / 1024
    job_cpu = float((result.get("usage") or {}).get("cpu_time_s") or 0.0)
    return {"mb_s": mb / wall, "user_s_per_gb": user_s / gb, "kernel_s_per_gb": system_s / gb,
            "total_s_per_gb": (user_s + system_s + job_cpu) / gb}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=1000, help="What each job writes.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
    root = tempfile.mkdtemp(prefix="corral-bench-relay-", dir="/tmp")
    figures: dict[str, dict[str, dict[str, list[float]]]] = {}
    try:
        for writer, template in WRITERS.items():
            command = template.format(mb=args.mb)
            figures[writer] = {way: {} for way in WAYS}
            for round_ in range(args.repeats):
                for way in WAYS:  # in turn, so that the machine's load falls on each alike
                    log(f"{writer}, {way}, round {round_ + 1} of {args.repeats}: {args.mb} MB")
                    for key, value in run_once(root, way, command, args.mb).items():
                        figures[writer][way].setdefault(key, []).append(value)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines: list[tuple[str, object, str]] = []
    added = []
    for writer, ways in figures.items():
        base = {key: median(values) for key, values in ways["direct"].items()}
        for way, values in ways.items():
            m = {key: median(v) for key, v in values.items()}
            lines.append((f"{writer}, {way}: job writes", m["mb_s"], "MB/s"))
            lines.append((f"{writer}, {way}: supervisor CPU, user / kernel",
                          f"{m['user_s_per_gb']:.2f} / {m['kernel_s_per_gb']:.2f}", "s per GB"))
            lines.append((f"{writer}, {way}: job and supervisor together", m["total_s_per_gb"], "s per GB"))
            if way != "direct":
                added.append(m["user_s_per_gb"] - base["user_s_per_gb"])
    worst = max(added)
    result = {"mb": args.mb, "repeats": args.repeats, "figures": figures, "worst_added_user_s_per_gb": worst,
              "floor_user_s_per_gb": FLOOR_USER_S_PER_GB,
              "verdict": verdict(worst, FLOOR_USER_S_PER_GB, higher_is_better=False)}
    lines += [("the relay's own work (user CPU added), worst way", worst, "s per GB"),
              ("floor", f"≤ {FLOOR_USER_S_PER_GB}", "s per GB"), ("verdict", result["verdict"], "")]
    emit(result, lines, args.json)
    return 0 if result["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
