"""The scheduling policy: a pure function from a snapshot of the machine to decisions.

`schedule` knows nothing of databases, processes or clocks; the server hands it
the nodes, what running jobs hold and the pending queue in priority order
(`corral.core.scheduling.priority` decides that order), and applies what comes back.
Placement is backfill by time limits (Slurm's sched/backfill): jobs are taken in
priority order; one that cannot start now gets a reservation at the earliest time
it will fit (its estimated start), and a lower-priority job starts now only where
it fits around every reservation made so far, so it can never delay a job ahead
of it. A waiting job that cannot be given a reservation (what it needs is held by
jobs without a time limit, or `backfill_depth` reservations are made already)
stops the pass: nothing behind it starts, so it is never starved. Jobs held back
by a limit (hold, partition time limit, QoS limits) wait for their own reason and
block nobody. Drained GPUs (and nodes) are never free (`corral.core.scheduling.drains`): a job that
only they could run waits with ReqNodeNotAvail, blocking nobody either. Shareable GPUs (in use
outside corral on a node that shares them: `corral.core.scheduling.sharing.shareable_beside`) are the same
to a whole-GPU job, while sharing jobs go there within what is left of their memory. Reservations
(`corral.core.scheduling.reservations`) hold their GPUs away from other jobs over their windows; a job
submitted into one is placed in the reservation's own share, and blocks nobody outside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from corral.core.scheduling.backfill import INFINITY, NodeProfile, ProfileIndex
from corral.core.scheduling.drains import WHOLE_NODE
from corral.core.monitoring.outside_use import unavailable
from corral.core.scheduling.pending import PendingJob
from corral.core.scheduling.priority import PriorityFactors
from corral.core.scheduling.reservations import ReservationBook, blocked_now, hold_windows, inside
from corral.core.scheduling.resources import Allocation, Node, gpu_matches, gpus_placeable, gpus_possible, node_matches
from corral.core.jobspec.request import Request
from corral.core.scheduling.schedconfig import SchedulerConfig
from corral.core.jobspec.states import PendingReason

_DEFAULT_CONFIG = SchedulerConfig()


@dataclass(slots=True)
class Decisions:
    starts: list[Allocation] = field(default_factory=list)
    reasons: dict[int, PendingReason] = field(default_factory=dict)
    estimates: dict[int, float] = field(default_factory=dict)
    """Expected start of each waiting job that holds a reservation."""
    preempt: list[int] = field(default_factory=list)
    """Running preemptible jobs to stop (and requeue) so the first waiting job can start."""
    preempt_for: int | None = None
    """The waiting job that `preempt` makes room for."""
    reserved: dict[int, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    """Where each reservation in `estimates` is held: its node and GPUs (what a forecast and a plan draw)."""
    limits: dict[int, int] = field(default_factory=dict)
    """Jobs started with less than their time limit (sbatch's --time-min): the limit each starts with."""


def schedule(
    nodes: Sequence[Node], running: Iterable[Allocation], pending: Sequence[PendingJob], now: float,
    config: SchedulerConfig = _DEFAULT_CONFIG, priorities: Mapping[int, PriorityFactors] | None = None,
    drained: Mapping[str, frozenset[int]] | None = None, reservations: ReservationBook | None = None,
    shareable: Mapping[str, frozenset[int]] | None = None,
) -> Decisions:
    """Decide which pending jobs start now, why the others wait, when they should start, and
    which preemptible jobs make room for the first waiting one.

    Args:
        nodes: the machine's inventory.
        running: what started jobs hold, and until when.
        pending: jobs waiting, highest priority first.
        now: the time of this pass.
        config: partitions and QoS (for their limits), and the backfill depth.
        priorities: each pending job's priority; a running preemptible job of lower priority
            than the first job waiting for resources is preempted when that lets it start.
        drained: each node's drained GPU indexes (`WHOLE_NODE` among them: the node); none is given to a job.
        reservations: the reservations and the running jobs in each; their GPUs go to no other job in their windows.
        shareable: each node's GPUs that no whole-GPU job is given but sharing jobs may use, within what
            `running` leaves of their memory (`corral.core.scheduling.sharing.shareable_beside`); one also drained is drained.
    """
    priorities = priorities or {}
    drained = drained or {}
    shareable = shareable or {}
    # what a whole-GPU job may not be given
    unusable = unavailable(drained, shareable) if shareable else drained
    by_node: dict[str, list[Allocation]] = {node.name: [] for node in nodes}
    jobs_of: dict[tuple[str, str | None], int] = {}
    gpus_of: dict[tuple[str, str | None], int] = {}
    for alloc in running:
        by_node.setdefault(alloc.node, []).append(alloc)
        key = (alloc.user, alloc.qos)
        jobs_of[key] = jobs_of.get(key, 0) + 1
        gpus_of[key] = gpus_of.get(key, 0) + len(alloc.gpu_ids)
    shares: dict[str, NodeProfile] = {}
    off_limits = unusable
    if reservations is not None and reservations.by_name:
        shares, profiles = _reservations(nodes, by_node, now, drained, shareable, reservations)
        index = ProfileIndex(profiles)
        # no preemption makes room on GPUs a reservation holds now
        off_limits = unavailable(unusable, blocked_now(reservations, now))
    else:
        none: frozenset[int] = frozenset()
        index = ProfileIndex([NodeProfile.build(node, by_node[node.name], now, drained.get(node.name, none),
                                                shareable.get(node.name, none)) for node in nodes])
    limits = _Limits(nodes, config, jobs_of, gpus_of, now, drained, unusable)
    held_back = limits.reason
    decisions = Decisions()
    reasons = decisions.reasons
    estimates = decisions.estimates
    depth = config.backfill_depth
    stopped = False  # a waiting job could not be given a reservation: nothing behind it may start
    waiting = False
    for job in pending:
        reason = held_back(job)
        if reason is not None:
            reasons[job.job_id] = reason
            continue
        if job.reservation is not None:
            if _in_reservation(job, shares.get(job.reservation), reservations, now, decisions, priorities):
                limits.started(job)
            continue
        if stopped:
            reasons[job.job_id] = PendingReason.PRIORITY
            continue
        request = job.request
        duration = job.time_limit_s if job.time_limit_s is not None else INFINITY
        if job.deadline is not None and job.time_min_s is not None and now + duration > job.deadline:
            # as Slurm: a flexible job started now gets what is left until its deadline (time-min at least)
            capped = max(job.time_min_s, int(job.deadline - now) // _MINUTE * _MINUTE)
            if capped < duration:
                duration = capped
                decisions.limits[job.job_id] = capped
        best = index.earliest(request, duration)
        if (best is None or best[1] > now) and job.time_min_s is not None and job.time_min_s < duration:
            shorter = _flexible(index, request, job.time_min_s, duration, now)
            if shorter is not None:
                best, duration = shorter
                decisions.limits[job.job_id] = int(duration)
        if (best is None or best[1] > now) and job.job_id in decisions.limits:
            del decisions.limits[job.job_id]  # it waits: its limit is set when it starts
        if best is not None and best[1] <= now:
            k, _, gpu_ids = best
            cpus, mem = _held(request, nodes[k])
            index.reserve(k, now, now + duration, cpus, mem, gpu_ids, request.gpu_share_mb)
            decisions.starts.append(_started(job, nodes[k].name, gpu_ids, cpus, mem, duration, now, priorities))
            limits.started(job)
            continue
        reasons[job.job_id] = PendingReason.PRIORITY if waiting else PendingReason.RESOURCES
        if not waiting:
            factors = priorities.get(job.job_id)
            if factors is not None:
                making_room, decisions.preempt = _victims(request, factors.priority, nodes, by_node, decisions.starts,
                                                          off_limits)
                if decisions.preempt:
                    decisions.preempt_for = job.job_id
                if making_room:
                    # what is being freed is this job's: nothing behind it may take it meanwhile
                    waiting = True
                    stopped = True
                    continue
        waiting = True
        if best is None or len(estimates) >= depth:
            stopped = True
            continue
        k, start, gpu_ids = best
        cpus, mem = _held(request, nodes[k])
        index.reserve(k, start, start + duration, cpus, mem, gpu_ids, request.gpu_share_mb)
        estimates[job.job_id] = start
        decisions.reserved[job.job_id] = (nodes[k].name, gpu_ids)
    return decisions


def _reservations(nodes: Sequence[Node], by_node: Mapping[str, list[Allocation]], now: float,
                  drained: Mapping[str, frozenset[int]], shareable: Mapping[str, frozenset[int]], book: ReservationBook,
                  ) -> tuple[dict[str, NodeProfile], list[NodeProfile]]:
    """Each reservation's own share, and the nodes as every other job sees them: what the jobs outside
    reservations leave, less the reservations' windows. A reservation offers its jobs no shareable GPU."""
    shares: dict[str, NodeProfile] = {}
    profiles = []
    inside_of = book.running
    none: frozenset[int] = frozenset()
    for node in nodes:
        held = by_node[node.name]
        off, beside = drained.get(node.name, none), shareable.get(node.name, none)
        profiles.append(NodeProfile.build(node, [a for a in held if a.job_id not in inside_of], now, off, beside))
        for reservation in book.on_node(node.name):
            shares[reservation.name] = inside(
                reservation, node, [a for a in held if inside_of.get(a.job_id) == reservation.name], now, off | beside)
    hold_windows(profiles, book, now)
    return shares, profiles


def _in_reservation(job: PendingJob, share: NodeProfile | None, book: ReservationBook | None, now: float,
                    decisions: Decisions, priorities: Mapping[int, PriorityFactors]) -> bool:
    """Place a job submitted into a reservation in that reservation's share: it starts now, or holds its
    place there (blocking nobody outside); it waits with reason Reservation while the reservation has not
    begun or its time limit cannot fit before the end, ReservationDeleted once it is gone. True: it starts."""
    reservation = book.by_name.get(job.reservation or "") if book is not None else None
    if share is None or reservation is None:
        decisions.reasons[job.job_id] = PendingReason.RESERVATION_DELETED
        return False
    duration = job.time_limit_s if job.time_limit_s is not None else INFINITY
    found = share.earliest(job.request, duration)
    if found is None:
        decisions.reasons[job.job_id] = PendingReason.RESERVATION
        return False
    start, gpu_ids = found
    node = share.node
    cpus, mem = _held(job.request, node)
    share.reserve(start, start + duration, cpus, mem, gpu_ids, job.request.gpu_share_mb)
    if start <= now:
        decisions.starts.append(_started(job, node.name, gpu_ids, cpus, mem, duration, now, priorities))
        return True
    decisions.reasons[job.job_id] = PendingReason.RESERVATION if now < reservation.start else PendingReason.RESOURCES
    decisions.estimates[job.job_id] = start
    decisions.reserved[job.job_id] = (node.name, gpu_ids)
    return False


def _started(job: PendingJob, node: str, gpu_ids: tuple[int, ...], cpus: int, mem: int, duration: float, now: float,
             priorities: Mapping[int, PriorityFactors]) -> Allocation:
    """The allocation of a job that starts now on `node`, to its time limit (none: no end)."""
    factors = priorities.get(job.job_id)
    return Allocation(job.job_id, node, gpu_ids, cpus, mem, job.user, job.qos,
                      now + duration if duration < INFINITY else None, job.preemptible,
                      factors.priority if factors is not None else 0, gpu_share_mb=job.request.gpu_share_mb)


def _held(request: Request, node: Node) -> tuple[int, int]:
    """The CPUs and memory a job holds on `node`: all of them for an exclusive one."""
    return (node.cpus, node.mem_mb) if request.exclusive else (request.cpus, request.mem_mb)


_MINUTE = 60


def _flexible(index: ProfileIndex, request: Request, shortest: int, longest: float,
              now: float) -> tuple[tuple[int, float, tuple[int, ...]], float] | None:
    """Slurm's --time-min: the longest limit from `shortest` up to (not including) `longest`, in whole
    minutes past `shortest`, with which the request starts now; None if even `shortest` must wait.
    Fitting is monotone in the limit (what fits longer fits shorter), so a binary search finds it."""
    found = index.earliest(request, shortest)
    if found is None or found[1] > now:
        return None
    best: tuple[tuple[int, float, tuple[int, ...]], float] = (found, float(shortest))
    top = (min(longest, MAX_FLEXIBLE_S) - shortest) // _MINUTE
    low, high = 1, int(top)
    while low <= high:
        middle = (low + high) // 2
        limit = shortest + middle * _MINUTE
        if limit >= longest:
            high = middle - 1
            continue
        fit = index.earliest(request, limit)
        if fit is not None and fit[1] <= now:
            best, low = (fit, float(limit)), middle + 1
        else:
            high = middle - 1
    return best


MAX_FLEXIBLE_S = 365 * 86400  # an unlimited job with --time-min gets at most a year (Slurm's cap on a limit)


def _victims(
    request: Request, priority: int, nodes: Sequence[Node], by_node: Mapping[str, list[Allocation]],
    started: Sequence[Allocation], drained: Mapping[str, frozenset[int]],
) -> tuple[bool, list[int]]:
    """Whether room is (or will be) made for `request` by preemption, and the fewest lowest-priority
    preemptible running jobs on one node to stop for it (none if jobs already told to go suffice).
    Jobs started in this same pass are never victims, though they hold their resources."""
    for node in nodes:
        off = drained.get(node.name, frozenset())
        if WHOLE_NODE in off:
            continue
        running = by_node.get(node.name, [])
        held = running + [a for a in started if a.node == node.name]
        kept = [a for a in held if not a.preempting]
        cpus = node.cpus - sum(a.cpus for a in kept)
        mem = node.mem_mb - sum(a.mem_mb for a in kept)
        busy = {i for a in kept for i in a.gpu_ids} | off
        if not node_matches(node, request):
            continue
        matching = [g.index for g in node.gpus if gpu_matches(g, request, node)]

        def fits() -> bool:
            if request.exclusive:  # nothing may stay beside it
                return cpus == node.cpus and mem == node.mem_mb and not busy and len(matching) >= request.gpus
            return (cpus >= request.cpus and mem >= request.mem_mb
                    and gpus_placeable(node, request, [i for i in matching if i not in busy]))

        if len(held) != len(kept) and fits():
            return True, []  # room is being made already
        chosen = []
        candidates = (a for a in running if a.preemptible and not a.preempting and a.priority < priority)
        for victim in sorted(candidates, key=lambda a: a.priority):
            chosen.append(victim.job_id)
            cpus, mem = cpus + victim.cpus, mem + victim.mem_mb
            busy -= set(victim.gpu_ids) - off
            if fits():
                return True, chosen
    return False, []


class _Limits:
    """What holds a job back whatever is free: hold, constraints no node meets, partition and QoS limits.

    Runs for every pending job, so the lookups are bound once per pass and the node scan is
    remembered per request.
    """

    __slots__ = ("nodes", "partitions", "default_partition", "qoses", "default_qos", "jobs_of", "gpus_of", "fits",
                 "now", "usable", "whole", "fits_usable", "usable_sharing")

    def __init__(
        self, nodes: Sequence[Node], config: SchedulerConfig,
        jobs_of: dict[tuple[str, str | None], int], gpus_of: dict[tuple[str, str | None], int], now: float,
        drained: Mapping[str, frozenset[int]], unusable: Mapping[str, frozenset[int]],
    ) -> None:
        self.now = now
        self.nodes = nodes
        # a whole-GPU job's: the nodes as drains and shareable GPUs (`unusable`, drained among them) leave them
        self.usable = _undrained(nodes, unusable) if unusable else None
        # a sharing job's: the nodes as drains alone leave them
        self.usable_sharing = _undrained(nodes, drained) if unusable else []
        # an exclusive job's: nodes with nothing drained or shareable
        self.whole = [node for node in nodes if not unusable.get(node.name)] if unusable else nodes
        self.fits_usable: dict[Request, bool] = {}
        self.partitions = config.partitions
        self.default_partition = config.default_partition
        self.qoses = config.qos
        self.default_qos = config.default_qos
        self.jobs_of = jobs_of
        self.gpus_of = gpus_of
        self.fits: dict[Request, bool] = {}  # by request shape

    def reason(self, job: PendingJob) -> PendingReason | None:
        """The reason a job may not start whatever is free, or None."""
        if job.held:
            return PendingReason.HELD
        if job.begin_time is not None and job.begin_time > self.now:
            return PendingReason.BEGIN_TIME
        request = job.request
        fits = self.fits.get(request)
        if fits is None:
            fits = self.fits[request] = _fits_some_node(request, self.nodes)
        if not fits:
            return PendingReason.BAD_CONSTRAINTS
        if self.usable is not None:
            usable = self.fits_usable.get(request)
            if usable is None:
                usable = self.fits_usable[request] = _fits_some_node(
                    request, self.whole if request.exclusive else self.usable_sharing if request.gpu_share_mb
                    else self.usable)
            if not usable:
                return PendingReason.NODE_NOT_AVAIL
        partition = self.partitions.get(job.partition or self.default_partition)
        if partition is None:
            return PendingReason.BAD_CONSTRAINTS
        if partition.max_time_s is not None and (job.time_limit_s is None or job.time_limit_s > partition.max_time_s):
            return PendingReason.PARTITION_TIME_LIMIT
        qos = self.qoses.get(job.qos or self.default_qos)
        if qos is not None:
            key = (job.user, job.qos)
            if qos.max_running_per_user is not None and self.jobs_of.get(key, 0) >= qos.max_running_per_user:
                return PendingReason.QOS_MAX_JOBS
            if qos.max_gpus_per_user is not None and self.gpus_of.get(key, 0) + request.gpus > qos.max_gpus_per_user:
                return PendingReason.QOS_MAX_GPUS
        return None

    def started(self, job: PendingJob) -> None:
        """Count a job started in this pass toward its user's QoS limits."""
        key = (job.user, job.qos)
        self.jobs_of[key] = self.jobs_of.get(key, 0) + 1
        self.gpus_of[key] = self.gpus_of.get(key, 0) + job.request.gpus


def _fits_some_node(request: Request, nodes: Sequence[Node]) -> bool:
    """Could the request run on some node if it were empty? (Runs for every pending job: keep it cheap.)"""
    for node in nodes:
        if request.cpus > node.cpus or request.mem_mb > node.mem_mb or request.gpus > len(node.gpus):
            continue
        if request.picks_nodes and not node_matches(node, request):
            continue
        if not gpus_possible(node, request):  # --constraint=nvlink, GPU features
            continue
        if request.gpus == 0 or (request.gpu_type is None and request.gpu_mem_mb is None and request.requirements is None):
            return True
        if sum(gpu_matches(g, request, node) for g in node.gpus) >= request.gpus:
            return True
    return False


def _undrained(nodes: Sequence[Node], drained: Mapping[str, frozenset[int]]) -> list[Node]:
    """The nodes without their drained GPUs, drained nodes left out."""
    out = []
    for node in nodes:
        off = drained.get(node.name, frozenset())
        if WHOLE_NODE not in off:
            out.append(replace(node, gpus=tuple(g for g in node.gpus if g.index not in off)) if off else node)
    return out
