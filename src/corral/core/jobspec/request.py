"""What a job asks for of a machine: GPUs, CPUs, memory and which nodes may run it, as the scheduler sees it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Request:
    """The resource part of a job, as the scheduler sees it."""

    gpus: int = 0
    gpu_type: str | None = None
    gpu_mem_mb: int | None = None
    cpus: int = 1
    mem_mb: int = 0
    requirements: str | None = None
    """A ClassAd expression (HTCondor's requirements) each of its GPUs (or, without GPU terms, its node) meets."""
    exclusive: bool = False
    """It takes its whole node: every GPU, CPU and all the memory, nothing beside it."""
    features: str | None = None
    """A --constraint over the node's features (`corral.core.jobspec.features`)."""
    nodelist: tuple[str, ...] = ()
    """The node it must run on (empty: any)."""
    exclude: tuple[str, ...] = ()
    """Nodes it must not run on."""
    gpu_share_mb: int = 0
    """A sharing job's (`corral.core.scheduling.sharing`): the memory it needs of one GPU that others may share; 0: whole GPUs."""

    @property
    def picks_nodes(self) -> bool:
        """Whether only some nodes may run it, whatever their GPUs (see `node_matches`)."""
        return self.requirements is not None or self.features is not None or bool(self.nodelist or self.exclude)
