"""What a machine has and what a job holds: nodes, GPUs, allocations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from corral.core.units import format_memory
from corral.errors import Unsatisfiable


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    type: str
    mem_mb: int
    uuid: str | None = None
    minor: int | None = None
    """Its device's minor number (/dev/nvidiaN), as NVML says; None: the same as its index (declared GPUs)."""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpus: int
    mem_mb: int
    gpus: tuple[Gpu, ...] = ()


@dataclass(frozen=True, slots=True)
class Request:
    """The resource part of a job, as the scheduler sees it."""

    gpus: int = 0
    gpu_type: str | None = None
    gpu_mem_mb: int | None = None
    cpus: int = 1
    mem_mb: int = 0


@dataclass(frozen=True, slots=True)
class Allocation:
    """What a started job holds until its processes are gone."""

    job_id: int
    node: str
    gpu_ids: tuple[int, ...]
    cpus: int
    mem_mb: int
    user: str = ""
    qos: str | None = None
    end_time: float | None = None
    """When its time limit runs out; None: no limit."""
    preemptible: bool = False
    priority: int = 0
    """Its priority when it started: only a job of higher priority may preempt it."""
    preempting: bool = False
    """Told to make room already; its resources count as soon free."""


def gpu_matches(gpu: Gpu, request: Request) -> bool:
    if request.gpu_type is not None and gpu.type.lower() != request.gpu_type.lower():
        return False
    return request.gpu_mem_mb is None or gpu.mem_mb >= request.gpu_mem_mb


def check_satisfiable(request: Request, nodes: Sequence[Node]) -> None:
    """Refuse a request that no node could ever run, saying why.

    Raises:
        Unsatisfiable: e.g. "requested 9 GPUs; the largest node has 8".
    """
    if not nodes:
        raise Unsatisfiable("gpus", "the server has no nodes")
    if any(_fits_empty(request, node) for node in nodes):
        return
    if request.gpus:
        matching = max(sum(gpu_matches(g, request) for g in node.gpus) for node in nodes)
        if matching < request.gpus:
            most = max(len(node.gpus) for node in nodes)
            if request.gpu_type is None and request.gpu_mem_mb is None:
                raise Unsatisfiable("gpus", f"requested {_gpus(request.gpus)}; the largest node has {most}")
            types = sorted({f"{g.type} ({format_memory(g.mem_mb)})" for node in nodes for g in node.gpus})
            wanted = request.gpu_type or "any type"
            if request.gpu_mem_mb:
                wanted += f" with at least {format_memory(request.gpu_mem_mb)}"
            raise Unsatisfiable(
                "gpus", f"requested {_gpus(request.gpus)} of {wanted}; the most any node has is {matching}",
                f"GPUs here: {', '.join(types) or 'none'}",
            )
    most_cpus = max(node.cpus for node in nodes)
    if request.cpus > most_cpus:
        raise Unsatisfiable("cpus", f"requested {request.cpus} CPUs; the largest node has {most_cpus}")
    most_mem = max(node.mem_mb for node in nodes)
    if request.mem_mb > most_mem:
        raise Unsatisfiable(
            "mem", f"requested {format_memory(request.mem_mb)} of memory; the largest node has {format_memory(most_mem)}"
        )
    raise Unsatisfiable("gpus", "no single node has all of the requested GPUs, CPUs and memory together")


def _fits_empty(request: Request, node: Node) -> bool:
    return (
        request.cpus <= node.cpus
        and request.mem_mb <= node.mem_mb
        and sum(gpu_matches(g, request) for g in node.gpus) >= request.gpus
    )


def _gpus(count: int) -> str:
    return "1 GPU" if count == 1 else f"{count} GPUs"
