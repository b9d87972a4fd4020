"""The scheduling policy: a pure function from a snapshot of the machine to decisions.

`schedule` knows nothing of databases, processes or clocks; the server hands it
the nodes, what running jobs hold and the pending queue in priority order, and
applies what comes back. This first policy is strict submit order with resource
fit: the first job that does not fit blocks everything behind it, so no job is
ever overtaken (and starved) by smaller ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from corral.core.resources import Allocation, Gpu, Node, Request, gpu_matches
from corral.core.states import PendingReason


@dataclass(frozen=True, slots=True)
class PendingJob:
    job_id: int
    request: Request


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
    nodes: Sequence[Node], running: Iterable[Allocation], pending: Sequence[PendingJob], now: float
) -> Decisions:
    """Decide which pending jobs start now, and why the others wait.

    Args:
        nodes: the machine's inventory.
        running: what started jobs hold.
        pending: jobs waiting, highest priority first.
        now: the time of this pass (unused by strict order; later policies age jobs by it).
    """
    del now
    free = _free_resources(nodes, running)
    decisions = Decisions()
    blocked = False
    for job in pending:
        if not _fits_some_node(job.request, nodes):
            decisions.reasons[job.job_id] = PendingReason.BAD_CONSTRAINTS
            continue
        if blocked:
            decisions.reasons[job.job_id] = PendingReason.PRIORITY
            continue
        allocation = _allocate(job, nodes, free)
        if allocation is None:
            decisions.reasons[job.job_id] = PendingReason.RESOURCES
            blocked = True
        else:
            decisions.starts.append(allocation)
    return decisions


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
        return Allocation(job.job_id, node.name, tuple(g.index for g in gpus), request.cpus, request.mem_mb)
    return None
