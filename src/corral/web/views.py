"""Read models for the dashboard: the cluster with live GPU figures, and the queue page by page.

They read the job service and the monitor on the event loop thread, as the other routes do,
and build job views only for the page asked for, so a queue of 10,000 jobs pages in milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from corral.core.jobspec.states import JobState

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job
    from corral.monitor.service import MonitorService
    from corral.server.service import JobService


def cluster_view(service: JobService, monitor: MonitorService) -> dict[str, Any]:
    """Each node and GPU, who holds it, and its last utilization and memory; the totals."""
    live: dict[int, dict[str, Any]] = {}
    sampler = monitor.sampler
    for reading in getattr(sampler, "gpus", None) or ():
        live[reading.index] = {"utilization": reading.utilization, "memory_used_mb": reading.memory_used_mb,
                               "temperature_c": reading.temperature_c, "power_w": reading.power_w}
    for sample in monitor.latest.values():  # a job's own view of its GPUs, where the sampler saw no frame
        for index, utilization, used, _total in sample.gpus:
            live.setdefault(index, {"utilization": utilization, "memory_used_mb": used, "temperature_c": None,
                                    "power_w": None})
    nodes = service.nodes_view()
    blank = {"utilization": None, "memory_used_mb": None, "temperature_c": None, "power_w": None}
    for node in nodes:
        for gpu in node["gpus"]:
            gpu.update(live.get(gpu["index"], blank) if len(nodes) == 1 else blank)
            for job in (gpu.get("shared") or {}).get("jobs", ()):  # what each sharing job uses of its budget
                own = monitor.latest.get(job["job_id"])
                job["used_mb"] = own.own_gpu_memory_mb if own is not None else None
        # GPUs in MIG mode hold no job themselves: their temperature and power, shown over their slices
        parents = sorted({gpu["parent"] for gpu in node["gpus"] if gpu.get("parent") is not None})
        node["mig_gpus"] = [{"index": p, **(live.get(p, blank) if len(nodes) == 1 else blank)} for p in parents]
    totals = {
        "gpus": sum(len(n["gpus"]) for n in nodes),
        "gpus_used": sum(1 for n in nodes for g in n["gpus"] if g["job_id"] is not None),
        # idle but drained: not free for a new job
        "gpus_drained": sum(1 for n in nodes for g in n["gpus"] if g["job_id"] is None and g.get("drained")),
        # idle but used by a process outside corral: not free for a new job either
        "gpus_outside": sum(1 for n in nodes for g in n["gpus"]
                            if g["job_id"] is None and not g.get("drained") and g.get("outside")),
        "cpus": sum(n["cpus"] for n in nodes), "cpus_alloc": sum(n["cpus_alloc"] for n in nodes),
        "mem_mb": sum(n["mem_mb"] for n in nodes), "mem_alloc_mb": sum(n["mem_alloc_mb"] for n in nodes),
    }
    return {"nodes": nodes, "totals": totals, "sampled_at": getattr(sampler, "gpus_time", None)}


def queue_view(service: JobService, monitor: MonitorService, *, state: str | None, user: str | None,
               label: tuple[str, str] | None, partition: str | None, offset: int, limit: int) -> dict[str, Any]:
    """Running jobs (oldest first), then pending ones in priority order; one page of them."""
    running: list[Job] = []
    pending: list[Job] = []
    users: set[str] = set()
    partitions: set[str] = set()
    for job in service.active.values():
        if job.is_array and not job.array_pending:
            continue  # every task has its own record now
        users.add(job.spec.user)
        if job.spec.partition:
            partitions.add(job.spec.partition)
        if not _matches(job, state, user, label, partition):
            continue
        (running if job.state is JobState.RUNNING else pending).append(job)
    running.sort(key=lambda j: (j.start_time or 0.0, j.id))
    priority = service.priority_of
    pending.sort(key=lambda j: (-(priority(j.id) or 0), j.id))
    ordered = running + pending
    page = []
    for job in ordered[offset:offset + limit]:
        # with the page's own keys; expected_end brought forward to the tracked run's ETA, as the API's job JSON
        view: dict[str, Any] = {**service.get(job.id).to_dict(detail=False, eta_end=monitor.eta_end(job.id))}
        sample = monitor.latest.get(job.id)
        progress = monitor.progress.get(job.id)
        view["priority"] = priority(job.id) if job.state is JobState.PENDING else None
        view["progress"] = progress.to_dict() if progress else None
        view["sample"] = None if sample is None else {
            "gpu_utilization": sample.gpu_utilization, "cpu_utilization": sample.cpu_utilization,
            "rss_mb": sample.rss_mb,
            "gpus": [{"index": g[0], "utilization": g[1], "memory_used_mb": g[2]} for g in sample.gpus],
        }
        page.append(view)
    return {"total": len(ordered), "running": len(running), "pending": len(pending), "offset": offset, "limit": limit,
            "users": sorted(users), "partitions": sorted(partitions), "jobs": page}


def _matches(job: Job, state: str | None, user: str | None, label: tuple[str, str] | None,
             partition: str | None) -> bool:
    if state is not None and job.state.value != state:
        return False
    if user is not None and job.spec.user != user:
        return False
    if partition is not None and job.spec.partition != partition:
        return False
    labels: Mapping[str, str] = job.spec.labels
    return label is None or labels.get(label[0]) == label[1]
