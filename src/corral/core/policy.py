"""The scheduling policy: a pure function from a snapshot of the machine to decisions.

`schedule` knows nothing of databases, processes or clocks; the server hands it
the nodes, what running jobs hold and the pending queue in priority order
(`corral.core.priority` decides that order), and applies what comes back.
Placement is strict order with resource fit: the first eligible job that does
not fit blocks everything behind it, so no job is ever overtaken (and starved)
by smaller ones. Jobs held back by a limit (hold, partition time limit, QoS
limits) do not block: they wait for their own reason while others run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from corral.core.resources import Allocation, Gpu, Node, Request, gpu_matches
from corral.core.schedconfig import SchedulerConfig
from corral.core.states import PendingReason

_DEFAULT_CONFIG = SchedulerConfig()


@dataclass(frozen=True, slots=True)
class PendingJob:
    job_id: int
    request: Request
    user: str = ""
    partition: str | None = None
    qos: str | None = None
    time_limit_s: int | None = None
    held: bool = False


@dataclass(slots=True)
class Decisions:
    starts: list[Allocation] = field(default_factory=list)
    reasons: dict[int, PendingReason] = field(default_factory=dict)


@dataclass(slots=True)
class _Free:
    cpus: int
    mem_mb: int
    gpus: list[Gpu]  # free, in the node's order


def schedule(
    nodes: Sequence[Node], running: Iterable[Allocation], pending: Sequence[PendingJob], now: float,
    config: SchedulerConfig = _DEFAULT_CONFIG,
) -> Decisions:
    """Decide which pending jobs start now, and why the others wait.

    Args:
        nodes: the machine's inventory.
        running: what started jobs hold.
        pending: jobs waiting, highest priority first.
        now: the time of this pass (unused by strict order; later policies age jobs by it).
        config: partitions and QoS, for their limits.
    """
    del now
    running = list(running)
    free = _free_resources(nodes, running)
    jobs_of: dict[tuple[str, str | None], int] = {}
    gpus_of: dict[tuple[str, str | None], int] = {}
    for alloc in running:
        key = (alloc.user, alloc.qos)
        jobs_of[key] = jobs_of.get(key, 0) + 1
        gpus_of[key] = gpus_of.get(key, 0) + len(alloc.gpu_ids)
    decisions = Decisions()
    reasons = decisions.reasons
    blocked = False
    for job in pending:
        reason = _held_back(job, nodes, config, jobs_of, gpus_of)
        if reason is not None:
            reasons[job.job_id] = reason
            continue
        if blocked:
            reasons[job.job_id] = PendingReason.PRIORITY
            continue
        allocation = _allocate(job, nodes, free)
        if allocation is None:
            reasons[job.job_id] = PendingReason.RESOURCES
            blocked = True
        else:
            decisions.starts.append(allocation)
            key = (job.user, job.qos)
            jobs_of[key] = jobs_of.get(key, 0) + 1
            gpus_of[key] = gpus_of.get(key, 0) + job.request.gpus
    return decisions


def _held_back(
    job: PendingJob, nodes: Sequence[Node], config: SchedulerConfig,
    jobs_of: dict[tuple[str, str | None], int], gpus_of: dict[tuple[str, str | None], int],
) -> PendingReason | None:
    """The reason a job may not start whatever is free, or None."""
    if job.held:
        return PendingReason.HELD
    if not _fits_some_node(job.request, nodes):
        return PendingReason.BAD_CONSTRAINTS
    partition = config.partitions.get(job.partition or config.default_partition)
    if partition is None:
        return PendingReason.BAD_CONSTRAINTS
    if partition.max_time_s is not None and (job.time_limit_s is None or job.time_limit_s > partition.max_time_s):
        return PendingReason.PARTITION_TIME_LIMIT
    qos = config.qos.get(job.qos or config.default_qos)
    if qos is not None:
        key = (job.user, job.qos)
        if qos.max_running_per_user is not None and jobs_of.get(key, 0) >= qos.max_running_per_user:
            return PendingReason.QOS_MAX_JOBS
        if qos.max_gpus_per_user is not None and gpus_of.get(key, 0) + job.request.gpus > qos.max_gpus_per_user:
            return PendingReason.QOS_MAX_GPUS
    return None


def _free_resources(nodes: Sequence[Node], running: Iterable[Allocation]) -> dict[str, _Free]:
    free = {n.name: _Free(n.cpus, n.mem_mb, list(n.gpus)) for n in nodes}
    for alloc in running:
        slot = free.get(alloc.node)
        if slot is None:
            continue
        slot.cpus -= alloc.cpus
        slot.mem_mb -= alloc.mem_mb
        held = set(alloc.gpu_ids)
        slot.gpus = [g for g in slot.gpus if g.index not in held]
    return free


def _fits_some_node(request: Request, nodes: Sequence[Node]) -> bool:
    """Could the request run on some node if it were empty? (Runs for every pending job: keep it cheap.)"""
    for node in nodes:
        if request.cpus > node.cpus or request.mem_mb > node.mem_mb or request.gpus > len(node.gpus):
            continue
        if request.gpus == 0 or (request.gpu_type is None and request.gpu_mem_mb is None):
            return True
        if sum(gpu_matches(g, request) for g in node.gpus) >= request.gpus:
            return True
    return False


def _allocate(job: PendingJob, nodes: Sequence[Node], free: dict[str, _Free]) -> Allocation | None:
    request = job.request
    for node in nodes:
        slot = free[node.name]
        if request.cpus > slot.cpus or request.mem_mb > slot.mem_mb:
            continue
        gpus = [g for g in slot.gpus if gpu_matches(g, request)][: request.gpus]
        if len(gpus) < request.gpus:
            continue
        slot.cpus -= request.cpus
        slot.mem_mb -= request.mem_mb
        taken = {g.index for g in gpus}
        slot.gpus = [g for g in slot.gpus if g.index not in taken]
        return Allocation(job.job_id, node.name, tuple(g.index for g in gpus), request.cpus, request.mem_mb,
                          job.user, job.qos)
    return None
