"""Which GPUs a new job may be given (`GpuAvailability`): none that an admin drained or that failed
(`corral.server.draining`, `corral.server.gpu_faults`), none that a process outside corral uses
(`corral.server.outside_gpus`), unless the node shares those with sharing jobs. The scheduling pass reads the
outcome, kept up to date here whenever one of them changes; the nodes' view shows them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from corral.backends.base import Capabilities
from corral.core.access.identity import AccessPolicy, Caller
from corral.core.jobspec.job import Job
from corral.core.monitoring.gpu_health import HealthEvent, HealthFigures
from corral.core.monitoring.outside_use import OutsideProcess, unavailable
from corral.core.scheduling.drains import Drain
from corral.core.scheduling.resources import Allocation
from corral.core.scheduling.sharing import outside_holds, shareable_beside
from corral.errors import Conflict
from corral.server.draining import Drains
from corral.server.gpu_faults import GpuFaults
from corral.server.gpu_health import GpuHealth
from corral.server.job_table import JobTable
from corral.server.nodes_view import nodes_view
from corral.server.outside_gpus import OutsideGpus
from corral.server.scheduling import SchedulingPass


class GpuAvailability:
    def __init__(self, drains: Drains, outside: OutsideGpus, health: GpuHealth, faults: GpuFaults, *,
                 scheduling: SchedulingPass, table: JobTable, capabilities: Capabilities, access: AccessPolicy,
                 changed: Callable[[], None]) -> None:
        """`scheduling`: the pass told what it may not give; `table`: whose pending jobs' reasons say which GPUs are
        drained; `access`: who may drain; `changed`: the jobs' circumstances changed (pass again, views refresh)."""
        self.drains = drains
        self.outside = outside
        self.health = health
        self.faults = faults
        self.scheduling = scheduling
        self.table = table
        self.capabilities = capabilities
        self.access = access
        self._changed = changed

    def drain(self, caller: Caller, node: str, gpus: Sequence[int] | None, reason: object) -> list[Drain]:
        """Take GPUs (None: the whole node) out of scheduling, for an admin; jobs on them run on."""
        self._check_drains(caller, f"draining {_what(node, gpus)}")
        drains = self.drains.drain(node, gpus, reason, caller.user)
        self.changed()
        return drains

    def resume(self, caller: Caller, node: str, gpus: Sequence[int] | None) -> list[Drain]:
        """Give drained GPUs (None: the node and all its GPUs) back to scheduling, for an admin."""
        self._check_drains(caller, f"resuming {_what(node, gpus)}")
        lifted = self.drains.resume(node, gpus)
        self.changed()
        return lifted

    def _check_drains(self, caller: Caller, action: str) -> None:
        self.access.require(caller, "admin", action)
        if self.capabilities.schedules_itself:
            raise Conflict(f"{action}: this server hands its jobs to {self.capabilities.name}, which places them; "
                           "drain nodes there (scontrol update NodeName=... State=DRAIN on the cluster)")

    def outside_sampled(self, processes: Sequence[OutsideProcess]) -> None:
        """The monitor's last sample of processes outside corral on this machine's GPUs."""
        if self.outside.update(processes):
            self.changed()

    def health_sampled(self, figures: Mapping[int, HealthFigures], at: float) -> list[HealthEvent]:
        """The monitor's last sample of this machine's GPUs' health: a fatal fault drains its GPU and ends the
        jobs on it. Returns what happened."""
        events = self.health.update(figures, at)
        if events and self.faults.act_on(events):
            self.changed()
        return events

    def nodes_view(self, allocations: Iterable[Allocation], active: Mapping[int, Job], *, isolation: tuple[str, str],
                   allocates: bool, shards_per_gpu: int) -> list[dict[str, Any]]:
        """Each node, its GPUs, who holds them, what is drained, failed and in use outside corral
        (`corral.server.nodes_view`)."""
        nodes, drains = self.scheduling.nodes, self.drains
        return nodes_view(nodes, allocations, active, isolation=isolation, allocates=allocates,
                          drained={node.name: drains.of_node(node) for node in nodes},
                          outside={node.name: self.outside.of_node(node.name) for node in nodes},
                          shards_per_gpu=shards_per_gpu, held_outside=self.outside.shared(nodes),
                          health={node.name: self.health.of_node(node.name) for node in nodes},
                          node_drains={n.name: d for n in nodes if (d := drains.node_drain(n.name)) is not None})

    def changed(self) -> None:
        """Drained GPUs and avoided ones (in use outside corral) are what no new job is given; shareable ones
        (in use outside corral where the node shares them) what no whole-GPU job is given."""
        drained = self.drains.by_node
        # where sharing jobs may use a GPU in use outside corral: what it holds, unless an admin drained it
        held = {node: {g: mb for g, mb in gpus.items() if g not in drained.get(node, ())}
                for node, gpus in self.outside.shared(self.scheduling.nodes).items()}
        self.scheduling.drained = unavailable(drained, self.outside.avoided())
        self.scheduling.shareable = shareable_beside(held)
        self.scheduling.held_outside = outside_holds(held)
        self.table.drained_note = "; ".join(n for n in (self.drains.note(), self.outside.note()) if n)
        self._changed()


def _what(node: str, gpus: Sequence[int] | None) -> str:
    return f"node {node}" if gpus is None else f"GPU {', '.join(map(str, gpus))} of node {node}"
