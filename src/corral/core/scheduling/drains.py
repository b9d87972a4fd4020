"""Drained GPUs: taken out of scheduling by an admin (Slurm's DRAIN, per GPU) until resumed.

A drained GPU gets no new job; a job already on it runs to its end (the GPU shows DRAINING until
then, DRAINED after). A drained node (`gpu` is `WHOLE_NODE`) takes no job at all, CPU-only ones
included, and its state in Slurm's views is DRAINING while any job runs on it, DRAINED after.
What the scheduler is handed is `drained_by_node`: the drained indexes of each node (`WHOLE_NODE`
among them for a drained node), nothing else, so the policy stays a function of data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from corral.core.units.iso_times import iso_utc
from corral.core.scheduling.resources import Node
from corral.errors import InvalidRequest, NotFound

MAX_REASON = 1000
WHOLE_NODE = -1
"""The `gpu` of a drain that takes a whole node out of scheduling."""


@dataclass(frozen=True, slots=True)
class Drain:
    node: str
    gpu: int
    reason: str
    by: str
    at: float

    def to_dict(self) -> dict[str, object]:
        return {"reason": self.reason, "by": self.by, "at": iso_utc(self.at)}

    def reason_fields(self) -> dict[str, object]:
        """A node's `reason`, `reason_by`, `reason_at` in the API (scontrol shows `XID 79 [root@2026-11-25T09:00:00]`)."""
        return {"reason": self.reason, "reason_by": self.by, "reason_at": iso_utc(self.at)}


def check_reason(reason: object) -> str:
    """The reason, stripped.

    Raises:
        InvalidRequest: missing, not text, empty or too long.
    """
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidRequest("reason", "a drain needs a reason (Slurm asks for one too)",
                             'say why, e.g. --reason "XID 79" or Reason="fan failure"')
    reason = " ".join(reason.split())
    if len(reason) > MAX_REASON:
        raise InvalidRequest("reason", f"is {len(reason)} characters; at most {MAX_REASON}")
    return reason


def gpus_named(nodes: Sequence[Node], node_name: str, gpus: Sequence[int] | None) -> tuple[Node, tuple[int, ...]]:
    """The node and the GPU indexes a drain or resume names (None: the whole node, `(WHOLE_NODE,)`); a GPU in MIG
    mode names its slices.

    Raises:
        NotFound: no such node. InvalidRequest: an index the node has no GPU for.
    """
    node = next((n for n in nodes if n.name == node_name), None)
    if node is None:
        raise NotFound(f"node {node_name!r}: no such node here (nodes: {', '.join(n.name for n in nodes) or 'none'})")
    have = [g.index for g in node.gpus]
    if gpus is None:
        return node, (WHOLE_NODE,)
    # a GPU in MIG mode (its NVML index, as an XID names it) is drained through its slices
    gpus = [i for index in gpus for i in ([g.index for g in node.gpus if g.parent == index] or [index])]
    unknown = [i for i in gpus if i not in have]
    if unknown:
        raise InvalidRequest("gpus", f"node {node.name} has no GPU {', '.join(map(str, unknown))}",
                             f"its GPUs are {', '.join(map(str, have)) or 'none'}")
    return node, tuple(dict.fromkeys(gpus))


def drained_by_node(drains: Iterable[Drain]) -> dict[str, frozenset[int]]:
    """What the scheduler reads: each node's drained GPU indexes."""
    out: dict[str, set[int]] = {}
    for drain in drains:
        out.setdefault(drain.node, set()).add(drain.gpu)
    return {node: frozenset(gpus) for node, gpus in out.items()}


def drained_gpus(node: Node, drains: Mapping[int, Drain]) -> dict[int, Drain]:
    """Each drained GPU of `node` and its drain (a drained node's stands for every GPU's)."""
    whole = drains.get(WHOLE_NODE)
    return {g.index: whole or drains[g.index] for g in node.gpus if whole is not None or g.index in drains}


def gpu_state(drained: bool, busy: bool) -> str | None:
    """A drained GPU's state as Slurm names a node's: DRAINING while a job still runs on it, DRAINED after."""
    if not drained:
        return None
    return "DRAINING" if busy else "DRAINED"
