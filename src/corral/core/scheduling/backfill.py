"""A node's future: what will be free when, given running jobs' time limits and reservations.

Backfill asks one question of it: the earliest moment a request fits for its whole
time limit. Asked at the present, the answer says whether a job may start now without
touching anything reserved for a job ahead of it; asked of a job that must wait, it
gives the job's estimated start, which then becomes that job's reservation.

`ProfileIndex` asks it of a whole machine: the node where a request fits first (the
lowest-index one among equals). It keeps, for each GPU count g, the nodes ordered by
the first moment they have g GPUs free, a bound on when anything needing g GPUs could
start there, so a pass asks only the few nodes that could win instead of all of them.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from corral.core.scheduling import sharing
from corral.core.scheduling.drains import WHOLE_NODE
from corral.core.scheduling.resources import Allocation, Node, gpu_matches, node_matches
from corral.core.jobspec.request import Request
from corral.core.scheduling.topology import ANY_GPUS, Option, choose_gpus

INFINITY = math.inf
_moment = operator.itemgetter(0)


@dataclass(slots=True)
class NodeProfile:
    """Free CPUs, memory and GPUs of one node over time, as segments starting at `times[k]`."""

    node: Node
    times: list[float]
    cpus: list[int]
    mem: list[int]
    gpus: list[frozenset[int]]
    matching: dict[tuple[str | None, int | None, str | None], tuple[int, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """The node's GPUs that match a (type, memory) requirement, in the node's order (a cache)."""
    shared: list[dict[int, int]] | None = field(default=None, init=False, repr=False, compare=False)
    """Per segment, the megabytes held on each shared GPU (`corral.core.scheduling.sharing`); None: nothing shared here."""
    options: dict[str | None, tuple[Option, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)
    """How a --constraint restricts the node's GPUs (`corral.core.scheduling.topology`), where it knows links (a cache)."""

    @classmethod
    def build(cls, node: Node, running: Iterable[Allocation], now: float,
              drained: frozenset[int] = frozenset(), shareable: frozenset[int] = frozenset()) -> NodeProfile:
        """The node as running jobs leave it: held now, back at their end (never, without a time limit).

        `drained`: its GPUs that are never free (`corral.core.scheduling.drains`); with `WHOLE_NODE` among them,
        nothing of it is. `shareable`: its GPUs never free for a whole-GPU job, where sharing jobs may still
        go (`corral.core.scheduling.sharing.shareable_beside`); one also drained is drained.
        """
        if drained or shareable:
            return cls._drained(node, running, now, drained, shareable)
        cpus, mem, gpus = node.cpus, node.mem_mb, {g.index for g in node.gpus}
        ending: list[tuple[float, Allocation]] = []
        shares: list[Allocation] = []
        for alloc in running:
            if alloc.gpu_share_mb:
                shares.append(alloc)
            cpus -= alloc.cpus
            mem -= alloc.mem_mb
            gpus.difference_update(alloc.gpu_ids)
            end = alloc.end_time
            if end is not None and end < INFINITY:
                ending.append((max(end, now), alloc))
        profile = cls(node, [now], [cpus], [mem], [frozenset(gpus)])
        times, free_cpus, free_mem, free_gpus = profile.times, profile.cpus, profile.mem, profile.gpus
        ending.sort(key=_moment)
        for moment, alloc in ending:
            cpus += alloc.cpus
            mem += alloc.mem_mb
            gpus.update(alloc.gpu_ids)
            if moment != times[-1]:
                times.append(moment)
                free_cpus.append(cpus)
                free_mem.append(mem)
                free_gpus.append(frozenset(gpus))
            else:  # released together (or already over): one segment
                free_cpus[-1], free_mem[-1], free_gpus[-1] = cpus, mem, frozenset(gpus)
        if shares:
            sharing.overlay(profile, shares, now)
        return profile

    @classmethod
    def _drained(cls, node: Node, running: Iterable[Allocation], now: float, drained: frozenset[int],
                 shareable: frozenset[int]) -> NodeProfile:
        profile = cls.build(node, running, now)
        if WHOLE_NODE in drained:
            count = len(profile.times)
            profile.cpus, profile.mem, profile.gpus = [0] * count, [0] * count, [frozenset()] * count
        else:
            off = drained | shareable
            profile.gpus = [free - off for free in profile.gpus]
        sharing.without(profile, drained, WHOLE_NODE in drained)
        return profile

    def earliest(self, request: Request, duration: float) -> tuple[float, tuple[int, ...]] | None:
        """The first moment the request fits here for `duration`, and the GPUs it would get; None: never.

        The GPUs are the lowest in the node's order among those that match and stay free throughout; where
        the node knows how its GPUs are linked, the closest (packed, for one GPU: `corral.core.scheduling.topology`).
        """
        need = request.gpus
        matching: tuple[int, ...] = ()
        if request.picks_nodes and not node_matches(self.node, request):
            return None
        if need:
            key = (request.gpu_type, request.gpu_mem_mb, request.requirements)
            cached = self.matching.get(key)
            if cached is None:
                cached = self.matching[key] = tuple(
                    g.index for g in self.node.gpus if gpu_matches(g, request, self.node))
            matching = cached
            if len(matching) < need:
                return None
            if request.gpu_share_mb:
                matching = self._constrained(request, matching)
                return sharing.earliest(self, request, duration, matching) if matching else None
        want_cpus, want_mem = request.cpus, request.mem_mb
        if request.exclusive:  # the whole node, free throughout: every GPU, CPU and all the memory
            if request.cpus > self.node.cpus or request.mem_mb > self.node.mem_mb:
                return None
            need, matching = len(self.node.gpus), tuple(g.index for g in self.node.gpus)
            want_cpus, want_mem = self.node.cpus, self.node.mem_mb
        times, cpus, mem, gpus = self.times, self.cpus, self.mem, self.gpus
        n = len(times)
        for k in range(n):
            # A window can only fit where its first segment does: most starts end here.
            if cpus[k] < want_cpus or mem[k] < want_mem or len(gpus[k]) < need:
                continue
            free = gpus[k]
            end = times[k] + duration
            j = k + 1
            while j < n and times[j] < end:
                if cpus[j] < want_cpus or mem[j] < want_mem:
                    break
                if need:
                    free = free & gpus[j]
                    if len(free) < need:
                        break
                j += 1
            else:
                if not need:
                    return times[k], ()
                topology = self.node.topology
                if topology is None:
                    chosen = [i for i in matching if i in free][:need]
                    if len(chosen) == need:
                        return times[k], tuple(chosen)
                    continue
                options = ANY_GPUS if request.exclusive else self.options.get(request.features)
                if options is None:
                    options = self.options[request.features] = topology.plan(request.features, self.node.features)
                picked = choose_gpus(topology, options, [i for i in matching if i in free], need)
                if picked is not None:
                    return times[k], picked
        return None

    def _constrained(self, request: Request, matching: tuple[int, ...]) -> tuple[int, ...]:
        """The GPUs a sharing job's --constraint leaves it (GPU features, `nvlink`: `corral.core.scheduling.topology`)."""
        topology = self.node.topology
        if topology is None or request.features is None:
            return matching
        options = self.options.get(request.features)
        if options is None:
            options = self.options[request.features] = topology.plan(request.features, self.node.features)
        if any(allowed is None for allowed, _ in options):
            return matching
        return tuple(i for i in matching if any(i in allowed for allowed, _ in options if allowed is not None))

    def first_free(self) -> list[float]:
        """For each g from 0 to the node's GPU count, the first moment g GPUs are free (INFINITY: never).

        Nothing needing g GPUs can start here before it: a lower bound on `earliest`.
        """
        out = [INFINITY] * (len(self.node.gpus) + 1)
        most = -1
        for moment, free in zip(self.times, self.gpus):
            count = len(free)
            if count > most:
                for g in range(most + 1, min(count, len(out) - 1) + 1):
                    out[g] = moment
                most = count
                if most >= len(out) - 1:
                    break
        return out

    def reserve(self, start: float, end: float, cpus: int, mem: int, gpus: tuple[int, ...], share_mb: int = 0) -> None:
        """Take resources away during [start, end); `share_mb`: a sharing job's megabytes of its one GPU."""
        first = self._split(start)
        last = self._split(end) if end < INFINITY else len(self.times)
        if share_mb:
            sharing.reserve(self, first, last, gpus, share_mb)
            gpus = ()
        taken = frozenset(gpus)
        for k in range(first, last):
            self.cpus[k] -= cpus
            self.mem[k] -= mem
            self.gpus[k] = self.gpus[k] - taken
        if taken and self.shared is not None:  # taken whole (a reservation's): no sharing job goes there either
            for k in range(first, last):
                self.shared[k] = {g: mb for g, mb in self.shared[k].items() if g not in taken}

    def _split(self, moment: float) -> int:
        """Index of the segment that starts at `moment`, splitting the one that contains it."""
        k = bisect.bisect_right(self.times, moment) - 1
        if self.times[k] == moment:
            return k
        self.times.insert(k + 1, moment)
        self.cpus.insert(k + 1, self.cpus[k])
        self.mem.insert(k + 1, self.mem[k])
        self.gpus.insert(k + 1, self.gpus[k])
        if self.shared is not None:
            self.shared.insert(k + 1, self.shared[k])
        return k + 1


class ProfileIndex:
    """The profiles of all nodes, and where a request fits first among them.

    For each GPU count g it keeps (first moment g GPUs are free, node index) of every node
    that ever has g GPUs free, in order. A request for g GPUs is asked of nodes in that
    order, and the search ends at the first node whose bound is past the best start found:
    the answer is the one a scan of every node gives, at a fraction of the cost.
    """

    __slots__ = ("profiles", "_bounds", "_order", "shared")

    def __init__(self, profiles: Sequence[NodeProfile]) -> None:
        self.profiles = list(profiles)
        self._bounds = [profile.first_free() for profile in self.profiles]
        most = max((len(b) for b in self._bounds), default=0)
        self._order: list[list[tuple[float, int]]] = [
            sorted((b[g], k) for k, b in enumerate(self._bounds) if g < len(b) and b[g] < INFINITY)
            for g in range(most)
        ]
        self.shared = {k for k, profile in enumerate(self.profiles) if profile.shared is not None}
        """The nodes where some GPU is shared (`corral.core.scheduling.sharing`): a share may fit there at any moment."""

    def earliest(self, request: Request, duration: float) -> tuple[int, float, tuple[int, ...]] | None:
        """The node (by index) where the request fits first for `duration`, when, and the GPUs it would get.

        Among nodes where it fits equally early, the lowest index; None: it fits nowhere, ever.
        """
        need = request.gpus
        if need >= len(self._order):
            return None
        if request.gpu_share_mb:
            return sharing.earliest_anywhere(self.profiles, self.shared, self._order[1], request, duration)
        best: tuple[int, float, tuple[int, ...]] | None = None
        best_start, best_k = INFINITY, -1
        profiles = self.profiles
        for bound, k in self._order[need]:
            if bound > best_start or (bound == best_start and k > best_k):
                break
            found = profiles[k].earliest(request, duration)
            if found is not None and (found[0] < best_start or (found[0] == best_start and k < best_k)):
                best_start, best_k = found[0], k
                best = (k, found[0], found[1])
        return best

    def reserve(self, k: int, start: float, end: float, cpus: int, mem: int, gpus: tuple[int, ...],
                share_mb: int = 0) -> None:
        """Take resources away from node `k` during [start, end), and re-rank it."""
        self.profiles[k].reserve(start, end, cpus, mem, gpus, share_mb)
        if share_mb:
            self.shared.add(k)
        old, new = self._bounds[k], self.profiles[k].first_free()
        self._bounds[k] = new
        for g, (before, after) in enumerate(zip(old, new)):
            if before == after:
                continue
            order = self._order[g]
            if before < INFINITY:
                del order[bisect.bisect_left(order, (before, k))]
            if after < INFINITY:
                bisect.insort(order, (after, k))
