"""The nodes as the API and dashboard show them: GPUs, who holds each, what is allocated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from corral.core.job import Job
from corral.core.resources import Allocation, Node


def nodes_view(nodes: Sequence[Node], allocations: Iterable[Allocation], active: Mapping[int, Job], *,
               isolation: tuple[str, str], allocates: bool) -> list[dict[str, Any]]:
    """Each node with its CPUs, memory and GPUs, what is allocated of them and to which job.

    Args:
        allocates: corral holds the allocations (False where the backend schedules itself: the
            nodes are shown as the cluster declared them).
    """
    allocations = list(allocations)
    if not allocates:
        return [{"name": n.name, "cpus": n.cpus, "cpus_alloc": 0, "mem_mb": n.mem_mb, "mem_alloc_mb": 0,
                 "gpus": [{"index": g.index, "type": g.type, "mem_mb": g.mem_mb, "capability": g.capability,
                           "job_id": None, "job_ref": None, "job_name": None,
                           "user": None} for g in n.gpus]} for n in nodes]
    holders = {(a.node, g): active.get(a.job_id) for a in allocations for g in a.gpu_ids}
    out = []
    for node in nodes:
        held = [a for a in allocations if a.node == node.name]
        gpus = []
        for gpu in node.gpus:
            job = holders.get((node.name, gpu.index))
            gpus.append({
                "index": gpu.index, "type": gpu.type, "mem_mb": gpu.mem_mb, "uuid": gpu.uuid,
                "capability": gpu.capability, "device_name": gpu.device_name,
                "job_id": job.id if job else None, "job_ref": job.ref if job else None,
                "job_name": job.spec.name if job else None,
                "user": job.spec.user if job else None,
            })
        out.append({
            "name": node.name, "arch": node.arch, "cpus": node.cpus, "cpus_alloc": sum(a.cpus for a in held),
            "mem_mb": node.mem_mb, "mem_alloc_mb": sum(a.mem_mb for a in held), "gpus": gpus,
            "isolation": isolation[0], "isolation_detail": isolation[1],
        })
    return out
