"""Time ddp_cnn.py under torchrun with 1, 2 and 4 processes and print speedup and efficiency.

    python examples/ddp_speedup.py                         # --procs 1,2,4
    python examples/ddp_speedup.py --procs 1,2 -- --epochs 1 --samples 1024
    corral submit --cpus 4 -- python examples/ddp_speedup.py

Arguments after `--` go to ddp_cnn.py. Each world size is a run of its own in corral (ddp-np1,
ddp-np2, ...). Speedup is T(1)/T(N) for the same total work; efficiency is speedup / N.
This script imports no torch: it only starts torchrun and reads the RESULT lines.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import TextIO

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", default="1,2,4", help="comma-separated process counts")
    parser.add_argument("--script", default=os.path.join(HERE, "ddp_cnn.py"))
    parser.add_argument("--name-prefix", default="ddp-np", help="runs are named PREFIX<processes>")
    args = parser.parse_args(argv[:split])
    args.procs = [int(p) for p in args.procs.split(",") if p.strip()]
    if not args.procs or min(args.procs) < 1:
        parser.error("--procs takes positive process counts, e.g. 1,2,4")
    return args, argv[split + 1:]


def available_cpus() -> int:
    """The cores this job may use: its corral allocation, but never more than the machine lets it run on."""
    cores = len(os.sched_getaffinity(0))
    return min(int(os.environ.get("CORRAL_CPUS", 0)) or cores, cores)


def run_world(procs: int, script: str, name: str, extra: list[str], out: TextIO) -> dict[str, str]:
    """Run one torchrun, echoing its output; returns the fields of its RESULT line."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={procs}",
               script, "--name", name, *extra]
    print(f"$ {' '.join(command)}", file=out, flush=True)
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    result: dict[str, str] = {}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(f"  [np={procs}] {line}")
            if line.startswith("RESULT "):
                result = dict(field.split("=", 1) for field in line.split()[1:])
    if proc.returncode != 0 or not result:
        raise SystemExit(f"torchrun with {procs} processes failed (exit {proc.returncode})")
    return result


def table(results: dict[int, dict[str, str]]) -> str:
    base = float(results[min(results)]["train_time_s"]) * min(results)  # normally the 1-process time
    lines = [f"{'procs':>5}  {'train time (s)':>14}  {'samples/s':>10}  {'speedup':>8}  {'efficiency':>10}  {'val acc':>7}"]
    for procs, r in sorted(results.items()):
        seconds = float(r["train_time_s"])
        speedup = base / seconds
        lines.append(f"{procs:>5}  {seconds:>14.2f}  {float(r['samples_per_s']):>10.0f}  {speedup:>7.2f}x"
                     f"  {100 * speedup / procs:>9.0f}%  {float(r['val_acc']):>7.3f}")
    return "\n".join(lines)


def notes(results: dict[int, dict[str, str]], cpus: int, gpus: bool) -> list[str]:
    """Say why scaling falls short where it does, rather than leave a bare number."""
    out = []
    times = {procs: float(r["train_time_s"]) for procs, r in results.items()}
    base_procs = min(times)
    if base_procs != 1:
        out.append(f"no 1-process run: speedups are against {base_procs} processes, assuming those scaled perfectly")
    if not gpus:
        out.append(f"CPU run on {cpus} cores: one process runs {cpus} intra-op threads, N processes max(1, {cpus}//N) "
                   "threads each, so the table compares data parallelism with threading on the same cores.")
    for procs in sorted(times):
        if procs == base_procs:
            continue
        fewer = min((p for p in times if p < procs), key=lambda p: times[p])  # the fastest smaller world
        if times[base_procs] / times[procs] > 1.1 * procs / base_procs:
            out.append(f"{procs} processes scale better than linearly: the baseline was probably slowed by a busy "
                       "machine or by start-up costs a short run cannot hide; rerun with more --epochs.")
        elif not gpus and procs > cpus:
            verdict = (f"hence slower than {fewer} ({times[fewer]:.2f} s)." if times[procs] > times[fewer]
                       else f"yet not slower than {fewer} here.")
            out.append(f"{procs} processes on {cpus} cores: oversubscribed, so the processes are time-sliced and "
                       f"each step's gradient all-reduce waits for whichever the OS descheduled; {verdict}")
        elif times[procs] > times[fewer]:
            out.append(f"{procs} processes are slower than {fewer}: each step all-reduces every gradient "
                       f"({'NCCL' if gpus else 'gloo'}) and synchronises the processes, which costs more than the "
                       "compute saved at this model and batch size; larger per-process batches or a bigger model "
                       "amortise it.")
        elif times[base_procs] / times[procs] < 0.7 * procs / base_procs:
            out.append(f"{procs} processes scale below 70% efficiency: the per-step gradient all-reduce and the "
                       "smaller per-process batch (less work per synchronisation) eat into the gain.")
    return out


def main(argv: list[str] | None = None) -> None:
    args, extra = parse_args(argv)
    results = {}
    for procs in args.procs:
        results[procs] = run_world(procs, args.script, f"{args.name_prefix}{procs}", extra, sys.stdout)
    gpus = any(r.get("backend") == "nccl" for r in results.values())
    print()
    print(table(results))
    for note in notes(results, available_cpus(), gpus):
        print(f"note: {note}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
