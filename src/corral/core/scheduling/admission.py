"""Admission: whether a job may be queued, and where (partition, QoS, time limit), decided without I/O.

The job service asks these at submit and update, handing in what it knows (the active counts,
which jobs exist, who may use a partition): they read nothing themselves. A backend that schedules
itself (Slurm) checks partitions, QoS and what its nodes can run on its own, so the service asks
only `check_nice` there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from corral.core.scheduling.resources import Node, check_node_names, check_satisfiable
from corral.core.scheduling.schedconfig import Partition, SchedulerConfig
from corral.core.jobspec.spec import JobSpec
from corral.core.units.units import format_duration
from corral.errors import Conflict, Forbidden, InvalidRequest, OverLimit, Unsatisfiable


def check_nice(spec: JobSpec, privileged: bool) -> None:
    """Only an admin may put a job ahead of others' with a negative nice (as in Slurm)."""
    if spec.nice < 0 and not privileged:
        raise InvalidRequest("nice", f"{spec.nice} would put the job ahead of others' on a shared queue; only an "
                             "admin may set a negative nice", "use 0 or more (more is kinder)")


def check_priority(spec: JobSpec, privileged: bool) -> None:
    """Only an admin may set a job's priority (sbatch --priority), as in Slurm."""
    if spec.priority is not None and not privileged:
        raise Forbidden(f"--priority={spec.priority}: only an admin may set a job's priority "
                        "(Access/permission denied); use --nice to lower your own job's")


def check_runnable(spec: JobSpec, nodes: Sequence[Node]) -> None:
    """Refuse what no node could ever run (raises Unsatisfiable, naming the limit)."""
    if spec.nodes > 1:
        raise Unsatisfiable("nodes", f"asks for {spec.nodes} nodes; this server runs each job on one machine",
                            "run multi-node jobs on a Slurm cluster (corral up --backend slurm)")
    check_node_names(spec.request, nodes)
    check_satisfiable(spec.request, nodes)


def refuse_unconfigured(changes: Mapping[str, Any], config: SchedulerConfig) -> None:
    """Refuse moving a job to a partition or QoS on a server that has none: it would change nothing.

    A submit only warns, so that a script written for another cluster runs unchanged; an update
    asks for that change alone, and answering "updated" would say it was made.
    """
    for key, section, what in (("partition", "partitions", "partitions"), ("qos", "qos", "QoS")):
        if changes.get(key) is not None and section not in config.configured:
            raise InvalidRequest(key, f"this server has no {what} configured, so the job cannot move to "
                                 f"{key} {changes[key]!r:.60}; nothing was changed",
                                 f"leave it out (every job runs in the default {key}), or ask an admin to define "
                                 f"[{section}.NAME] in the server's config.toml")


def admit(
    spec: JobSpec, config: SchedulerConfig, *, nodes: Sequence[Node], unfinished: Callable[[str], int],
    job_exists: Callable[[int], bool], may_use: Callable[[Partition, str], bool], sends_mail: bool = True,
) -> JobSpec:
    """Fill in the partition, QoS and default time limit, and check the user may submit there.

    Args:
        sends_mail: whether this server sends jobs' mail (`[smtp]`); a job asking for some is warned if not.
        unfinished: how many unfinished jobs the spec's user has in a QoS (by name).
        job_exists: whether a job id names a job (for the dependency's targets).
        may_use: whether a user may submit to a partition.

    Raises:
        InvalidRequest: an unknown partition or QoS, one the user may not use, or a dependency on no job.
        OverLimit: a time limit longer than the partition's max_time (it would wait forever).
        Conflict: the user is at the QoS's limit of submitted jobs.
    """
    warnings = list(spec.warnings)
    if spec.partition and "partitions" not in config.configured:
        warnings.append(f"no partitions are configured here; partition {spec.partition!r} ignored")
        spec = replace(spec, partition=None)
    if spec.qos and "qos" not in config.configured:
        warnings.append(f"no QoS is configured here; QoS {spec.qos!r} ignored")
        spec = replace(spec, qos=None)
    partition = spec.partition or config.default_partition
    if partition not in config.partitions:
        raise InvalidRequest("partition", f"there is no partition {partition!r}", f"use one of {', '.join(config.partitions)}")
    part = config.partitions[partition]
    if not may_use(part, spec.user):
        raise InvalidRequest("partition", f"user {spec.user} may not use partition {partition}",
                             f"ask an admin, or use another partition ({', '.join(config.partitions)})")
    qos_name = spec.qos or config.default_qos
    if qos_name not in config.qos:
        raise InvalidRequest("qos", f"there is no QoS {qos_name!r}", f"use one of {', '.join(config.qos)}")
    qos = config.qos[qos_name]
    held_by_user = unfinished(qos_name)
    if qos.max_submit_per_user is not None and held_by_user >= qos.max_submit_per_user:
        raise Conflict(f"QOSMaxSubmitJobPerUserLimit: user {spec.user} already has {qos.max_submit_per_user} "
                       f"unfinished jobs in QoS {qos_name}, its limit; wait for some to end")
    if spec.parsed_dependency is not None:
        for target in spec.parsed_dependency.job_ids:
            if not job_exists(target):
                raise InvalidRequest("dependency", f"job {target} does not exist", "depend on jobs that were submitted")
    if "params" in spec.labels:
        warnings.extend(sizing_warnings(spec, nodes))
    unsent = mail_warning(spec, sends_mail)
    if unsent:
        warnings.append(unsent)
    time_limit = spec.time_limit_s
    if time_limit is None:
        time_limit = part.default_time_s or part.max_time_s
    check_partition_time(time_limit, part, config, lambda other: may_use(other, spec.user))
    return replace(spec, partition=partition, qos=qos_name, time_limit_s=time_limit, warnings=tuple(warnings))


def check_partition_time(time_limit: int | None, partition: Partition, config: SchedulerConfig,
                         may_use: Callable[[Partition], bool]) -> None:
    """Refuse a time limit longer than the partition's max_time, which would keep the job waiting forever
    (Slurm's PartitionTimeLimit), naming the limit and the partitions the user may use that allow it."""
    longest = partition.max_time_s
    if longest is None or (time_limit is not None and time_limit <= longest):
        return
    asked = "no time limit" if time_limit is None else f"--time={format_duration(time_limit)}"
    allowing = [p.name for p in config.partitions.values() if p.name != partition.name and may_use(p)
                and (p.max_time_s is None or (time_limit is not None and time_limit <= p.max_time_s))]
    elsewhere = f", or use partition {' or '.join(allowing)}, which allows it" if allowing else ""
    raise OverLimit("time", f"{asked} is longer than partition {partition.name} allows (its max_time is "
                    f"{format_duration(longest)}): the job would never start",
                    f"ask for --time={longest // 60} (minutes) or less{elsewhere}")


def mail_warning(spec: JobSpec, sends_mail: bool) -> str | None:
    """What a job asking for mail (--mail-type) is told on a server that sends none: at submit, and in `show`
    for as long as it is so. It still runs, as the user asked."""
    if not spec.mail_type or sends_mail:
        return None
    return (f"--mail-type={','.join(spec.mail_type)}: this server sends no mail (its config.toml has no [smtp] "
            "section), so none will be sent for this job; ask an admin to set [smtp], or watch it with corral wait")


def sizing_warnings(spec: JobSpec, nodes: Sequence[Node]) -> list[str]:
    """A job that declares its model (labels params=7B, mode=, precision=) and asks for less GPU
    memory than that needs gets a warning at submit; it still runs, as the user asked."""
    from corral.core.scheduling.sizing import parse_params, undersized

    labels = spec.labels
    per_gpu = spec.gpu_mem_mb or max((g.mem_mb for n in nodes for g in n.gpus
                                      if spec.gpu_type is None or g.type == spec.gpu_type), default=None)
    try:
        warning = undersized(parse_params(labels["params"]), labels.get("mode", "train"),
                             labels.get("precision", "bf16"), spec.gpus * spec.nodes, per_gpu)
    except InvalidRequest as exc:
        return [f"labels: cannot size the declared model: {exc.message}"]
    return [warning] if warning else []
