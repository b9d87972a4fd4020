"""Drained GPUs and nodes (`corral.core.scheduling.drains`): what admins took out of scheduling, kept in the store.

Only the job service changes them, on the event loop thread; the scheduling pass reads `by_node`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from corral.core.scheduling.drains import WHOLE_NODE, Drain, check_reason, drained_by_node, drained_gpus, gpus_named
from corral.core.scheduling.resources import Node
from corral.errors import Conflict
from corral.store.drains import DrainStore


class Drains:
    def __init__(self, store: DrainStore, nodes: Sequence[Node], clock: Callable[[], float]) -> None:
        self.store = store
        self.nodes = tuple(nodes)
        self.clock = clock
        names = {node.name for node in self.nodes}
        # a drain of a node no longer declared is kept in the store (it may come back) but not applied
        self.drains: dict[tuple[str, int], Drain] = {(d.node, d.gpu): d for d in store.all() if d.node in names}
        self.by_node: dict[str, frozenset[int]] = drained_by_node(self.drains.values())

    def drain(self, node_name: str, gpus: Sequence[int] | None, reason: object, by: str) -> list[Drain]:
        """Take GPUs (None: the whole node) out of scheduling; a drained one gets the new reason.

        Raises:
            InvalidRequest: no reason, or an index the node has no GPU for. NotFound: no such node.
        """
        text = check_reason(reason)
        node, indexes = gpus_named(self.nodes, node_name, gpus)
        now = self.clock()
        drains = [Drain(node.name, i, text, by, now) for i in indexes]
        self.store.put(drains)
        self.drains.update({(d.node, d.gpu): d for d in drains})
        self._changed()
        return drains

    def resume(self, node_name: str, gpus: Sequence[int] | None) -> list[Drain]:
        """Give GPUs (None: the node, and each of its GPUs) back to scheduling; returns the drains lifted.

        Raises:
            NotFound: no such node. InvalidRequest: no such GPU. Conflict: nothing of it is drained.
        """
        node, indexes = gpus_named(self.nodes, node_name, gpus)
        if gpus is None:
            lifted = [d for key, d in self.drains.items() if key[0] == node.name]
        else:
            if (node.name, WHOLE_NODE) in self.drains:
                raise Conflict(f"node {node.name} is drained as a whole: resume it with `corral resume {node.name}` "
                               f"(or scontrol update NodeName={node.name} State=RESUME)")
            lifted = [self.drains[(node.name, i)] for i in indexes if (node.name, i) in self.drains]
        if not lifted:
            what = f"node {node.name}" if gpus is None else f"GPU {', '.join(map(str, indexes))} of node {node.name}"
            raise Conflict(f"{what} is not drained (Invalid node state specified)")
        self.store.remove(node.name, None if gpus is None else [d.gpu for d in lifted])
        for drain in lifted:
            del self.drains[(drain.node, drain.gpu)]
        self._changed()
        return lifted

    def of_node(self, node: Node) -> dict[int, Drain]:
        """Each drained GPU of the node and its drain."""
        return drained_gpus(node, {gpu: d for (name, gpu), d in self.drains.items() if name == node.name})

    def node_drain(self, name: str) -> Drain | None:
        """The drain of the whole node, if it is drained."""
        return self.drains.get((name, WHOLE_NODE))

    def note(self) -> str:
        """What a job that only drained GPUs could run shows after ReqNodeNotAvail: which, and why."""
        parts = []
        for node in self.nodes:
            whole = self.node_drain(node.name)
            if whole is not None:
                parts.append(f"{node.name} drained: {whole.reason}")
                continue
            for gpu, drain in sorted(self.of_node(node).items()):
                parts.append(f"{node.name} GPU {gpu} drained: {drain.reason}")
        return "; ".join(parts)

    def _changed(self) -> None:
        self.by_node = drained_by_node(self.drains.values())
