"""Sharing a GPU: jobs that hold part of one GPU's memory instead of whole GPUs.

A sharing job (`--gpu-mem 20G --gpu-share`, or Slurm's `--gres=shard:N` where a node declares
`[node] shards_per_gpu`) asks for megabytes of one GPU: `Request.gpu_share_mb`. Several such jobs run on one
GPU as long as their budgets together fit its memory; the monitor holds each to its budget
(`corral.monitor.sharing`).

The scheduler's rules, kept here so that `corral.core.scheduling.backfill` only hooks them in:

- a GPU with any share in use is not free for a whole-GPU job (a sharing allocation holds its GPU's index,
  so `NodeProfile.build` already leaves it out of the free set); a whole-GPU job never lands on a shared GPU;
- a sharing request fits a GPU that is wholly free, or one already shared whose used memory plus the request
  stays within its memory for the whole window;
- among the GPUs where it fits, the fullest shared one is taken first (best fit), then a wholly free one, so
  that sharing jobs pack together and whole GPUs stay free.

The profile's extra state is `NodeProfile.shared`: per segment, the megabytes in use on each shared GPU; None
on a node where nothing is shared, which keeps the common path as it was.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.core.units.iso_times import iso_utc
from corral.core.scheduling.resources import Allocation, Node
from corral.core.jobspec.request import Request
from corral.errors import InvalidRequest

if TYPE_CHECKING:
    from corral.core.scheduling.backfill import NodeProfile

OVER_BUDGET_WARN, OVER_BUDGET_STOP = "warn", "stop"
OVER_BUDGET_MODES = (OVER_BUDGET_WARN, OVER_BUDGET_STOP)


def shard_mb(node: Node, shards_per_gpu: int) -> int:
    """One shard's megabytes on the node: its smallest GPU's memory split `shards_per_gpu` ways (0: no shards)."""
    if shards_per_gpu <= 0 or not node.gpus:
        return 0
    return min(g.mem_mb for g in node.gpus) // shards_per_gpu


def shards_to_mb(shards: int, nodes: Sequence[Node], shards_per_gpu: int) -> int:
    """A `--gres=shard:N` request's GPU memory in megabytes.

    Raises:
        InvalidRequest: the server declares no shards, or more shards than one GPU has.
    """
    sized = [shard_mb(node, shards_per_gpu) for node in nodes if node.gpus]
    if shards_per_gpu <= 0 or not sized or not min(sized):
        raise InvalidRequest("gres", f"shard:{shards}: this server shares no GPU by shards",
                             "an admin sets [node] shards_per_gpu in config.toml; or ask for --gpu-mem SIZE --gpu-share")
    if shards > shards_per_gpu:
        raise InvalidRequest("gres", f"shard:{shards} is more than one GPU has ({shards_per_gpu} shards each)",
                             f"ask for at most shard:{shards_per_gpu}, or for whole GPUs with --gres=gpu:N")
    return shards * min(sized)


def check_over_budget(value: object, where: str = "config.toml") -> str:
    """The `[node] gpu_share_over_budget` setting: what a sharing job over its GPU memory budget gets.

    Raises:
        InvalidRequest: anything but "warn" or "stop".
    """
    if value in OVER_BUDGET_MODES:
        return str(value)
    raise InvalidRequest("node.gpu_share_over_budget", f"is {value!r} in {where}",
                         'use "warn" (a warning alone) or "stop" (a warning, then the job is stopped after the grace)')


def overlay(profile: NodeProfile, running: Iterable[Allocation], now: float) -> None:
    """Mark the sharing allocations in a freshly built profile: each segment's used megabytes per shared GPU,
    and those GPUs out of its whole-GPU free sets (while any share of them is held)."""
    sharing = [(a.gpu_ids, a.gpu_share_mb, math.inf if a.end_time is None else max(a.end_time, now))
               for a in running if a.gpu_share_mb]
    if not sharing:
        return
    shared: list[dict[int, int]] = []
    for k, moment in enumerate(profile.times):
        used: dict[int, int] = {}
        for gpu_ids, mb, end in sharing:
            if end > moment:
                for g in gpu_ids:
                    used[g] = used.get(g, 0) + mb
        shared.append(used)
        if used:
            profile.gpus[k] = profile.gpus[k] - used.keys()
    profile.shared = shared


def without(profile: NodeProfile, drained: frozenset[int], whole_node: bool) -> None:
    """A drained (or avoided) GPU takes no new share either."""
    if profile.shared is None:
        return
    profile.shared = [{} if whole_node else {g: mb for g, mb in used.items() if g not in drained}
                      for used in profile.shared]


def shareable_beside(held: Mapping[str, Mapping[int, int]]) -> dict[str, frozenset[int]]:
    """The GPUs in use outside corral where `[node] outside_processes = "share"`, per node: the scheduler's
    `shareable` input. Whole-GPU jobs treat them as drained (a job only they could run waits with
    ReqNodeNotAvail and blocks nobody); sharing jobs may use what their memory has left (`outside_holds`
    says how much that is)."""
    return {node: frozenset(gpus) for node, gpus in held.items() if gpus}


def earliest(profile: NodeProfile, request: Request, duration: float,
             matching: tuple[int, ...]) -> tuple[float, tuple[int, ...]] | None:
    """The first moment a sharing request fits on one GPU of the node for `duration`, and that GPU; None: never."""
    need = request.gpu_share_mb
    memory = {g.index: g.mem_mb for g in profile.node.gpus}
    candidates = [g for g in matching if memory[g] >= need]
    if not candidates:
        return None
    times, cpus, mem, gpus = profile.times, profile.cpus, profile.mem, profile.gpus
    shared = profile.shared
    want_cpus, want_mem = request.cpus, request.mem_mb
    n = len(times)

    def fits(k: int, g: int) -> bool:
        if g in gpus[k]:
            return True
        if shared is None:
            return False
        used = shared[k].get(g)
        return used is not None and used + need <= memory[g]

    for k in range(n):
        if cpus[k] < want_cpus or mem[k] < want_mem:
            continue
        here = [g for g in candidates if fits(k, g)]
        if not here:
            continue
        end = times[k] + duration
        j = k + 1
        while j < n and times[j] < end:
            if cpus[j] < want_cpus or mem[j] < want_mem:
                break
            here = [g for g in here if fits(j, g)]
            if not here:
                break
            j += 1
        else:
            return times[k], (_best_fit(here, k, shared, memory),)
    return None


def _best_fit(gpus: list[int], k: int, shared: list[dict[int, int]] | None, memory: dict[int, int]) -> int:
    """The fullest shared GPU (the least memory left), else the first wholly free one in the node's order."""
    used = shared[k] if shared is not None else {}
    on_shared = [g for g in gpus if g in used]
    if on_shared:
        return min(on_shared, key=lambda g: (memory[g] - used[g], gpus.index(g)))
    return gpus[0]


def reserve(profile: NodeProfile, first: int, last: int, gpus: tuple[int, ...], mb: int) -> None:
    """Hold `mb` of each of `gpus` in segments [first, last); they leave the whole-GPU free sets there."""
    if profile.shared is None:
        profile.shared = [{} for _ in profile.times]
    taken = frozenset(gpus)
    for k in range(first, last):
        used = profile.shared[k] = dict(profile.shared[k])
        for g in gpus:
            used[g] = used.get(g, 0) + mb
        profile.gpus[k] = profile.gpus[k] - taken


def earliest_anywhere(profiles: Sequence[NodeProfile], shared: Iterable[int], order: Sequence[tuple[float, int]],
                      request: Request, duration: float) -> tuple[int, float, tuple[int, ...]] | None:
    """The node (by index) where a sharing request fits first, when and on which GPU; the lowest index among
    equals, as `ProfileIndex.earliest`.

    Nodes where a GPU is shared (`shared`) are asked first, and the first that takes it now on a GPU already
    shared wins outright: sharing jobs pack together, leaving whole GPUs free. Elsewhere it needs a wholly free
    GPU, so `order` (the nodes by the first moment one GPU is free there) bounds the search as for a one-GPU job.
    """
    best: tuple[int, float, tuple[int, ...]] | None = None
    best_start, best_k = math.inf, -1
    asked = set(shared)
    for k in sorted(asked):
        profile = profiles[k]
        found = profile.earliest(request, duration)
        if found is None or found[0] >= best_start:
            continue
        best_start, best_k, best = found[0], k, (k, found[0], found[1])
        if found[0] == profile.times[0] and profile.shared is not None and found[1][0] in profile.shared[0]:
            return best  # now, beside other sharing jobs: nothing does better
    for bound, k in order:
        if bound > best_start or (bound == best_start and k > best_k):
            break
        if k in asked:
            continue
        found = profiles[k].earliest(request, duration)
        if found is not None and (found[0] < best_start or (found[0] == best_start and k < best_k)):
            best_start, best_k, best = found[0], k, (k, found[0], found[1])
    return best


@dataclass(frozen=True, slots=True)
class SharingSettings:
    """A node's `[node]` settings for sharing GPUs."""

    shards_per_gpu: int = 0
    """`shards_per_gpu`: each GPU's memory split this many ways for `--gres=shard:N` (0: no shards)."""
    over_budget: str = OVER_BUDGET_STOP
    """`gpu_share_over_budget`: a sharing job over its budget is warned, then stopped after the grace ("stop"),
    or only warned ("warn")."""
    grace_s: float = 60.0
    """`gpu_share_grace_s`: how long a sharing job may stay over its budget after the warning."""


def outside_holds(used: Mapping[str, Mapping[int, int]]) -> list[Allocation]:
    """GPU memory that processes outside corral hold (`[node] outside_processes = "share"`), as allocations that
    never end: sharing jobs fit beside them within what is left, whole-GPU jobs keep off those GPUs."""
    return [Allocation(-1 - gpu, node, (gpu,), 0, 0, user="(outside corral)", gpu_share_mb=max(1, mb))
            for node, gpus in used.items() for gpu, mb in gpus.items()]


SHARING_KEYS = ("shards_per_gpu", "gpu_share_over_budget", "gpu_share_grace_s")
MAX_SHARDS_PER_GPU = 1024


def sharing_settings(base: SharingSettings, values: Mapping[str, object], where: str) -> SharingSettings:
    """`[node]`'s sharing keys (`SHARING_KEYS`, TOML values already of their types) over `base`.

    Raises:
        InvalidRequest: a value out of range, named.
    """
    shards = values.get("shards_per_gpu", base.shards_per_gpu)
    assert isinstance(shards, int)
    if not 0 <= shards <= MAX_SHARDS_PER_GPU:
        raise InvalidRequest("node.shards_per_gpu", f"is {shards} in {where}",
                             f"give 0 (no shards) up to {MAX_SHARDS_PER_GPU}, e.g. 4: a shard is a quarter of a GPU's memory")
    over = check_over_budget(values.get("gpu_share_over_budget", base.over_budget), where)
    grace = values.get("gpu_share_grace_s", base.grace_s)
    assert isinstance(grace, (int, float))
    if not 0 <= grace <= 86400:
        raise InvalidRequest("node.gpu_share_grace_s", f"is {grace} in {where}",
                             "give the seconds a job may stay over its GPU memory budget, 0 to 86400, e.g. 60")
    return SharingSettings(shards, over, float(grace))


@dataclass(frozen=True, slots=True)
class OverBudget:
    """A sharing job found over its GPU memory budget by a sample."""

    job_id: int
    used_mb: float
    budget_mb: int
    asked_as: str
    """How its budget was asked for: `--gpu-mem` or `--gres=shard:N`, for the reason to name."""
    first: bool
    """The first sample over since it was last within: the warning."""
    stop_at: float | None
    """When it is stopped if it stays over (`stop`); None where the setting is `warn`."""
    stop: bool
    """Over for the whole grace: stop it now."""

    def reason(self) -> str:
        """`GPU memory 24.1 GB over its budget of 20 GB (--gpu-mem)`."""
        return f"GPU memory {gigabytes(self.used_mb)} over its budget of {gigabytes(self.budget_mb)} ({self.asked_as})"

    def warning(self) -> str:
        """What a warned job's reason says while it runs over its budget: the reason, and when it is stopped."""
        if self.stop_at is None:
            return self.reason()
        return f"{self.reason()}: stopped at {iso_utc(self.stop_at)} unless it drops back within it"


def gigabytes(mb: float) -> str:
    """`24.1 GB`, `20 GB`: megabytes as a sharing job's reason says them."""
    return f"{mb / 1024:.1f}".removesuffix(".0") + " GB"


def asked_as(shards: int) -> str:
    return f"--gres=shard:{shards}" if shards else "--gpu-mem"


class BudgetWatch:
    """Which sharing jobs are over their GPU memory budget, since when, and which to warn or stop now."""

    __slots__ = ("settings", "over_since")

    def __init__(self, settings: SharingSettings) -> None:
        self.settings = settings
        self.over_since: dict[int, float] = {}

    def check(self, budgets: Mapping[int, tuple[int, str]], used: Mapping[int, float],
              now: float) -> tuple[list[OverBudget], list[int]]:
        """This sample's verdicts over the running sharing jobs' `budgets` (job -> (MB, how asked)) and the
        GPU memory their processes use (`used`; a job NVML lists no process of is within), and the jobs back
        within their budget after being over."""
        for job_id in [j for j in self.over_since if j not in budgets]:
            del self.over_since[job_id]
        stopping = self.settings.over_budget == OVER_BUDGET_STOP
        grace = self.settings.grace_s
        verdicts, within = [], []
        for job_id, (budget, asked) in budgets.items():
            mb = used.get(job_id)
            if mb is None or mb <= budget:
                if self.over_since.pop(job_id, None) is not None:
                    within.append(job_id)
                continue
            first = job_id not in self.over_since
            since = self.over_since.setdefault(job_id, now)
            verdicts.append(OverBudget(job_id, mb, budget, asked, first, since + grace if stopping else None,
                                       stopping and now - since >= grace))
        return verdicts, within
