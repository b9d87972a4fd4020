"""A node's future: what will be free when, given running jobs' time limits and reservations.

Backfill asks one question of it: the earliest moment a request fits for its whole
time limit. Asked at the present, the answer says whether a job may start now without
touching anything reserved for a job ahead of it; asked of a job that must wait, it
gives the job's estimated start, which then becomes that job's reservation.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass

from corral.core.resources import Allocation, Node, Request, gpu_matches

INFINITY = math.inf


@dataclass(slots=True)
class NodeProfile:
    """Free CPUs, memory and GPUs of one node over time, as segments starting at `times[k]`."""

    node: Node
    times: list[float]
    cpus: list[int]
    mem: list[int]
    gpus: list[frozenset[int]]

    @classmethod
    def build(cls, node: Node, running: Iterable[Allocation], now: float) -> NodeProfile:
        """The node as running jobs leave it: held now, back at their end (never, without a time limit)."""
        cpus, mem, gpus = node.cpus, node.mem_mb, {g.index for g in node.gpus}
        releases: dict[float, tuple[int, int, set[int]]] = {}
        for alloc in running:
            cpus -= alloc.cpus
            mem -= alloc.mem_mb
            gpus -= set(alloc.gpu_ids)
            end = alloc.end_time if alloc.end_time is not None else INFINITY
            if end < INFINITY:
                c, m, g = releases.get(max(end, now), (0, 0, set()))
                releases[max(end, now)] = (c + alloc.cpus, m + alloc.mem_mb, g | set(alloc.gpu_ids))
        profile = cls(node, [now], [cpus], [mem], [frozenset(gpus)])
        for moment in sorted(releases):
            c, m, g = releases[moment]
            cpus, mem, gpus = cpus + c, mem + m, gpus | g
            if moment == profile.times[-1]:
                profile.cpus[-1], profile.mem[-1], profile.gpus[-1] = cpus, mem, frozenset(gpus)
            else:
                profile.times.append(moment)
                profile.cpus.append(cpus)
                profile.mem.append(mem)
                profile.gpus.append(frozenset(gpus))
        return profile

    def earliest(self, request: Request, duration: float) -> tuple[float, tuple[int, ...]] | None:
        """The first moment the request fits here for `duration`, and the GPUs it would get; None: never."""
        matching = [g.index for g in self.node.gpus if gpu_matches(g, request)] if request.gpus else []
        if len(matching) < request.gpus:
            return None
        times = self.times
        for k, start in enumerate(times):
            end = start + duration
            cpus, mem = self.cpus[k], self.mem[k]
            gpus = self.gpus[k]
            j = k + 1
            while cpus >= request.cpus and mem >= request.mem_mb and j < len(times) and times[j] < end:
                cpus, mem = min(cpus, self.cpus[j]), min(mem, self.mem[j])
                gpus = gpus & self.gpus[j]
                j += 1
            if cpus < request.cpus or mem < request.mem_mb:
                continue
            chosen = [i for i in matching if i in gpus][: request.gpus]
            if len(chosen) == request.gpus:
                return start, tuple(chosen)
        return None

    def reserve(self, start: float, end: float, cpus: int, mem: int, gpus: tuple[int, ...]) -> None:
        """Take resources away during [start, end)."""
        first = self._split(start)
        last = self._split(end) if end < INFINITY else len(self.times)
        taken = frozenset(gpus)
        for k in range(first, last):
            self.cpus[k] -= cpus
            self.mem[k] -= mem
            self.gpus[k] = self.gpus[k] - taken

    def _split(self, moment: float) -> int:
        """Index of the segment that starts at `moment`, splitting the one that contains it."""
        k = bisect.bisect_right(self.times, moment) - 1
        if self.times[k] == moment:
            return k
        self.times.insert(k + 1, moment)
        self.cpus.insert(k + 1, self.cpus[k])
        self.mem.insert(k + 1, self.mem[k])
        self.gpus.insert(k + 1, self.gpus[k])
        return k + 1

