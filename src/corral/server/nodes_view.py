"""The nodes as the API and dashboard show them: GPUs, who holds each, what is allocated, what is drained,
what is in use outside corral."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from corral.core.scheduling.drains import Drain, gpu_state
from corral.core.jobspec.job import Job
from corral.core.monitoring.outside_use import OutsideProcess
from corral.core.scheduling.resources import Allocation, Gpu, Node
from corral.core.jobspec.arrays import format_ranges


def nodes_view(nodes: Sequence[Node], allocations: Iterable[Allocation], active: Mapping[int, Job], *,
               isolation: tuple[str, str], allocates: bool, drained: Mapping[str, Mapping[int, Drain]] | None = None,
               node_drains: Mapping[str, Drain] | None = None,
               outside: Mapping[str, Mapping[int, Sequence[OutsideProcess]]] | None = None,
               shards_per_gpu: int = 0, held_outside: Mapping[str, Mapping[int, int]] | None = None,
               health: Mapping[str, Mapping[int, Mapping[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """Each node with its CPUs, memory and GPUs, what is allocated of them and to which job.

    Args:
        allocates: corral holds the allocations (False where the backend schedules itself: the
            nodes are shown as the cluster declared them).
        drained: each node's drained GPUs and their drains; node_drains: the nodes drained as a whole.
            A drained node's `state` is "draining" while a job runs on it, "drained" after (Slurm's words);
            its `reason`, `reason_by` and `reason_at` say why, who and when (per GPU where only some are drained).
        outside: each node's GPUs in use outside corral and by which processes (each GPU's `outside`).
        shards_per_gpu: `[node] shards_per_gpu` (each node's `shards_per_gpu`, for Slurm's `Gres=gpu:4,shard:16`).
        held_outside: where sharing jobs may use a GPU in use outside corral, the megabytes held there.
        health: each node's GPUs' health as the monitor last read it (each GPU's `health`, `corral.server.gpu_health`).
    A GPU that sharing jobs use has `shared`: its jobs and their budgets, what is budgeted and what is free.
    """
    drained = drained or {}
    node_drains = node_drains or {}
    outside = outside or {}
    health = health or {}
    allocations = list(allocations)
    if not allocates:
        return [{"name": n.name, "cpus": n.cpus, "cpus_alloc": 0, "mem_mb": n.mem_mb, "mem_alloc_mb": 0,
                 "gpus": [{"index": g.index, "type": g.type, "mem_mb": g.mem_mb, "capability": g.capability,
                           "job_id": None, "job_ref": None, "job_name": None,
                           "user": None} for g in n.gpus]} for n in nodes]
    holders = {(a.node, g): active.get(a.job_id) for a in reversed(allocations) for g in a.gpu_ids}
    sharing = [a for a in allocations if a.gpu_share_mb]
    held_outside = held_outside or {}
    out = []
    for node in nodes:
        held = [a for a in allocations if a.node == node.name]
        gpus = []
        off = drained.get(node.name, {})
        foreign = outside.get(node.name, {})
        healths = health.get(node.name, {})
        for gpu in node.gpus:
            job = holders.get((node.name, gpu.index))
            drain = off.get(gpu.index)
            gpus.append({
                "index": gpu.index, "type": gpu.type, "mem_mb": gpu.mem_mb, "uuid": gpu.uuid,
                "capability": gpu.capability, "device_name": gpu.device_name,
                "parent": gpu.parent,  # a MIG slice's GPU (its NVML index); its type is then its profile
                "job_id": job.id if job else None, "job_ref": job.ref if job else None,
                "job_name": job.spec.name if job else None,
                "user": job.spec.user if job else None,
                "drained": drain.to_dict() if drain else None,
                "drain_state": gpu_state(drain is not None, job is not None),
                "outside": [p.to_dict() for p in foreign.get(gpu.index, ())],
                "shared": _shared(gpu, [a for a in sharing if a.node == node.name and gpu.index in a.gpu_ids], active,
                                  held_outside.get(node.name, {}).get(gpu.index, 0)),
                **gpu_links(node, gpu.index),
                # a MIG slice shows its GPU's (NVML reports faults of the whole GPU)
                "health": healths.get(gpu.index) if gpu.parent is None else healths.get(gpu.parent),
            })
        row: dict[str, Any] = {
            "name": node.name, "arch": node.arch, "cpus": node.cpus, "cpus_alloc": sum(a.cpus for a in held),
            "mem_mb": node.mem_mb, "mem_alloc_mb": sum(a.mem_mb for a in held), "gpus": gpus,
            "isolation": isolation[0], "isolation_detail": isolation[1], "state": None, "reason": None,
            "reason_by": None, "reason_at": None, "shards_per_gpu": shards_per_gpu, **node_links(node),
            "shards_alloc": sum(active[a.job_id].spec.gpu_shards for a in held if a.gpu_share_mb and a.job_id in active),
        }
        whole = node_drains.get(node.name)
        if whole is not None:
            row["state"] = "draining" if held else "drained"
            row.update(whole.reason_fields())
        elif off:
            latest = max(off.values(), key=lambda d: d.at)
            row.update(latest.reason_fields())
            row["reason"] = "; ".join(f"gpu {i}: {d.reason}" for i, d in sorted(off.items()))
        out.append(row)
    return out


def _shared(gpu: Gpu, sharing: Sequence[Allocation], active: Mapping[int, Job], outside_mb: int) -> dict[str, Any] | None:
    """A GPU's sharing jobs (`corral.core.scheduling.sharing`) and its memory: budgeted to them, held outside corral, free."""
    if not sharing and not outside_mb:
        return None
    jobs = []
    for allocation in sharing:
        job = active.get(allocation.job_id)
        jobs.append({"job_id": allocation.job_id, "job_ref": job.ref if job else str(allocation.job_id),
                     "job_name": job.spec.name if job else None, "user": allocation.user,
                     "budget_mb": allocation.gpu_share_mb, "shards": job.spec.gpu_shards if job else 0})
    budgeted = sum(a.gpu_share_mb for a in sharing)
    return {"budgeted_mb": budgeted, "outside_mb": outside_mb, "free_mb": max(0, gpu.mem_mb - budgeted - outside_mb),
            "jobs": jobs}


def node_links(node: Node) -> dict[str, Any]:
    """Its features (its own and its GPUs', for --constraint) and `links`: `nvidia-smi topo -m`'s matrix over its
    GPUs (NV, PIX, PXB, PHB, NODE, SYS; X on the diagonal), [] where unknown."""
    topology = node.topology
    names = sorted(set(node.features) | (topology.names if topology else frozenset()))
    gpu_features = {name: format_ranges(gpus) for name, gpus in topology.gpu_features} if topology else {}
    return {"features": names, "gpu_features": gpu_features,
            "links": topology.matrix([g.index for g in node.gpus]) if topology else []}


def gpu_links(node: Node, index: int) -> dict[str, Any]:
    """The GPU's NVLink group (the GPUs linked to each other with it, itself among them; [] without NVLink)
    and its GPU features."""
    topology = node.topology
    if topology is None:
        return {"nvlink": [], "features": []}
    return {"nvlink": list(topology.nvlink_group(index)), "features": topology.features_of(index)}
