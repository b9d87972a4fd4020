"""What a machine has and what a job holds: nodes, GPUs, allocations."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from corral.core.dialects import classad
from corral.core.jobspec.features import named, satisfies
from corral.core.jobspec.request import Request
from corral.core.jobspec.arrays import format_ranges
from corral.core.scheduling.topology import Topology, choose_gpus, most_together
from corral.core.units.units import format_memory
from corral.errors import Unsatisfiable

# Compute capability by GPU type, for declared GPUs (NVML reports it for detected ones).
CAPABILITY_BY_TYPE: dict[str, float] = {
    "k80": 3.7, "p100": 6.0, "v100": 7.0, "titan-v": 7.0, "t4": 7.5, "rtx-2080-ti": 7.5, "a100": 8.0, "a30": 8.0,
    "a10": 8.6, "a40": 8.6, "a16": 8.6, "a6000": 8.6, "rtx-a6000": 8.6, "rtx-a5000": 8.6, "rtx-a4000": 8.6,
    "rtx-3090": 8.6, "rtx-3080": 8.6, "3090": 8.6, "l4": 8.9, "l40": 8.9, "l40s": 8.9, "rtx-4090": 8.9,
    "4090": 8.9, "rtx-6000-ada": 8.9, "h100": 9.0, "h200": 9.0, "gh200": 9.0, "b100": 10.0, "b200": 10.0,
    "gb200": 10.0, "rtx-5090": 12.0,
}


def capability_of(gpu_type: str) -> float | None:
    """The compute capability of a GPU type (`A100`, `a100-80g`, `RTX 3090`); None: not in the table."""
    name = re.sub(r"[\s_]+", "-", gpu_type.strip().lower())
    if name in CAPABILITY_BY_TYPE:
        return CAPABILITY_BY_TYPE[name]
    base = re.sub(r"-(\d+g[b]?|pcie|sxm\d*|nvl|hbm\d*e?)$", "", name)  # a100-80g, h100-sxm
    return CAPABILITY_BY_TYPE.get(base)


@dataclass(frozen=True)
class DeclaredInventory:
    """What `corral up` (or the config file) declares about the machine; None fields are detected."""

    gpus: int | None = None
    gpu_type: str | None = None
    gpu_mem: str | None = None
    cpus: int | None = None
    mem: str | None = None
    features: tuple[str, ...] = ()
    """Node features (`[node] features`), for sbatch's --constraint."""
    nvlink: tuple[str, ...] = ()
    """NVLink groups of declared GPUs (`[node] nvlink = ["0-3", "4-7"]`): `corral.core.scheduling.topology`."""
    gpu_features: tuple[tuple[str, str], ...] = ()
    """Features of some GPUs (`[node] gpu_features = {fast = "0-3"}`): (name, GPU list)."""


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    type: str
    mem_mb: int
    uuid: str | None = None
    minor: int | None = None
    """Its device's minor number (/dev/nvidiaN), as NVML says; None: the same as its index (declared GPUs)."""
    capability: float | None = None
    """CUDA compute capability (8.0 for an A100), from NVML or the table by type; None: unknown."""
    device_name: str | None = None
    """The name NVML gives (`NVIDIA A100-SXM4-80GB`); None: declared, and its type stands for it."""
    parent: int | None = None
    """A MIG slice's: the NVML index of the GPU it is cut from (its type is then its profile, `3g.40gb`, and its
    uuid `MIG-...`; `corral.executor.mig`); None: a whole GPU."""
    caps: tuple[int, ...] = ()
    """A MIG slice's /dev/nvidia-caps minors (its GPU and compute instance's access): only its job may open them."""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpus: int
    mem_mb: int
    gpus: tuple[Gpu, ...] = ()
    arch: str = "X86_64"
    """HTCondor's Arch for its processors: X86_64 or aarch64."""
    opsys: str = "LINUX"
    features: tuple[str, ...] = ()
    """What its admin declares it has (`nvlink`, `a100`, `ib`), for sbatch's --constraint."""
    topology: Topology | None = None
    """How its GPUs are linked, and their features (`corral.core.scheduling.topology`); None: unknown."""



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
    gpu_share_mb: int = 0
    """A sharing job's memory budget on its one GPU (`corral.core.scheduling.sharing`); 0: it holds its GPUs whole."""


def gpu_matches(gpu: Gpu, request: Request, node: Node | None = None) -> bool:
    """Whether a GPU (of `node`, whose OpSys and Arch requirements may read) can serve the request."""
    if request.gpu_type is not None and gpu.type.lower() != request.gpu_type.lower():
        return False
    if request.gpu_mem_mb is not None and gpu.mem_mb < request.gpu_mem_mb:
        return False
    return request.requirements is None or classad.holds(classad.compiled(request.requirements), machine(node, gpu))


def node_matches(node: Node, request: Request) -> bool:
    """Whether the node may run the request: named (or not excluded), with the features asked for, and
    meeting requirements that name no GPU property (those are checked per GPU)."""
    if request.nodelist and node.name not in request.nodelist:
        return False
    if node.name in request.exclude or not satisfies(request.features, features_of(node)):
        return False
    if request.requirements is None:
        return True
    expr = classad.compiled(request.requirements)
    return classad.uses_gpu(expr) or classad.holds(expr, machine(node, None))


def features_of(node: Node) -> tuple[str, ...]:
    """The names a --constraint may ask of the node: its features and its GPUs' (`nvlink`, `[node] gpu_features`)."""
    return node.features if node.topology is None else node.features + tuple(node.topology.names)


def gpus_possible(node: Node, request: Request) -> bool:
    """Whether the node, empty, has GPUs for the request that its --constraint allows (NVLink, GPU features)."""
    if node.topology is None or request.features is None or not request.gpus:
        return True
    return gpus_placeable(node, request, [g.index for g in node.gpus if gpu_matches(g, request, node)])


def gpus_placeable(node: Node, request: Request, free: Sequence[int]) -> bool:
    """Whether the request's GPUs can be had among `free` (matching GPUs of the node), as its --constraint
    allows them (one NVLink group for `nvlink`, GPU features)."""
    if node.topology is None or request.features is None or request.exclusive:
        return len(free) >= request.gpus
    return choose_gpus(node.topology, node.topology.plan(request.features, node.features), free,
                       request.gpus) is not None


def machine(node: Node | None, gpu: Gpu | None) -> dict[str, object]:
    """A node (and one of its GPUs) as the properties a ClassAd expression reads."""
    props: dict[str, object] = {} if node is None else {
        "node.opsys": node.opsys, "node.arch": node.arch, "node.mem_mb": node.mem_mb, "node.cpus": node.cpus,
    }
    if gpu is not None:
        props.update({"gpu.capability": gpu.capability, "gpu.mem_mb": gpu.mem_mb,
                      "gpu.name": gpu.device_name or gpu.type})
    return props


def check_satisfiable(request: Request, nodes: Sequence[Node]) -> None:
    """Refuse a request that no node could ever run, saying why.

    Raises:
        Unsatisfiable: e.g. "requested 9 GPUs; the largest node has 8".
    """
    if not nodes:
        raise Unsatisfiable("gpus", "the server has no nodes")
    if any(_fits_empty(request, node) for node in nodes):
        return
    _check_nodes(request, nodes)
    _check_gpu_constraint(request, nodes)
    if request.requirements is not None:
        _check_requirements(request, nodes)
    if request.gpus:
        matching = max(sum(gpu_matches(g, request, node) for g in node.gpus) for node in nodes)
        if matching < request.gpus:
            most = max(len(node.gpus) for node in nodes)
            if request.gpu_type is None and request.gpu_mem_mb is None and request.requirements is None:
                raise Unsatisfiable("gpus", f"requested {_gpus(request.gpus)}; the largest node has {most}")
            types = sorted({_describe(g) for node in nodes for g in node.gpus})
            wanted = request.gpu_type or "any type"
            if request.gpu_mem_mb:
                wanted += f" with at least {format_memory(request.gpu_mem_mb)}"
            if request.requirements:
                wanted += f" meeting the requirements {request.requirements}"
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


def check_node_names(request: Request, nodes: Sequence[Node]) -> None:
    """Refuse --nodelist or --exclude names that are no node here, and more than one node for a one-node job.

    Raises:
        Unsatisfiable: naming the nodes there are.
    """
    names = [node.name for node in nodes]
    for field, listed in (("nodelist", request.nodelist), ("exclude", request.exclude)):
        unknown = [name for name in listed if name not in names]
        if unknown:
            raise Unsatisfiable(field, f"{', '.join(unknown)}: no such node here (Invalid node name specified)",
                                f"nodes here: {', '.join(names) or 'none'}")
    if len(request.nodelist) > 1:
        raise Unsatisfiable("nodelist", f"names {len(request.nodelist)} nodes; a job here runs on one",
                            f"name one of {', '.join(names)}")


def _check_nodes(request: Request, nodes: Sequence[Node]) -> None:
    """Name the node choice (--nodelist, --exclude, --constraint) that leaves no node, if it is to blame."""
    allowed = [node for node in nodes if (not request.nodelist or node.name in request.nodelist)
               and node.name not in request.exclude]
    if not allowed:
        field = "exclude" if not request.nodelist else "nodelist"
        raise Unsatisfiable(field, "leaves no node to run on (Requested node configuration is not available)",
                            f"nodes here: {', '.join(node.name for node in nodes)}")
    if request.features is not None and not any(satisfies(request.features, features_of(node)) for node in allowed):
        have = sorted({f for node in allowed for f in features_of(node)})
        folded = {f.lower() for f in have}
        missing = sorted(name for name in named(request.features) if name.lower() not in folded)
        raise Unsatisfiable(
            "constraint", f"no node here has the features {request.features}"
            + (f" ({', '.join(missing)}: on no node)" if missing else "") + " (Invalid feature specification)",
            f"features here: {', '.join(have) or 'none'} (its GPU types, and what an admin declares: [node] features "
            "in config.toml)")


def _check_gpu_constraint(request: Request, nodes: Sequence[Node]) -> None:
    """Name the --constraint if it is what leaves too few GPUs together (NVLink groups, GPU features)."""
    if request.features is None or not request.gpus:
        return
    mosts = [most_together(node.topology, node.topology.plan(request.features, node.features),
                           [g.index for g in node.gpus if gpu_matches(g, request, node)])
             for node in nodes if node.topology is not None and node_matches(node, request)]
    if mosts and max(mosts) < request.gpus and not any(
            node.topology is None and node_matches(node, request) for node in nodes):
        groups = sorted({describe_links(node) for node in nodes if node.topology is not None} - {""})
        raise Unsatisfiable(
            "constraint", f"requested {_gpus(request.gpus)} with --constraint={request.features}; at most "
            f"{max(mosts)} on any node meet it together",
            f"{'; '.join(groups) or 'no GPU here is linked by NVLink'} (nvlink: all of one NVLink group); "
            "ask for fewer GPUs, or drop the constraint")


def describe_links(node: Node) -> str:
    """`NVLink groups 0-3, 4-7; GPU features fast: 0-3`: what --constraint can ask of the node's GPUs."""
    topology = node.topology
    if topology is None:
        return ""
    groups = sorted({topology.nvlink_group(i) for i in topology.nvlinked})
    parts = [f"NVLink groups {', '.join(format_ranges(g) for g in groups)}"] if groups else []
    parts += [f"GPU feature {name}: {format_ranges(gpus)}" for name, gpus in topology.gpu_features]
    return "; ".join(parts)


def _fits_empty(request: Request, node: Node) -> bool:
    return (
        request.cpus <= node.cpus
        and request.mem_mb <= node.mem_mb
        and node_matches(node, request)
        and sum(gpu_matches(g, request, node) for g in node.gpus) >= request.gpus
        and gpus_possible(node, request)
    )


def _check_requirements(request: Request, nodes: Sequence[Node]) -> None:
    """Name the part of the requirements that no node (or no GPU) meets, if one part is to blame."""
    assert request.requirements is not None
    expr = classad.compiled(request.requirements)
    per_gpu = classad.uses_gpu(expr)
    for part in classad.conjuncts(expr):
        if per_gpu:
            met = any(classad.holds(part, machine(node, g)) for node in nodes for g in node.gpus)
        else:
            met = any(classad.holds(part, machine(node, None)) for node in nodes)
        if not met:
            here = sorted({_describe(g) for node in nodes for g in node.gpus}) if per_gpu else sorted(
                {f"{node.name}: OpSys {node.opsys}, Arch {node.arch}" for node in nodes})
            raise Unsatisfiable(
                "requirements", f"no {'GPU' if per_gpu else 'node'} here satisfies {part.text}",
                f"{'GPUs' if per_gpu else 'nodes'} here: {', '.join(here) or 'none'}",
            )


def _describe(gpu: Gpu) -> str:
    capability = f", capability {gpu.capability:.1f}" if gpu.capability is not None else ""
    mig = "MIG slice, " if gpu.parent is not None else ""
    return f"{gpu.type} ({mig}{format_memory(gpu.mem_mb)}{capability})"


def _gpus(count: int) -> str:
    return "1 GPU" if count == 1 else f"{count} GPUs"
