"""How the machine's GPUs are linked: NVML's topology recorded as raw frame fields, and the node's
`Topology` (`corral.core.scheduling.topology`) from them or from what the admin declares.

Each GPU's raw facts (`corral.executor.gpus.read_inventory`, the first frame of a recording) carry::

    "topology": {"nvlink": [1, 2, 3],
                 "common_ancestor": {"1": "SINGLE", "2": "MULTIPLE", "4": "SYSTEM", ...}}

`nvlink`: the GPUs it reaches over NVLink (NVML's P2P status for NVLink, so GPUs joined through an
NVSwitch count); `common_ancestor`: nvmlDeviceGetTopologyCommonAncestor with each other GPU, in NVML's
names (NVML_TOPOLOGY_INTERNAL, SINGLE, MULTIPLE, HOSTBRIDGE, NODE, SYSTEM without the prefix).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from corral.core.scheduling.resources import DeclaredInventory
from corral.core.scheduling.topology import SYS, Topology, build_topology, parse_gpu_list
from corral.errors import InvalidRequest

ANCESTORS = {0: "INTERNAL", 10: "SINGLE", 20: "MULTIPLE", 30: "HOSTBRIDGE", 40: "NODE", 50: "SYSTEM"}
"""NVML's nvmlGpuTopologyLevel_t values and names."""
_LEVEL_OF = {"INTERNAL": "PIX", "SINGLE": "PIX", "MULTIPLE": "PXB", "HOSTBRIDGE": "PHB", "NODE": "NODE", "SYSTEM": SYS}
"""NVML's common ancestor as `nvidia-smi topo -m` names the distance (two GPUs on one board: PIX)."""


def add_topology(pynvml: Any, facts: Sequence[dict[str, Any]]) -> None:
    """Add each GPU's `topology` (see the module) to its raw facts; a pair NVML cannot tell about is left out."""
    handles = [pynvml.nvmlDeviceGetHandleByIndex(raw["index"]) for raw in facts]
    for raw, handle in zip(facts, handles):
        nvlink: list[int] = []
        ancestors: dict[str, str] = {}
        for other, peer in zip(facts, handles):
            if other is raw:
                continue
            try:
                level = pynvml.nvmlDeviceGetTopologyCommonAncestor(handle, peer)
                ancestors[str(other["index"])] = ANCESTORS.get(int(level), "SYSTEM")
            except Exception:  # noqa: BLE001 - not on every platform (WSL, some virtual machines)
                pass
            try:
                if pynvml.nvmlDeviceGetP2PStatus(handle, peer, pynvml.NVML_P2P_CAPS_INDEX_NVLINK) == \
                        pynvml.NVML_P2P_STATUS_OK:
                    nvlink.append(int(other["index"]))
            except Exception:  # noqa: BLE001 - an old driver: no NVLink known
                pass
        raw["topology"] = {"nvlink": nvlink, "common_ancestor": ancestors}


def node_topology(frame: Sequence[Mapping[str, Any]], declared: DeclaredInventory,
                  gpus: Collection[int], type_gpus: Mapping[str, frozenset[int]] | None = None) -> Topology | None:
    """The node's topology: NVML's (from raw facts) where there is one, NVLink groups and GPU features as
    the admin declares them (`[node] nvlink`, `[node] gpu_features`) winning over it. `type_gpus`: on a node of
    several GPU types, each type's GPUs, features of theirs (`corral.core.jobspec.features.gpu_type_features`).

    Raises:
        InvalidRequest: a declared group or GPU list that names no GPU of the node, named by its setting.
    """
    nvlink: set[tuple[int, int]] = set()
    pcie: dict[tuple[int, int], str] = {}
    for raw in frame:
        links = raw.get("topology")
        index = raw.get("index")
        if not isinstance(links, Mapping) or not isinstance(index, int) or index not in gpus:
            continue
        for peer in links.get("nvlink") or ():
            if isinstance(peer, int) and peer in gpus:
                nvlink.add((min(index, peer), max(index, peer)))
        ancestors = links.get("common_ancestor")
        for peer, name in (ancestors.items() if isinstance(ancestors, Mapping) else ()):
            if str(peer).isdigit() and int(peer) in gpus and name in _LEVEL_OF:
                pcie[(index, int(peer))] = _LEVEL_OF[name]
    if declared.nvlink:
        nvlink = set()
        seen: dict[int, str] = {}
        for text in declared.nvlink:
            group = parse_gpu_list(text, "node.nvlink", gpus)
            for i in group:
                if i in seen:
                    raise InvalidRequest("node.nvlink", f"GPU {i} is in both {seen[i]!r} and {text!r}",
                                         'list each NVLink group once, e.g. nvlink = ["0-3", "4-7"]')
                seen[i] = text
            nvlink.update((a, b) for a in group for b in group if a < b)
    features: dict[str, Collection[int]] = dict(type_gpus or {})
    for name, text in declared.gpu_features:
        if name in declared.features:
            raise InvalidRequest("node.gpu_features", f"{name!r} is also a node feature ([node] features)",
                                 "a feature is either the whole node's or some GPUs'")
        features[name] = parse_gpu_list(text, f"node.gpu_features.{name}", gpus)
    return build_topology(gpus, nvlink=nvlink, pcie=pcie, gpu_features=features)
