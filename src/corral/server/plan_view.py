"""The plan: each GPU's timeline as the last scheduling pass left it, for the dashboard's Plan page.

Running jobs hold their GPUs from their start to their time limit's end (or with no end); pending jobs
that hold a reservation take theirs from their estimated start for their time limit. A what-if is drawn
over it from a forecast (`POST /api/v1/forecast`). Reservations (`corral.core.scheduling.reservations`) are drawn as
bands over their GPUs and windows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corral.core.units.iso_times import iso_utc
from corral.core.jobspec.job import Job
from corral.core.scheduling.reservations import Reservation
from corral.core.scheduling.resources import Allocation, Node
from corral.core.jobspec.states import JobState


def plan_view(nodes: Sequence[Node], allocations: Mapping[int, Allocation], active: Mapping[int, Job],
              estimates: Mapping[int, float], reserved: Mapping[int, tuple[str, tuple[int, ...]]],
              now: float, reservations: Sequence[Reservation] = ()) -> dict[str, Any]:
    """`{now, nodes: [{name, cpus, gpus: [{index, type}]}], jobs: [{job_id, ref, name, user, kind, node, gpus,
    cpus, start, end}], reservations: [{name, node, gpus, users, accounts, start, end, state, ...}]}`: kind
    running or reserved; `end` null for no time limit."""
    rows: list[dict[str, Any]] = []
    for job_id, allocation in allocations.items():
        job = active.get(job_id)
        if job is None:
            continue
        rows.append(_row(job, "running", allocation.node, allocation.gpu_ids, job.start_time or now,
                         allocation.end_time))
    for job_id, start in estimates.items():
        job = active.get(job_id)
        placed = reserved.get(job_id)
        if job is None or placed is None or job.state is not JobState.PENDING:
            continue
        limit = job.spec.time_limit_s
        rows.append(_row(job, "reserved", placed[0], placed[1], start, start + limit if limit is not None else None))
    rows.sort(key=lambda row: (row["start"], row["job_id"]))
    return {"now": iso_utc(now), "nodes": [
        {"name": n.name, "cpus": n.cpus, "gpus": [{"index": g.index, "type": g.type, "mem_mb": g.mem_mb} for g in n.gpus]}
        for n in nodes], "jobs": rows, "reservations": [r.to_dict(now) for r in reservations]}


def _row(job: Job, kind: str, node: str, gpus: tuple[int, ...], start: float, end: float | None) -> dict[str, Any]:
    return {"job_id": job.id, "ref": job.ref, "name": job.spec.name, "user": job.spec.user, "kind": kind,
            "node": node, "gpus": list(gpus), "cpus": job.spec.cpus, "start": iso_utc(start), "end": iso_utc(end)}
