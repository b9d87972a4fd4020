"""Scheduler configuration: priority weights, fair share, partitions and QoS (the `[scheduler]`,
`[partitions.NAME]` and `[qos.NAME]` tables of `<home>/config.toml`), parsed into frozen data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.core.units.units import parse_duration_s
from corral.errors import InvalidRequest

DEFAULT_PARTITION = "default"
DEFAULT_QOS = "normal"


@dataclass(frozen=True, slots=True)
class PriorityWeights:
    """Slurm's PriorityWeight* settings; a job's priority is the weighted sum of its factors minus nice."""

    age: int = 1000
    fairshare: int = 10000
    job_size: int = 0
    """Off unless configured: on one machine, first come first served among equals surprises nobody."""
    partition: int = 1000
    qos: int = 1000
    max_age_s: int = 7 * 86400
    """Age stops counting here (Slurm's PriorityMaxAge)."""


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    max_time_s: int | None = None
    default_time_s: int | None = None
    allowed_users: frozenset[str] | None = None
    """None: everybody (unless `allowed_groups` says otherwise)."""
    allowed_groups: frozenset[str] | None = None
    """Unix groups whose members may use it, besides `allowed_users`."""
    tier: int = 1
    """Jobs of a higher tier are considered before any job of a lower one (Slurm's PriorityTier)."""
    priority_factor: int = 1
    """Feeds the partition factor of the priority (Slurm's PriorityJobFactor)."""


@dataclass(frozen=True, slots=True)
class Qos:
    name: str
    priority: int = 0
    max_running_per_user: int | None = None
    max_gpus_per_user: int | None = None
    max_submit_per_user: int | None = None


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    weights: PriorityWeights = field(default_factory=PriorityWeights)
    half_life_s: int = 7 * 86400
    """Past usage counts half as much after this long (Slurm's PriorityDecayHalfLife)."""
    backfill_depth: int = 100
    """Reservations made per pass at most (Slurm's bf_max_job_test); the queue stops behind the last."""
    shares: Mapping[str, int] = field(default_factory=dict)
    """Fair-share shares by user; users not listed have 1."""
    partitions: Mapping[str, Partition] = field(
        default_factory=lambda: {DEFAULT_PARTITION: Partition(DEFAULT_PARTITION)}
    )
    default_partition: str = DEFAULT_PARTITION
    qos: Mapping[str, Qos] = field(default_factory=lambda: {DEFAULT_QOS: Qos(DEFAULT_QOS)})
    default_qos: str = DEFAULT_QOS
    configured: frozenset[str] = frozenset()
    """Which of "partitions" and "qos" the config file defines; a script naming one that is not
    configured runs in the default (with a warning), as a Slurm script moved to corral should."""

    def partition(self, name: str | None) -> Partition:
        return self.partitions[name or self.default_partition]

    def qos_of(self, name: str | None) -> Qos:
        return self.qos[name or self.default_qos]


def parse_scheduler_config(
    scheduler: Mapping[str, Any], partitions: Mapping[str, Any], qos: Mapping[str, Any], source: str
) -> SchedulerConfig:
    """Build the configuration from the TOML tables, naming any bad key and the fix.

    Raises:
        InvalidRequest: an unknown key, a value of the wrong type, a default that names nothing.
    """
    weights_table = _known(dict(scheduler.get("weights", {})),
                           ("age", "fairshare", "job_size", "partition", "qos", "max_age"), "scheduler.weights", source)
    values = {k: _int(v, f"scheduler.weights.{k}", source, 0) for k, v in weights_table.items() if k != "max_age"}
    if "max_age" in weights_table:
        values["max_age_s"] = _duration(weights_table["max_age"], "scheduler.weights.max_age", source)
    weights = PriorityWeights(**values)
    sched = _known(dict(scheduler), ("weights", "half_life", "shares", "default_partition", "default_qos",
                                     "backfill_depth"), "scheduler", source)
    half_life = _duration(sched.get("half_life", "7-0"), "scheduler.half_life", source)
    shares = {str(u): _int(v, f"scheduler.shares.{u}", source, 1) for u, v in dict(sched.get("shares", {})).items()}

    parts = {name: _partition(name, dict(table), source) for name, table in partitions.items()}
    if not parts:
        parts = {DEFAULT_PARTITION: Partition(DEFAULT_PARTITION)}
    default_partition = str(sched.get("default_partition", next(iter(parts))))
    if default_partition not in parts:
        raise InvalidRequest("scheduler.default_partition", f"names no partition in {source}: {default_partition!r}",
                             f"define [partitions.{default_partition}] or pick one of {', '.join(parts)}")
    qoses = {name: _qos(name, dict(table), source) for name, table in qos.items()}
    if not qoses:
        qoses = {DEFAULT_QOS: Qos(DEFAULT_QOS)}
    default_qos = str(sched.get("default_qos", DEFAULT_QOS if DEFAULT_QOS in qoses else next(iter(qoses))))
    if default_qos not in qoses:
        raise InvalidRequest("scheduler.default_qos", f"names no QoS in {source}: {default_qos!r}",
                             f"define [qos.{default_qos}] or pick one of {', '.join(qoses)}")
    configured = frozenset(name for name, table in (("partitions", partitions), ("qos", qos)) if table)
    depth = _int(sched.get("backfill_depth", 100), "scheduler.backfill_depth", source, 1)
    return SchedulerConfig(weights=weights, half_life_s=half_life, shares=shares, partitions=parts, backfill_depth=depth,
                           default_partition=default_partition, qos=qoses, default_qos=default_qos,
                           configured=configured)


def _partition(name: str, table: dict[str, Any], source: str) -> Partition:
    where = f"partitions.{name}"
    table = _known(table, ("max_time", "default_time", "allowed_users", "allowed_groups", "tier", "priority_factor"),
                   where, source)
    max_time = _duration(table["max_time"], f"{where}.max_time", source) if "max_time" in table else None
    default_time = _duration(table["default_time"], f"{where}.default_time", source) if "default_time" in table else None
    if max_time and default_time and default_time > max_time:
        raise InvalidRequest(f"{where}.default_time", f"is longer than max_time in {source}")
    users, groups = table.get("allowed_users"), table.get("allowed_groups")
    for key, names in (("allowed_users", users), ("allowed_groups", groups)):
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise InvalidRequest(f"{where}.{key}", f"must be a list of names in {source}")
    return Partition(
        name=name, max_time_s=max_time, default_time_s=default_time,
        allowed_users=frozenset(users) if users is not None else None,
        allowed_groups=frozenset(groups) if groups is not None else None,
        tier=_int(table.get("tier", 1), f"{where}.tier", source, 0),
        priority_factor=_int(table.get("priority_factor", 1), f"{where}.priority_factor", source, 0),
    )


def _qos(name: str, table: dict[str, Any], source: str) -> Qos:
    where = f"qos.{name}"
    keys = ("priority", "max_running_per_user", "max_gpus_per_user", "max_submit_per_user")
    table = _known(table, keys, where, source)
    return Qos(name=name, **{k: _int(v, f"{where}.{k}", source, 0) for k, v in table.items()})


def _known(table: dict[str, Any], keys: tuple[str, ...], where: str, source: str) -> dict[str, Any]:
    for key in table:
        if key not in keys:
            raise InvalidRequest(f"{where}.{key}", f"unknown key in {source}", f"known: {', '.join(keys)}")
    return table


def _int(value: Any, where: str, source: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidRequest(where, f"must be a whole number of at least {low} in {source}, got {value!r}")
    return value


def _duration(value: Any, where: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidRequest(where, f"must be a duration like \"2h\" or \"1-00:00:00\" in {source}, got {value!r}")
    seconds = parse_duration_s(value, field=where)
    if seconds is None:
        raise InvalidRequest(where, f"must be a finite duration in {source}", "leave the key out for no limit")
    return seconds
