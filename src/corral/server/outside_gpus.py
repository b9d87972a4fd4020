"""GPUs of this machine in use outside corral (`corral.core.monitoring.outside_use`), as the monitor's last sample found them.

Only the job service changes them, on the event loop thread, after each monitoring tick; what the scheduler
reads is `avoided()`, beside the drained GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable

from corral.core.monitoring.outside_use import (
    AVOID,
    SHARE,
    OutsideProcess,
    avoided_by_node,
    by_gpu,
    carry_since,
    note,
    shared_by_node,
)
from corral.core.scheduling.resources import Node


class OutsideGpus:
    def __init__(self, node: str | None, mode: str = AVOID) -> None:
        """`node`: this machine's node, which the monitor samples (None: it samples none); `mode`: its
        `[node] outside_processes`."""
        self.node = node
        self.modes = {node: mode} if node is not None else {}
        self.processes: tuple[OutsideProcess, ...] = ()

    def update(self, seen: Iterable[OutsideProcess]) -> bool:
        """Take a sample's outside processes; whether which GPUs hold which of them changed."""
        if self.node is None:
            return False
        before = {(p.gpu, p.pid, p.user) for p in self.processes}
        memory = {(p.gpu, p.pid): p.mem_mb for p in self.processes}
        self.processes = carry_since(self.processes, seen)
        if before != {(p.gpu, p.pid, p.user) for p in self.processes}:
            return True
        # where sharing jobs fit beside them, what they hold matters too
        return self.modes.get(self.node) == SHARE and memory != {(p.gpu, p.pid): p.mem_mb for p in self.processes}

    def by_node(self) -> dict[str, tuple[OutsideProcess, ...]]:
        return {self.node: self.processes} if self.node is not None and self.processes else {}

    def of_node(self, name: str) -> dict[int, list[OutsideProcess]]:
        """Each GPU of the node in use outside corral, and by what."""
        return by_gpu(self.processes) if name == self.node else {}

    def avoided(self) -> dict[str, frozenset[int]]:
        """The GPUs the scheduler leaves alone."""
        return avoided_by_node(self.by_node(), self.modes)

    def shared(self, nodes: tuple[Node, ...]) -> dict[str, dict[int, int]]:
        """Where the mode is `share`: each GPU's megabytes held outside corral, which sharing jobs fit beside."""
        memory = {n.name: {g.index: g.mem_mb for g in n.gpus} for n in nodes if n.name == self.node}
        return shared_by_node(self.by_node(), self.modes, memory)

    def note(self) -> str:
        """Which GPUs a job waiting with ReqNodeNotAvail for them waits for, and whose process holds them."""
        return note(self.by_node(), self.modes)
