"""When a job would start if it were submitted now, answered without submitting it (the resource planning view).

The answer is the scheduler's own: the job joins the queue where its priority puts it
(`corral.core.scheduling.priority.prioritize`), and the pass (`corral.core.scheduling.policy.schedule`) runs over the
running jobs and every job ahead of it; jobs behind it cannot delay it, so they are left out. What
holds it back is read off the same pass: the running jobs, the jobs starting now and the
reservations of waiting jobs ahead that hold its GPUs (or its node's CPUs and memory) until it
starts. The what-ifs are the same pass with the job changed: the longest time limit that lets it
start now (backfill), and fewer GPUs, each kept when it starts sooner.

Where `backfill_depth` reservations are made before the pass reaches the job, the real pass gives
it none; the forecast then runs once more with room for all of them, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from corral.core.scheduling.backfill import INFINITY, NodeProfile, ProfileIndex
from corral.core.jobspec.job_spec import MAX_TIME_S
from corral.core.scheduling.pending import PendingJob
from corral.core.scheduling.policy import Decisions, schedule
from corral.core.scheduling.priority import prioritize
from corral.core.scheduling.reservations import ReservationBook
from corral.core.scheduling.resources import Allocation, Node, check_satisfiable
from corral.core.scheduling.schedconfig import SchedulerConfig
from corral.core.jobspec.states import PendingReason
from corral.errors import Unsatisfiable

RUNNING, STARTING, RESERVED, WAITING = "running", "starting", "reserved", "waiting"


@dataclass(frozen=True, slots=True)
class Holder:
    """A job that holds what the forecast job needs before it can start (a blocker)."""

    job_id: int
    user: str
    kind: str
    """running; starting (a job ahead that starts in this same pass); reserved (a waiting job ahead,
    from `start`); waiting (a job ahead that the pass could give no reservation: the queue stops there)."""
    node: str | None
    gpu_ids: tuple[int, ...]
    start: float | None
    end: float | None
    """When it gives them back: its time limit's end; None: never (no time limit), or unknown."""
    cpus: int = 0
    mem_mb: int = 0
    """The CPUs and memory it holds on its node."""


@dataclass(frozen=True, slots=True)
class Alternative:
    """The same job changed one way (`change`: "time" or "gpus"), and when it would start then."""

    change: str
    time_limit_s: int | None
    gpus: int
    start: float
    node: str | None
    gpu_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Forecast:
    start: float | None
    """When it would start (`now` for at once); None: never, as things stand (`reason` says why)."""
    node: str | None
    gpu_ids: tuple[int, ...]
    code: str
    """Slurm's reason it would wait (Resources, Priority, QOSMaxGRESPerUser, ...), "Unsatisfiable", or
    "None" when it would start now."""
    reason: str
    """Why, in a sentence."""
    blockers: tuple[Holder, ...] = ()
    alternatives: tuple[Alternative, ...] = ()
    ahead: int = 0
    """Pending jobs ahead of it in the queue."""
    priority: int = 0
    preempts: tuple[int, ...] = ()
    """Running preemptible jobs that would be stopped to make room for it."""
    notes: tuple[str, ...] = field(default=())
    """What the forecast leaves out (a hold, a dependency), or assumed (room past the backfill depth)."""
    waits_for: tuple[str, ...] = ()
    """What decides a later start: of GPUS, CPUS and MEMORY, those too few on its node until then (all three
    for an exclusive job, which waits for the whole node); () when it starts now or never."""


GPUS, CPUS, MEMORY = "gpus", "cpus", "memory"


@dataclass(frozen=True, slots=True)
class _Pass:
    decisions: Decisions
    ahead: Sequence[PendingJob]
    """The queue up to the job, the job last."""
    priority: int
    deep: bool
    """Run again past `backfill_depth`: the real pass would give the job no reservation yet."""
    now: float

    def placed(self, job_id: int) -> tuple[float, str, tuple[int, ...]] | None:
        """When and where the job starts in this pass (now, or at its reservation); None: not placed."""
        decisions = self.decisions
        for allocation in decisions.starts:
            if allocation.job_id == job_id:
                return self.now, allocation.node, allocation.gpu_ids
        if job_id in decisions.estimates:
            node, gpus = decisions.reserved[job_id]
            return decisions.estimates[job_id], node, gpus
        return None


class _Planner:
    """The pass over a fixed snapshot, for the job and its what-ifs."""

    def __init__(self, nodes: Sequence[Node], running: Sequence[Allocation], queue: Sequence[PendingJob],
                 usage: Mapping[str, float], now: float, config: SchedulerConfig,
                 drained: Mapping[str, frozenset[int]] | None = None,
                 reservations: ReservationBook | None = None,
                 shareable: Mapping[str, frozenset[int]] | None = None) -> None:
        self.nodes, self.running, self.queue, self.usage, self.now, self.config = nodes, running, queue, usage, now, config
        self.drained = drained or {}
        self.shareable = shareable or {}
        self.reservations = reservations
        self.total_gpus = sum(len(n.gpus) for n in nodes)
        self.total_cpus = sum(n.cpus for n in nodes)
        self._after_ahead: ProfileIndex | None = None
        self.base: _Pass | None = None

    def run(self, job: PendingJob) -> _Pass:
        ordered, factors = prioritize([*self.queue, job], usage=self.usage, config=self.config, now=self.now,
                                      total_gpus=self.total_gpus, total_cpus=self.total_cpus)
        at = next(i for i, p in enumerate(ordered) if p is job)
        ahead = ordered[:at + 1]
        decisions = schedule(self.nodes, self.running, ahead, self.now, self.config, factors, self.drained,
                             self.reservations, self.shareable)
        deep = False
        if (job.job_id not in decisions.estimates and decisions.reasons.get(job.job_id) in _WAITING
                and decisions.preempt_for is None and len(decisions.estimates) >= self.config.backfill_depth):
            deep = True
            decisions = schedule(self.nodes, self.running, ahead, self.now,
                                 replace(self.config, backfill_depth=len(ahead)), factors, self.drained,
                                 self.reservations, self.shareable)
        self.base = _Pass(decisions, ahead, factors[job.job_id].priority, deep, self.now)
        return self.base

    def start_of(self, job: PendingJob) -> tuple[float, str, tuple[int, ...]] | None:
        """When and where a variant of the job (`run` first) would start, in the job's place in the queue: the
        pass's last step over what the jobs ahead leave, the same for every variant (so that pass runs once)."""
        base = self.base
        assert base is not None
        if _stopper(base) is not None:
            return None
        if self._after_ahead is None:
            self._after_ahead = self._leftover(base, job.job_id)
        duration = job.time_limit_s if job.time_limit_s is not None else INFINITY
        best = self._after_ahead.earliest(job.request, duration)
        if best is None:
            return None
        k, start, gpus = best
        return max(start, self.now), self.nodes[k].name, gpus

    def _leftover(self, base: _Pass, job_id: int) -> ProfileIndex:
        """The machine as the running jobs, the jobs ahead that start now and their reservations leave it."""
        decisions = base.decisions
        by_node: dict[str, list[Allocation]] = {node.name: [] for node in self.nodes}
        for allocation in [*self.running, *(a for a in decisions.starts if a.job_id != job_id)]:
            by_node.setdefault(allocation.node, []).append(allocation)
        none: frozenset[int] = frozenset()
        index = ProfileIndex([NodeProfile.build(node, by_node[node.name], self.now, self.drained.get(node.name, none),
                                                self.shareable.get(node.name, none)) for node in self.nodes])
        where = {node.name: k for k, node in enumerate(self.nodes)}
        ahead = {p.job_id: p for p in base.ahead}
        for other, start in decisions.estimates.items():
            if other == job_id:
                continue
            node, gpus = decisions.reserved[other]
            pending = ahead[other]
            duration = pending.time_limit_s if pending.time_limit_s is not None else INFINITY
            index.reserve(where[node], start, start + duration, pending.request.cpus, pending.request.mem_mb, gpus,
                          pending.request.gpu_share_mb)
        return index


def _stopper(outcome: _Pass) -> PendingJob | None:
    """The job ahead at which the pass stopped (it could be given no start), so that nothing behind it starts."""
    decisions = outcome.decisions
    started = {a.job_id for a in decisions.starts}
    for earlier in outcome.ahead[:-1]:
        if earlier.job_id in decisions.estimates or earlier.job_id in started:
            continue
        if decisions.reasons.get(earlier.job_id) in _WAITING:
            return earlier
    return None


_WAITING = (PendingReason.RESOURCES, PendingReason.PRIORITY)


def forecast(
    job: PendingJob, *, nodes: Sequence[Node], running: Sequence[Allocation], queue: Sequence[PendingJob],
    usage: Mapping[str, float], now: float, config: SchedulerConfig, unsatisfiable: Unsatisfiable | None = None,
    drained: Mapping[str, frozenset[int]] | None = None, reservations: ReservationBook | None = None,
    shareable: Mapping[str, frozenset[int]] | None = None,
) -> Forecast:
    """When `job` would start if it joined `queue` now, what holds it back, and what would start it sooner.

    Args:
        job: the job as admitted (its partition, QoS and time limit filled in); its id the one it would get.
        nodes: the machine's inventory.
        running: what running jobs hold (preemptible ones with their priority as of now).
        queue: the pending jobs a pass would consider (not those waiting for dependencies).
        usage: each user's decayed usage, for fair share.
        unsatisfiable: why no node could ever run the job, if none could (as a submit would refuse it);
            the forecast then says so and looks only for fewer GPUs that would run.
        drained: each node's drained GPUs (`corral.core.scheduling.drains`), which no job is given.
        reservations: the reservations (`corral.core.scheduling.reservations`), whose GPUs it gets only inside one.
        shareable: each node's GPUs only sharing jobs are given (`corral.core.scheduling.policy.schedule`).
    """
    planner = _Planner(nodes, list(running), list(queue), usage, now, config, drained, reservations, shareable)
    if unsatisfiable is not None:
        planner.run(job)  # held back (no node fits it), it blocks nobody: what the jobs ahead leave is as without it
        alternatives = _fewer_gpus(planner, job, None, nodes) if unsatisfiable.field == "gpus" else []
        return Forecast(None, None, (), "Unsatisfiable", unsatisfiable.message, alternatives=tuple(alternatives))
    outcome = planner.run(job)
    decisions = outcome.decisions
    ahead = len(outcome.ahead) - 1
    notes = ("more jobs ahead wait than the scheduler reserves for in one pass (backfill_depth "
             f"{config.backfill_depth}): it gets its reservation once some of them start",) if outcome.deep else ()
    placed = outcome.placed(job.job_id)
    base = Forecast(None, None, (), "", "", ahead=ahead, priority=outcome.priority, notes=notes)
    if placed is not None:
        start = placed[0]
        if start <= now:
            return replace(base, start=now, node=placed[1], gpu_ids=placed[2], code=PendingReason.NONE.value,
                           reason=f"it would start now on {placed[1]}")
        holders = _holders(outcome, running, now, nodes)
        node = next(n for n in nodes if n.name == placed[1])
        waits_for = _short_of(holders, job, node, placed[2], start)
        blockers = _blocking(holders, job, node, placed[2], start, waits_for)
        code = decisions.reasons.get(job.job_id, PendingReason.RESOURCES)
        result = replace(base, start=start, node=placed[1], gpu_ids=placed[2], code=code.value,
                         reason=_why_later(blockers, job, waits_for), blockers=tuple(blockers), waits_for=waits_for)
    elif decisions.preempt_for == job.job_id:
        victims = [a for a in running if a.job_id in set(decisions.preempt)]
        return replace(base, start=now, node=victims[0].node if victims else None, code=PendingReason.RESOURCES.value,
                       reason="it would start once running preemptible jobs of lower priority are stopped for it "
                              "(after their grace period)",
                       blockers=tuple(_running_holder(a, now) for a in victims), preempts=tuple(decisions.preempt))
    else:
        code = decisions.reasons.get(job.job_id, PendingReason.NONE)
        reason, holding = _why_never(outcome, job, running, now, config, nodes)
        result = replace(base, code=code.value, reason=reason, blockers=holding)
    alternatives = _shorter_time(planner, job, result.start) if code in (*_WAITING, PendingReason.PARTITION_TIME_LIMIT) else []
    if code in _WAITING:
        alternatives += _fewer_gpus(planner, job, result.start, nodes)
    return replace(result, alternatives=tuple(alternatives))


_NEEDS = {GPUS: "its GPUs", CPUS: "the CPUs it needs", MEMORY: "the memory it needs"}


def _why_later(blockers: Sequence[Holder], job: PendingJob, waits_for: Sequence[str]) -> str:
    if job.request.exclusive:
        what = "the whole node it needs (--exclusive)"
    elif waits_for:
        what = " and ".join(_NEEDS[need] for need in waits_for)
    else:
        what = "its GPUs" if job.request.gpus else "the CPUs and memory it needs"
    are = "is" if job.request.exclusive or tuple(waits_for) == (MEMORY,) else "are"
    them = "it" if are == "is" else "them"
    if not blockers:
        return f"{what} {are} not free for its whole time limit until then"
    last = blockers[-1]  # the last to give them back: what it waits for
    who = f"job {last.job_id} ({last.user})"
    held = {RUNNING: f"held by running {who}", STARTING: f"taken by {who}, which starts now",
            RESERVED: f"reserved for {who}, which is ahead of it in the queue,"}[last.kind]
    more = len(blockers) - 1
    others = f"; {more} more job{'s' if more > 1 else ''} hold{'' if more > 1 else 's'} {them} before" if more else ""
    return f"{what} {are} {held} until then{others}"


def _why_never(outcome: _Pass, job: PendingJob, running: Sequence[Allocation], now: float,
               config: SchedulerConfig, nodes: Sequence[Node]) -> tuple[str, tuple[Holder, ...]]:
    """Why the pass gives the job no start at all, and who is to blame."""
    decisions = outcome.decisions
    code = decisions.reasons.get(job.job_id)
    if code is PendingReason.PARTITION_TIME_LIMIT:
        partition = config.partition(job.partition)
        return (f"its time limit is longer than partition {partition.name} allows "
                f"({_minutes(partition.max_time_s)}): it would never start"), ()
    if code in (PendingReason.QOS_MAX_JOBS, PendingReason.QOS_MAX_GPUS):
        qos = config.qos_of(job.qos)
        what = (f"{qos.max_running_per_user} running jobs" if code is PendingReason.QOS_MAX_JOBS
                else f"{qos.max_gpus_per_user} GPUs")
        mine = [_running_holder(a, now) for a in running if a.user == job.user and (a.qos or config.default_qos) == qos.name]
        mine.sort(key=lambda h: (h.end is None, h.end or 0.0))
        return (f"QoS {qos.name} allows each user {what} at once, and {job.user} has that much running: "
                "it would wait until enough of them end"), tuple(mine)
    if code is PendingReason.BAD_CONSTRAINTS:
        return "no node here can run it", ()
    if code is PendingReason.NODE_NOT_AVAIL:
        return ("only drained GPUs or nodes, or GPUs in use outside corral, could run it (corral nodes shows why): "
                "it waits until an admin resumes them or the process outside corral ends"), ()
    earlier = _stopper(outcome)  # the pass stopped at a job ahead that could get no reservation
    if earlier is not None:
        if decisions.preempt_for == earlier.job_id:
            why = "running preemptible jobs are being stopped for it"
        else:
            why = "what it needs is held by jobs without a time limit"
        holder = Holder(earlier.job_id, earlier.user, WAITING, None, (), None, None)
        return (f"job {earlier.job_id} ({earlier.user}) is ahead of it and cannot be given a start ({why}); "
                "nothing behind it starts until it does"), (holder,)
    holders = [h for h in _holders(outcome, running, now, nodes) if h.end is None and h.job_id != job.job_id]
    request = job.request
    holders = [h for h in holders if not request.gpus or h.gpu_ids]
    return "what it needs is held by jobs without a time limit: no end can be foreseen", tuple(holders)


def _holders(outcome: _Pass, running: Sequence[Allocation], now: float, nodes: Sequence[Node]) -> list[Holder]:
    """Everything held in the pass: running jobs, jobs ahead that start now, and reservations (an exclusive
    one's: its whole node's CPUs and memory)."""
    by_name = {node.name: node for node in nodes}
    decisions = outcome.decisions
    out = [_running_holder(a, now) for a in running]
    out += [Holder(a.job_id, a.user, STARTING, a.node, a.gpu_ids, now, a.end_time, a.cpus, a.mem_mb)
            for a in decisions.starts]
    limits = {p.job_id: p for p in outcome.ahead}
    for job_id, start in decisions.estimates.items():
        node, gpus = decisions.reserved[job_id]
        pending = limits[job_id]
        end = start + pending.time_limit_s if pending.time_limit_s is not None else None
        request, whole = pending.request, by_name.get(node)
        cpus, mem = (whole.cpus, whole.mem_mb) if request.exclusive and whole else (request.cpus, request.mem_mb)
        out.append(Holder(job_id, pending.user, RESERVED, node, gpus, start, end, cpus, mem))
    return out


def _running_holder(allocation: Allocation, now: float) -> Holder:
    return Holder(allocation.job_id, allocation.user, RUNNING, allocation.node, allocation.gpu_ids, now,
                  allocation.end_time, allocation.cpus, allocation.mem_mb)


_JUST_BEFORE = 1e-3  # seconds: the moment before a start, when what decides it is still held


def _short_of(holders: Sequence[Holder], job: PendingJob, node: Node, gpu_ids: tuple[int, ...],
              start: float) -> tuple[str, ...]:
    """What the job is short of on its node just before it starts (what decides the start): some of its GPUs
    still held, too few CPUs, too little memory; all three for an exclusive job (it waits for the whole node)."""
    moment = start - _JUST_BEFORE
    there = [h for h in holders if h.node == node.name and h.job_id != job.job_id and (h.start or 0.0) <= moment
             and (h.end is None or h.end > moment)]
    if not there:
        return ()
    request = job.request
    if request.exclusive:
        return GPUS, CPUS, MEMORY
    mine = set(gpu_ids)
    short = [GPUS] if any(mine & set(h.gpu_ids) for h in there) and not request.gpu_share_mb else []
    if sum(h.cpus for h in there) + request.cpus > node.cpus:
        short.append(CPUS)
    if request.mem_mb and sum(h.mem_mb for h in there) + request.mem_mb > node.mem_mb:
        short.append(MEMORY)
    return tuple(short)


def _blocking(holders: Sequence[Holder], job: PendingJob, node: Node, gpu_ids: tuple[int, ...], start: float,
              waits_for: Sequence[str]) -> list[Holder]:
    """The holders of what decides its start (`waits_for`) on its node that give it back by then, at some moment
    before it starts: of its GPUs, of CPUs, of memory; without a decider, of its GPUs (or of anything on its node)."""
    mine = set(gpu_ids)
    on_node = [h for h in holders if h.node == node.name and h.job_id != job.job_id
               and (h.start or 0.0) < start and (h.end is None or h.end > (h.start or 0.0))]
    if waits_for:
        chosen = [h for h in on_node if h.end is not None and h.end <= start + _JUST_BEFORE and (
            job.request.exclusive or (GPUS in waits_for and mine & set(h.gpu_ids))
            or (CPUS in waits_for and h.cpus > 0) or (MEMORY in waits_for and h.mem_mb > 0))]
    else:
        chosen = [h for h in on_node if mine & set(h.gpu_ids)] if mine else []
    if not chosen:
        chosen = on_node
    chosen.sort(key=lambda h: (h.end is None, h.end if h.end is not None else 0.0, h.job_id))
    return chosen


def _with_gpus(job: PendingJob, gpus: int) -> PendingJob:
    return replace(job, request=replace(job.request, gpus=gpus))


def _shorter_time(planner: _Planner, job: PendingJob, start: float | None) -> list[Alternative]:
    """The longest time limit (whole minutes) that starts the job now, if shorter than its own; and where its
    own is longer than its partition allows, that partition's longest."""
    now = planner.now
    out: list[Alternative] = []
    limit = job.time_limit_s
    top = planner.config.partitions.get(job.partition or planner.config.default_partition)
    if top is not None and top.max_time_s is not None and (limit is None or limit > top.max_time_s):
        found = planner.start_of(replace(job, time_limit_s=top.max_time_s))
        if found is not None:
            out.append(Alternative("time", top.max_time_s, job.request.gpus, found[0], found[1], found[2]))
            start = found[0]
        limit = top.max_time_s
    if start is not None and start <= now:
        return out
    high = (MAX_TIME_S if limit is None else limit - 1) // 60  # minutes, shorter than its own
    if high < 1:
        return out
    best = None
    low_found = planner.start_of(replace(job, time_limit_s=60))
    if low_found is None or low_found[0] > now:
        return out  # not even a minute's gap now
    best, low = (60, low_found), 1
    while low < high:  # the start can only move later as the limit grows: the longest that starts now
        middle = (low + high + 1) // 2
        found = planner.start_of(replace(job, time_limit_s=middle * 60))
        if found is not None and found[0] <= now:
            low, best = middle, (middle * 60, found)
        else:
            high = middle - 1
    seconds, (when, node, gpus) = best
    out.append(Alternative("time", seconds, job.request.gpus, when, node, gpus))
    return out


def _fewer_gpus(planner: _Planner, job: PendingJob, start: float | None, nodes: Sequence[Node]) -> list[Alternative]:
    """The most GPUs (fewer than asked) that start sooner, and, if that is not now, the most that start now."""
    asked = job.request.gpus
    most = max((len(n.gpus) for n in nodes), default=0)
    out: list[Alternative] = []
    bar = math.inf if start is None else start
    for gpus in range(min(asked - 1, most), 0, -1):
        variant = _with_gpus(job, gpus)
        try:
            check_satisfiable(variant.request, nodes)
        except Unsatisfiable:
            continue
        found = planner.start_of(variant)
        if found is None or found[0] >= bar:
            continue
        out.append(Alternative("gpus", job.time_limit_s, gpus, found[0], found[1], found[2]))
        if found[0] <= planner.now:
            break
        bar = planner.now + 1e-9  # after a sooner start, only one that starts now is worth showing
    return out


def _minutes(seconds: int | None) -> str:
    if seconds is None:
        return "no limit"
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
