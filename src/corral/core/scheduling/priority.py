"""Multifactor priority (Slurm's priority/multifactor) with classic fair share.

    priority = W_age * age + W_fairshare * fairshare + W_job_size * job_size
             + W_partition * partition + W_qos * qos - nice

Each factor lies in [0, 1]:
- age: time waiting, saturating at `max_age_s`;
- fairshare: classic fair share, F = 2^(-U/S), where U is the user's share of all decayed usage and
  S the user's share of all shares. A user who used nothing gets 1, one who used exactly their share
  0.5, twice their share 0.25. Classic rather than Fair Tree: on one machine the accounts are the
  users themselves (a one-level tree, where Fair Tree's ranking adds nothing), and F is a formula a
  person can check by hand;
- job_size: the job's share of the machine's GPUs (or of its CPUs, for a CPU job), favouring big
  jobs as Slurm does by default, so they are not starved by a stream of small ones;
- partition and qos: the job's partition `priority_factor` and QoS `priority`, over the largest
  configured.

Usage is GPU-hours (CPU-hours weighted by `CPU_HOUR_WEIGHT` for CPU jobs), decayed with a half-life:
a GPU-hour used one half-life ago counts as half a GPU-hour now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from corral.core.scheduling.pending import PendingJob
from corral.core.scheduling.schedconfig import Partition, PriorityWeights, Qos, SchedulerConfig

CPU_HOUR_WEIGHT = 0.05  # a CPU-hour costs as much as 1/20 of a GPU-hour


@dataclass(frozen=True, slots=True)
class PriorityFactors:
    """A job's priority and what it is made of (what `corral priority` shows)."""

    priority: int
    age: float
    fairshare: float
    job_size: float
    partition: float
    qos: float
    nice: int


def usage_charge(gpus: float, cpus: int, seconds: float) -> float:
    """What running `seconds` on these resources adds to a user's usage, in GPU-hours (`gpus`: see `charged_gpus`)."""
    return (gpus + (CPU_HOUR_WEIGHT * cpus if gpus == 0 else 0.0)) * max(0.0, seconds) / 3600.0


def charged_gpus(gpus: int, share_mb: int = 0, gpu_mem_mb: int = 0) -> float:
    """The GPUs a job is charged for: a sharing job (`corral.core.scheduling.sharing`) its budget's part of its GPU's memory,
    not the whole GPU, so that four jobs sharing one GPU cost their users a GPU between them."""
    if share_mb and gpu_mem_mb > 0:
        return min(1.0, share_mb / gpu_mem_mb)
    return float(gpus)


def decay(usage: float, elapsed_s: float, half_life_s: float) -> float:
    """Usage as it counts `elapsed_s` later."""
    return usage * 0.5 ** (max(0.0, elapsed_s) / half_life_s)


def fairshare_terms(usage: Mapping[str, float], users: set[str], shares: Mapping[str, int]
                    ) -> dict[str, tuple[float, float]]:
    """Each of `users`' (and everyone with usage's) (S, U): their share of the shares of all those users, and
    their share of everyone's decayed usage (0 while nobody has used anything)."""
    everyone = set(users) | set(usage)
    total_usage = sum(max(0.0, u) for u in usage.values())
    total_shares = sum(shares.get(user, 1) for user in everyone) or 1
    return {user: (shares.get(user, 1) / total_shares,
                   max(0.0, usage.get(user, 0.0)) / total_usage if total_usage > 0 else 0.0) for user in everyone}


def fairshare_factor(norm_shares: float, norm_usage: float) -> float:
    """Classic fair share, F = 2^(-U/S) (0 for a user with no shares)."""
    return 2.0 ** (-norm_usage / norm_shares) if norm_shares > 0 else 0.0


def fairshare_factors(usage: Mapping[str, float], users: set[str], shares: Mapping[str, int]) -> dict[str, float]:
    """Classic fair share, F = 2^(-U/S), for each of `users` (and everyone with usage)."""
    return {user: fairshare_factor(s, u) for user, (s, u) in fairshare_terms(usage, users, shares).items()}


def job_priority(
    *, wait_s: float, fairshare: float, gpus: int, cpus: int, total_gpus: int, total_cpus: int,
    partition: Partition, qos: Qos, nice: int, config: SchedulerConfig,
) -> PriorityFactors:
    weights: PriorityWeights = config.weights
    age = min(max(0.0, wait_s), weights.max_age_s) / weights.max_age_s if weights.max_age_s else 0.0
    if gpus and total_gpus:
        size = min(1.0, gpus / total_gpus)
    else:
        size = min(1.0, cpus / total_cpus) if total_cpus else 0.0
    top_partition = max((p.priority_factor for p in config.partitions.values()), default=0)
    part = partition.priority_factor / top_partition if top_partition else 0.0
    top_qos = max((q.priority for q in config.qos.values()), default=0)
    qos_factor = qos.priority / top_qos if top_qos else 0.0
    value = (
        weights.age * age + weights.fairshare * fairshare + weights.job_size * size
        + weights.partition * part + weights.qos * qos_factor - nice
    )
    return PriorityFactors(int(value), age, fairshare, size, part, qos_factor, nice)


def prioritize(
    pending: Sequence[PendingJob], *, usage: Mapping[str, float], config: SchedulerConfig, now: float,
    total_gpus: int, total_cpus: int,
) -> tuple[list[PendingJob], dict[int, PriorityFactors]]:
    """The queue in the order the scheduler serves it (partition tier, then priority, then submit
    order), and each job's priority factors.

    The same arithmetic as `job_priority`, term by term (so the same priorities to the last bit),
    with what depends only on the user, the partition or the QoS worked out once per pass.
    """
    weights = config.weights
    fairshare = fairshare_factors(usage, {job.user for job in pending}, config.shares)
    users = {user: (f, weights.fairshare * f) for user, f in fairshare.items()}  # factor, weighted
    top_partition = max((p.priority_factor for p in config.partitions.values()), default=0)
    top_qos = max((q.priority for q in config.qos.values()), default=0)
    default_partition = config.partition(None)
    default_qos = config.qos_of(None)
    partitions: dict[str | None, tuple[int, float, float]] = {}  # name -> tier, factor, weighted factor
    qoses: dict[str | None, tuple[float, float]] = {}  # name -> factor, weighted factor
    unknown_user = (1.0, weights.fairshare * 1.0)
    max_age, w_age, w_size = weights.max_age_s, weights.age, weights.job_size
    factors: dict[int, PriorityFactors] = {}
    priorities: list[int] = []
    tiers: list[int] = []
    new_factors, add_priority, add_tier = PriorityFactors, priorities.append, tiers.append
    for job in pending:
        part = partitions.get(job.partition)
        if part is None:
            p = config.partitions.get(job.partition or "", default_partition)
            factor = p.priority_factor / top_partition if top_partition else 0.0
            part = partitions[job.partition] = (p.tier, factor, weights.partition * factor)
        qos = qoses.get(job.qos)
        if qos is None:
            q = config.qos.get(job.qos or "", default_qos)
            factor = q.priority / top_qos if top_qos else 0.0
            qos = qoses[job.qos] = (factor, weights.qos * factor)
        fair = users.get(job.user, unknown_user)
        age = min(max(0.0, now - job.submit_time), max_age) / max_age if max_age else 0.0
        request = job.request
        if request.gpus and total_gpus:
            size = min(1.0, request.gpus / total_gpus)
        else:
            size = min(1.0, request.cpus / total_cpus) if total_cpus else 0.0
        nice = job.nice
        priority = int(w_age * age + fair[1] + w_size * size + part[2] + qos[1] - nice)
        if job.priority is not None:  # set by an admin (sbatch --priority): it stands for every factor
            priority = job.priority
        factors[job.job_id] = new_factors(priority, age, fair[0], size, part[1], qos[0], nice)
        add_priority(priority)
        add_tier(part[0])
    # Sorted key by key, least significant first (each sort is stable): ids, submit times, then
    # priority within the tier, as one integer (no tuple per job to build and compare).
    order = sorted(range(len(pending)), key=[job.job_id for job in pending].__getitem__)
    order.sort(key=[job.submit_time for job in pending].__getitem__)
    span = 2 * max(map(abs, priorities), default=0) + 1
    order.sort(key=[-tier * span - priority for tier, priority in zip(tiers, priorities)].__getitem__)
    return [pending[k] for k in order], factors
