#!/usr/bin/env python3
"""One scheduling pass (prioritize + schedule) on a large simulated cluster, in-process.

    .venv/bin/python bench/schedule_pass.py [--runs 5] [--warmup 1] [--seed 1] [--pending 10000 100000] [--topology]
                                            [--share F] [--reservations N] [--gpu-features] [--json [PATH]]
                                            [--profile PREFIX]

No server: it builds a snapshot and times the two pure functions the server's
scheduling loop calls on it, `corral.core.scheduling.priority.prioritize` (the queue's order)
and `corral.core.scheduling.policy.schedule` (starts, pending reasons, reservations).

The cluster: 1,000 nodes of 8 A100 80G GPUs, 64 CPUs and 512G each; 5,000 running
jobs of 1, 2, 4 or 8 GPUs placed on random nodes without over-allocating anything
(about 95% of the GPUs busy; with --topology the GPUs of each node are linked as
on an HGX board, two NVLink groups of four, and chosen by closeness), each with a remaining time limit between 5 minutes
and a day; 50 users with decayed usage (a few with more shares); partitions gpu
(default, up to 2 days), short (up to 4 h, higher priority factor), debug (up to
30 min, a higher tier) and long (no limit); QoS normal, high (at most 32 GPUs per
user) and low (at most 20 running jobs per user); backfill depth 100. The pending
queue mixes sizes, time limits (a few without one), users, partitions and QoS, a
few held jobs, a few over their partition's limit and a few that no node can run.
Everything is drawn from a seeded RNG, so a run is reproducible: the decisions'
digest printed at the end changes only when the decisions do.

A pass is timed from the queue as the server holds it (in id order, which is
submit order) to the decisions; the snapshot is built beforehand. The figure is the
median of --runs passes after --warmup ones, each after a full garbage collection
(the collector stays on: collections a pass triggers are part of its cost).
With --share F, that share of the running 1-GPU jobs hold 20 GB of their GPU instead of all of it, and that
share of the pending 1-GPU jobs ask for 10, 20 or 40 GB of one (`--gpu-mem SIZE --gpu-share`,
`corral.core.scheduling.sharing`). With --reservations N, N reservations of 2 GPUs (`corral.core.scheduling.reservations`) on random
nodes, half of them in their window now and half beginning within 6 hours, each for 4 hours, keep their GPUs
for one user, who has 4 jobs waiting in each. --gpu-features is all of it at once: --topology --share 0.1
--reservations 50, what a shared box's scheduler holds (the issue's "shards, reservations and topology in play").

Floors: 100 ms with 10,000 pending jobs, 1 s with 100,000. A smaller queue is held to the
floor of the next size up (a pass over this cluster costs about as much with 1,000 pending
jobs as with 10,000: the running jobs and the nodes dominate); a larger one to 1 s per
100,000 pending jobs.
"""

from __future__ import annotations

import argparse
import dataclasses
import cProfile
import gc
import hashlib
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit, log, median, verdict  # noqa: E402

from corral.core.scheduling.policy import Decisions, PendingJob, schedule  # noqa: E402
from corral.core.scheduling.priority import prioritize  # noqa: E402
from corral.core.scheduling.resources import Allocation, Gpu, Node  # noqa: E402
from corral.core.jobspec.request import Request
from corral.core.scheduling.schedconfig import Partition, Qos, SchedulerConfig  # noqa: E402
from corral.core.scheduling.reservations import Reservation, ReservationBook  # noqa: E402
from corral.core.scheduling.topology import build_topology  # noqa: E402

# Two NVLink groups of four GPUs, a PCIe switch for each two, one socket for each group (--topology).
HGX_LINKS = build_topology(
    range(8), nvlink=[(a, b) for group in (range(4), range(4, 8)) for a in group for b in group if a < b],
    pcie={**{(a, a + 1): "PIX" for a in (0, 2, 4, 6)}, (0, 2): "NODE", (4, 6): "NODE"})
FLOORS_MS = {10_000: 100.0, 100_000: 1000.0}
NODES = 1_000
RUNNING = 5_000
USERS = 50
G = 1024
NOW = 1_800_000_000.0
HOUR = 3600

CONFIG = SchedulerConfig(
    shares={"user00": 4, "user01": 2, "user02": 2},
    partitions={
        "gpu": Partition("gpu", max_time_s=2 * 86400),
        "short": Partition("short", max_time_s=4 * HOUR, priority_factor=2),
        "debug": Partition("debug", max_time_s=30 * 60, tier=2),
        "long": Partition("long"),
    },
    default_partition="gpu",
    qos={
        "normal": Qos("normal", priority=10),
        "high": Qos("high", priority=100, max_gpus_per_user=32),
        "low": Qos("low", priority=0, max_running_per_user=20),
    },
    default_qos="normal",
)


@dataclass
class Snapshot:
    nodes: list[Node]
    running: list[Allocation]
    pending: list[PendingJob]
    usage: dict[str, float]
    total_gpus: int
    total_cpus: int
    reservations: ReservationBook | None = None


def _user(rng: random.Random) -> str:
    """A few users submit most of the work (roughly Zipf)."""
    return f"user{min(USERS - 1, int(rng.paretovariate(1.2)) - 1):02d}"


def _qos(rng: random.Random) -> str:
    return rng.choices(("normal", "high", "low"), (80, 10, 10))[0]


def build(pending_count: int, seed: int, topology: bool = False) -> Snapshot:
    rng = random.Random(seed)
    links = HGX_LINKS if topology else None
    nodes = [
        Node(f"gpu{n:04d}", cpus=64, mem_mb=512 * G, gpus=tuple(Gpu(i, "A100", 80 * G) for i in range(8)),
             topology=links)
        for n in range(NODES)
    ]
    # Running jobs, placed on random nodes with room; a size that fits nowhere tried is drawn again smaller.
    free_gpus = [set(range(8)) for _ in nodes]
    free_cpus = [node.cpus for node in nodes]
    free_mem = [node.mem_mb for node in nodes]
    running: list[Allocation] = []
    job_id = 1
    while len(running) < RUNNING:
        gpus = rng.choices((1, 2, 4, 8), (74, 16, 7, 3))[0]
        cpus, mem = gpus * rng.choice((4, 6, 8)), gpus * rng.choice((32, 48, 64)) * G
        for _ in range(50):
            k = rng.randrange(NODES)
            if len(free_gpus[k]) >= gpus and free_cpus[k] >= cpus and free_mem[k] >= mem:
                break
        else:
            continue
        taken = tuple(sorted(rng.sample(sorted(free_gpus[k]), gpus)))
        free_gpus[k] -= set(taken)
        free_cpus[k] -= cpus
        free_mem[k] -= mem
        left = int(2 ** rng.uniform(9.2, 16.4))  # ~5 min .. ~24 h, log-uniform
        running.append(Allocation(job_id, nodes[k].name, taken, cpus, mem, _user(rng), _qos(rng), NOW + left))
        job_id += 1
    usage = {f"user{u:02d}": rng.lognormvariate(5.0, 1.5) for u in range(USERS) if rng.random() < 0.9}
    # Ids in submit order, the queue in id order: as the server holds and hands it over.
    submitted = sorted(NOW - rng.uniform(0, 3 * 86400) for _ in range(pending_count))
    pending = [_pending_job(rng, job_id + k, at) for k, at in enumerate(submitted)]
    return Snapshot(nodes, running, pending, usage, sum(len(n.gpus) for n in nodes), sum(n.cpus for n in nodes))


def with_sharing(s: Snapshot, share: float, seed: int) -> Snapshot:
    """`share` of the running and of the pending 1-GPU jobs share a GPU (--share)."""
    rng = random.Random(seed + 1)
    running = [dataclasses.replace(a, gpu_share_mb=20 * G) if len(a.gpu_ids) == 1 and rng.random() < share else a
               for a in s.running]
    pending = [dataclasses.replace(p, request=dataclasses.replace(p.request, gpu_share_mb=rng.choice((10, 20, 40)) * G))
               if p.request.gpus == 1 and rng.random() < share else p for p in s.pending]
    return dataclasses.replace(s, running=running, pending=pending)


def with_reservations(s: Snapshot, count: int, seed: int) -> Snapshot:
    """`count` reservations of 2 GPUs free at their start, and 4 jobs waiting in each (--reservations)."""
    rng = random.Random(seed + 2)
    by_node: dict[str, list[Allocation]] = {}
    for alloc in s.running:
        by_node.setdefault(alloc.node, []).append(alloc)
    reservations: list[Reservation] = []
    pending = list(s.pending)
    job_id = max(j.job_id for j in pending) + 1 if pending else 10**7
    for node in rng.sample(s.nodes, len(s.nodes)):
        if len(reservations) == count:
            break
        start = NOW if len(reservations) % 2 == 0 else NOW + rng.randint(10 * 60, 6 * HOUR)
        held = {i for a in by_node.get(node.name, ()) if a.end_time is None or a.end_time > start for i in a.gpu_ids}
        free = [g.index for g in node.gpus if g.index not in held]
        if len(free) < 2:
            continue
        user = _user(rng)
        name = f"resv{len(reservations):02d}"
        reservations.append(Reservation(name, node.name, tuple(free[:2]), 16, 128 * G, (user,), (), start,
                                        start + 4 * HOUR, "root", NOW - HOUR))
        for _ in range(4):
            pending.append(PendingJob(job_id, Request(gpus=1, cpus=8, mem_mb=64 * G), user=user, partition="gpu",
                                      qos="normal", time_limit_s=rng.randint(10 * 60, 3 * HOUR),
                                      submit_time=NOW - rng.uniform(0, 86400), reservation=name))
            job_id += 1
    return dataclasses.replace(s, pending=pending, reservations=ReservationBook({r.name: r for r in reservations}))


def _pending_job(rng: random.Random, job_id: int, submit_time: float) -> PendingJob:
    partition = rng.choices(("gpu", "short", "debug", "long"), (60, 25, 10, 5))[0]
    if rng.random() < 0.02:
        request = Request(gpus=0, cpus=rng.choice((2, 4, 8, 16)), mem_mb=rng.choice((8, 16, 32)) * G)
    else:
        gpus = rng.choices((1, 2, 4, 8), (50, 25, 15, 10))[0]
        if rng.random() < 0.001:
            gpus = 16  # no node has 16 GPUs: BadConstraints
        gpu_type, gpu_mem = None, None
        if rng.random() < 0.1:
            gpu_type = rng.choice(("A100", "a100"))
        if rng.random() < 0.05:
            gpu_mem = rng.choice((40, 80)) * G
        request = Request(gpus=gpus, gpu_type=gpu_type, gpu_mem_mb=gpu_mem, cpus=gpus * rng.choice((2, 4, 8)),
                          mem_mb=gpus * rng.choice((16, 32, 64)) * G)
    limits = {"gpu": (10 * 60, 2 * 86400), "short": (5 * 60, 4 * HOUR), "debug": (60, 30 * 60),
              "long": (HOUR, 7 * 86400)}[partition]
    limit: int | None = rng.randint(*limits)
    if partition == "long" and rng.random() < 0.3:
        limit = None
    elif rng.random() < 0.005:
        limit = limits[1] * 2  # over the partition's limit
    return PendingJob(
        job_id, request, user=_user(rng), partition=partition, qos=_qos(rng), time_limit_s=limit,
        held=rng.random() < 0.01, submit_time=submit_time,
        nice=100 if rng.random() < 0.02 else 0,
    )


def floor_ms(pending_count: int) -> float:
    """The floor for a queue of `pending_count` jobs: that of the smallest size with one at least as
    large, or past the largest, its floor scaled by the queue's size."""
    sizes = sorted(FLOORS_MS)
    at_least = [size for size in sizes if size >= pending_count]
    if at_least:
        return FLOORS_MS[at_least[0]]
    return FLOORS_MS[sizes[-1]] * pending_count / sizes[-1]


def one_pass(s: Snapshot) -> tuple[list[PendingJob], Decisions, float, float]:
    t0 = time.perf_counter()
    ordered, _ = prioritize(s.pending, usage=s.usage, config=CONFIG, now=NOW, total_gpus=s.total_gpus,
                            total_cpus=s.total_cpus)
    t1 = time.perf_counter()
    decisions = schedule(s.nodes, s.running, ordered, NOW, CONFIG, reservations=s.reservations)
    t2 = time.perf_counter()
    return ordered, decisions, t1 - t0, t2 - t1


def digest(ordered: list[PendingJob], d: Decisions) -> str:
    """A fingerprint of the order and every decision: equal digests, equal behaviour."""
    h = hashlib.sha256()
    h.update(repr([j.job_id for j in ordered]).encode())
    h.update(repr([(a.job_id, a.node, a.gpu_ids, a.cpus, a.mem_mb, a.user, a.qos, a.end_time) for a in d.starts]).encode())
    h.update(repr(sorted((k, v.value) for k, v in d.reasons.items())).encode())
    h.update(repr(sorted(d.estimates.items())).encode())
    return h.hexdigest()[:16]


def scenario(pending_count: int, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    s = build(pending_count, args.seed, args.topology)
    if args.share:
        s = with_sharing(s, args.share, args.seed)
    if args.reservations:
        s = with_reservations(s, args.reservations, args.seed)
    log(f"{pending_count:,} pending: snapshot built in {time.perf_counter() - t0:.1f} s")
    totals, prio, sched = [], [], []
    first: str | None = None
    result: tuple[list[PendingJob], Decisions] | None = None
    for i in range(args.warmup + args.runs):
        gc.collect()
        ordered, decisions, tp, ts = one_pass(s)
        fp = digest(ordered, decisions)
        if first is None:
            first, result = fp, (ordered, decisions)
        elif fp != first:
            raise RuntimeError(f"pass {i} decided differently from the first ({fp} != {first})")
        if i >= args.warmup:
            totals.append((tp + ts) * 1e3)
            prio.append(tp * 1e3)
            sched.append(ts * 1e3)
    if args.profile:
        path = f"{args.profile}.{pending_count}.prof"
        profiler = cProfile.Profile()
        profiler.runcall(one_pass, s)
        profiler.dump_stats(path)
        log(f"profile of one pass written to {path}")
    assert result is not None
    ordered, decisions = result
    in_reservations = {j.job_id for j in s.pending if j.reservation is not None}
    reasons: dict[str, int] = {}
    for reason in decisions.reasons.values():
        reasons[reason.value] = reasons.get(reason.value, 0) + 1
    floor = floor_ms(pending_count)
    total = median(totals)
    return {
        "pending": pending_count,
        "nodes": len(s.nodes),
        "gpus": s.total_gpus,
        "running": len(s.running),
        "busy_gpus": sum(len(a.gpu_ids) for a in s.running),
        "pass_ms": {"median": total, "min": min(totals), "max": max(totals)},
        "prioritize_ms": median(prio),
        "schedule_ms": median(sched),
        "started": len(decisions.starts),
        "started_sharing": sum(1 for a in decisions.starts if a.gpu_share_mb),
        "started_in_reservations": sum(1 for a in decisions.starts if a.job_id in in_reservations),
        "started_gpus": sum(len(a.gpu_ids) for a in decisions.starts),
        "reservations": len(decisions.estimates),
        "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "digest": first,
        "floor_ms": floor,
        "verdict": verdict(total, floor, higher_is_better=False),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="Measured passes per scenario (default 5).")
    parser.add_argument("--warmup", type=int, default=1, help="Passes run first and not counted (default 1).")
    parser.add_argument("--seed", type=int, default=1, help="Seed of the simulated cluster and queue (default 1).")
    parser.add_argument("--pending", type=int, nargs="+", default=list(FLOORS_MS),
                        help="Queue sizes, one scenario each (default 10000 100000).")
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH",
                        help="Print the figures as one JSON document instead of lines (--json), "
                             "or also write them to PATH (--json PATH).")
    parser.add_argument("--topology", action="store_true",
                        help="Give every node GPU links (two NVLink groups of 4, PCIe switches of 2, two sockets), "
                             "so GPUs are chosen by closeness (corral.core.scheduling.topology).")
    parser.add_argument("--share", type=float, default=0.0, metavar="F",
                        help="Share of the running and pending 1-GPU jobs that share a GPU (default 0).")
    parser.add_argument("--reservations", type=int, default=0, metavar="N",
                        help="Reservations of 2 GPUs, with 4 jobs waiting in each (default 0).")
    parser.add_argument("--gpu-features", action="store_true",
                        help="All of a shared box at once: --topology --share 0.1 --reservations 50.")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="Also run one pass of each scenario under cProfile, written to PREFIX.<pending>.prof.")
    args = parser.parse_args()
    if args.gpu_features:
        args.topology, args.share, args.reservations = True, args.share or 0.1, args.reservations or 50
    if args.runs < 1 or args.warmup < 0 or any(n < 0 for n in args.pending):
        parser.error("--runs must be at least 1, --warmup and --pending not negative")
    results = [scenario(n, args) for n in args.pending]
    lines: list[tuple[str, Any, str]] = [("benchmark", "schedule_pass", ""), ("seed", args.seed, "")]
    for r in results:
        p = r["pass_ms"]
        lines += [
            (f"[{r['pending']:,} pending]", f"{r['nodes']:,} nodes, {r['gpus']:,} GPUs ({r['busy_gpus']:,} busy), "
             f"{r['running']:,} running", ""),
            ("  pass", f"median {p['median']:8.2f}  min {p['min']:8.2f}  max {p['max']:8.2f}",
             f"ms  ({args.runs} runs, +{args.warmup} warm-up)"),
            ("    prioritize", f"median {r['prioritize_ms']:8.2f}", "ms"),
            ("    schedule", f"median {r['schedule_ms']:8.2f}", "ms"),
            ("  started", f"{r['started']:,} jobs", f"({r['started_gpus']:,} GPUs; {r['started_sharing']} sharing a GPU, "
             f"{r['started_in_reservations']} in reservations)"),
            ("  reservations", f"{r['reservations']:,} jobs", "(with an estimated start)"),
            ("  reasons", ", ".join(f"{k} {v:,}" for k, v in r["reasons"].items()), ""),
            ("  digest", r["digest"], "(same seed, same decisions: same digest)"),
            ("  floor", f"median {r['floor_ms']:.0f}", "ms"),
            ("  verdict", r["verdict"], ""),
        ]
    emit({"benchmark": "schedule_pass", "seed": args.seed, "topology": args.topology, "share": args.share,
          "reservations": args.reservations, "runs": args.runs, "warmup": args.warmup,
          "scenarios": results}, lines, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
