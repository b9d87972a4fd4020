"""Building a job spec: a submit request (or a `corral update`) checked and turned into a JobSpec.

A request comes from the CLI, the REST API, the Python client or a script's
`#SBATCH` header; all of them end up in `build_spec`, so each field is checked
once and every mistake is reported the same way, naming the field and the fix.
Each field's parser lives with its kind: `spec_resources` (GPUs, CPUs, memory, time,
requirements), `spec_paths` (directories, logs, umask), `spec_env` (environment, labels),
`spec_signals` (the warning signal), `spec_queue` (dependency, array, partition, QoS,
account) and `spec_command` (argv or script, name); the spec itself and its limits are
in `job_spec`, re-exported here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from corral.core.dialects import sbatch
from corral.core.dialects.htcondor import condor_request
from corral.core.jobspec.arrays import MAX_TASKS
from corral.core.jobspec.job_spec import (
    DEFAULT_MAX_SCRIPT_MB,
    MAX_CPUS,
    MAX_ENV_BYTES,
    MAX_GPUS,
    MAX_MB,
    MAX_NAME,
    MAX_NICE,
    MAX_NODES,
    MAX_SCRIPT_MB_RANGE,
    MAX_TIME_S,
    MINIMAL_ENV_KEYS,
    REQUEST_FIELDS,
    UPDATE_FIELDS,
    JobSpec,
)
from corral.core.jobspec.spec_container import container_spec
from corral.core.jobspec.spec_command import job_comment, job_name, split_command
from corral.core.jobspec.features import parse_constraint
from corral.core.jobspec.spec_env import parse_labels, resolve_environment
from corral.core.jobspec.spec_paths import check_directory, log_patterns, open_mode, parse_umask, parse_user_log
from corral.core.jobspec.spec_queue import array_field, config_name, dependency_field, yes_no
from corral.core.jobspec.spec_resources import (
    int_in,
    parse_gpu_request,
    parse_gpus,
    parse_mem,
    parse_requirements,
    parse_time_limit,
    size_or_none,
)
from corral.core.jobspec.spec_sharing import is_shard_gres, parse_shards, share_of, split_shards
from corral.core.jobspec.spec_signals import parse_signal, signal_text
from corral.core.jobspec.spec_slurm import check_window, mail_types, mail_user, moment, node_names, priority, time_min
from corral.errors import InvalidRequest, several_problems

__all__ = [
    "DEFAULT_MAX_SCRIPT_MB", "MAX_CPUS", "MAX_ENV_BYTES", "MAX_GPUS", "MAX_MB", "MAX_NAME", "MAX_NICE", "MAX_NODES",
    "MAX_SCRIPT_MB_RANGE", "MAX_TIME_S", "MINIMAL_ENV_KEYS", "REQUEST_FIELDS", "UPDATE_FIELDS", "JobSpec",
    "build_spec", "check_script_size", "parse_gpu_request", "parse_signal", "update_spec",
]

# Spellings of one setting: a request that uses any of them replaces what the script said in any other.
_ALTERNATIVES = (("mem", "mem_mb", "mem_per_cpu", "mem_per_gpu"), ("time", "time_limit_s"), ("cpus", "cpus_per_gpu"))


def check_script_size(request: Mapping[str, Any], max_mb: int) -> None:
    """Refuse a batch script larger than the server takes, before anything reads it.

    Raises:
        InvalidRequest: naming `script` and the `[server] max_script_mb` setting.
    """
    script = request.get("script")
    if not isinstance(script, str) or len(script) * 4 <= max_mb << 20:  # UTF-8: at most 4 bytes a character
        return
    size = len(script) if len(script) > max_mb << 20 else len(script.encode("utf-8", "surrogatepass"))
    if size > max_mb << 20:
        raise InvalidRequest("script", f"is {size / (1 << 20):.1f} MB; this server takes batch scripts up to {max_mb} MB",
                             "read large data from a file in the script, or ask an admin to raise "
                             "[server] max_script_mb (at most 32)")


def build_spec(
    request: Mapping[str, Any], *, user: str, log_dir: str, default_workdir: str, server_env: Mapping[str, str],
    can_enter: Callable[[str], bool] | None = None, max_nodes: int = MAX_NODES, now: float = 0.0,
) -> JobSpec:
    """Validate a submit request and turn it into a JobSpec.

    Script directives (`#SBATCH`) apply first, then `options` (sbatch's command line, read by the same
    parser), then the fields set in the request, as Slurm orders them.
    `can_enter`: whether `user` can enter a directory (asked as them on a shared server, so that
    nobody learns what lies where they may not look); the service layer passes it, since looking is
    I/O; None checks only that the paths are absolute. `max_nodes`: the most nodes this server's
    backend runs a job on, for a script's `--nodes`. `now`: the server's clock, which `--begin`'s and
    `--deadline`'s times (`16:00`, `now+1hour`) are read against.

    Raises:
        InvalidRequest: naming the first bad field and how to fix it; for a script's directives,
            every bad one at once (`problems`).
    """
    unknown = set(request) - REQUEST_FIELDS
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "unknown field", f"known fields: {', '.join(sorted(REQUEST_FIELDS))}")
    given = {k: v for k, v in request.items() if v is not None}
    warnings: list[str] = []
    if "condor" in given:
        # an HTCondor submit description: its settings first, the request's own fields over them
        if not isinstance(given["condor"], str):
            raise InvalidRequest("condor", "must be the text of an HTCondor submit description")
        from_condor, condor_warnings = condor_request(given.pop("condor"), max_tasks=MAX_TASKS)
        warnings.extend(condor_warnings)
        given = {**from_condor, **given}
    options = sbatch.read_options(given.pop("options")) if "options" in given else None
    command, script, script_args = split_command(given)
    # Slurm's order: a script's #SBATCH lines, then sbatch's command line (`options`), then the request's fields
    fields: dict[str, Any] = {}
    if script is not None:
        directives = sbatch.read_script(script)
        _check_directives(directives, {**(options.fields if options else {}), **given}, max_nodes)
        warnings.extend(directives.warnings)
        _override(fields, directives.fields)
    if options is not None:
        _check_directives(options, given, max_nodes, field="options", where="the sbatch options")
        warnings.extend(options.warnings)
        _override(fields, options.fields)
    _override(fields, given)
    if "gpus_per_node" in fields:
        if "gpus" in given:
            raise InvalidRequest("gpus_per_node", "given together with gpus", "give one: with --nodes, GPUs are per node")
        fields["gpus"] = fields.pop("gpus_per_node")
    nodes = int_in(fields.get("nodes", 1), "nodes", 1, MAX_NODES)
    ntasks, ntasks_per_node = task_counts(fields, nodes)
    tasks_here = min(ntasks_per_node or ntasks, -(-ntasks // nodes))  # as JobSpec.tasks_per_node

    shards = split_shards(fields)
    gpu_type, gpus, gpus_per_task = _gpus(fields, tasks_here)
    gpu_mem_mb = size_or_none(fields, "gpu_mem", "gpu_mem_mb")
    gpus, gpu_share_mb = share_of(fields, shards, gpus, gpu_mem_mb, yes_no(fields.get("exclusive", False), "exclusive"))
    cpus = _cpus(fields, gpus, tasks_here)
    mem_mb = parse_mem(fields, cpus, gpus)
    if gpu_mem_mb is not None and gpus == 0:
        raise InvalidRequest("gpu_mem", "is set but no GPUs were requested", "add --gpus N")
    time_limit_s = parse_time_limit(fields)
    nice = int_in(fields.get("nice", 0), "nice", -MAX_NICE, MAX_NICE)
    env, inherit_env = resolve_environment(fields, server_env)
    submit_dir = check_directory(fields.get("submit_dir", default_workdir), "submit_dir", user, can_enter)
    workdir_text = fields.get("workdir", submit_dir)
    if not isinstance(workdir_text, str) or not workdir_text:
        raise InvalidRequest("workdir", "must be a directory path")
    workdir = check_directory(os.path.join(submit_dir, workdir_text), "workdir", user, can_enter)
    stdout, stderr = log_patterns(fields, log_dir)
    requirements = parse_requirements(fields.get("requirements"), gpus)
    user_log = parse_user_log(fields.get("user_log"), workdir)
    dependency = dependency_field(fields.get("dependency"))
    begin, deadline = moment(fields.get("begin"), "begin", now), moment(fields.get("deadline"), "deadline", now)
    shortest = time_min(fields.get("time_min"), time_limit_s)
    check_window(begin, deadline, time_limit_s, shortest, now)
    fixed_priority = priority(fields.get("priority"))
    return JobSpec(
        name=job_name(fields.get("name"), command, fields.get("script_name") if script is not None else None),
        user=user,
        command=command,
        script=script,
        script_args=script_args,
        gpus=gpus,
        gpu_type=gpu_type,
        gpu_mem_mb=gpu_mem_mb,
        gpu_shards=shards,
        gpu_share_mb=gpu_share_mb,
        cpus=cpus,
        mem_mb=mem_mb,
        time_limit_s=time_limit_s,
        env=env,
        inherit_env=inherit_env,
        labels=parse_labels(fields.get("labels", {})),
        workdir=workdir,
        submit_dir=submit_dir,
        stdout=stdout,
        stderr=stderr,
        nice=nice,
        partition=config_name(fields.get("partition"), "partition"),
        qos=config_name(fields.get("qos"), "qos"),
        dependency=dependency.text if dependency is not None else None,
        parsed_dependency=dependency,
        kill_on_invalid_dep=yes_no(fields.get("kill_on_invalid_dep", False), "kill_on_invalid_dep"),
        array=array_field(fields.get("array")),
        nodes=nodes,
        ntasks=ntasks,
        ntasks_per_node=ntasks_per_node,
        gpus_per_task=gpus_per_task,
        preemptible=yes_no(fields.get("preemptible", False), "preemptible"),
        requeue=None if fields.get("requeue") is None else yes_no(fields["requeue"], "requeue"),
        warn_signal=signal_text(fields.get("signal")),
        account=config_name(fields.get("account"), "account"),
        reservation=config_name(fields.get("reservation") or None, "reservation"),
        umask=parse_umask(fields.get("umask")),
        requirements=requirements,
        user_log=user_log,
        open_mode=open_mode(fields.get("open_mode")),
        comment=job_comment(fields.get("comment")),
        begin_time=begin,
        deadline=deadline,
        exclusive=yes_no(fields.get("exclusive", False), "exclusive"),
        features=parse_constraint(fields.get("constraint")),
        nodelist=node_names(fields.get("nodelist"), "nodelist"),
        exclude=node_names(fields.get("exclude"), "exclude"),
        mail_type=mail_types(fields.get("mail_type")),
        mail_user=mail_user(fields.get("mail_user")),
        time_min_s=shortest,
        priority=fixed_priority,
        interactive=interactive_mode(fields.get("interactive"), fields.get("array")),
        container=container_spec(fields, workdir),
        # Slurm's priority 0 is a held job (released by giving it a priority again, or corral release)
        hold=yes_no(fields.get("hold", False), "hold") or fixed_priority == 0,
        warnings=tuple(warnings),
    )


def task_counts(fields: Mapping[str, Any], nodes: int) -> tuple[int, int | None]:
    """The job's tasks (--ntasks) and, where given, --ntasks-per-node; without --ntasks, one per node or
    --ntasks-per-node's worth on each, as sbatch counts them.

    Raises:
        InvalidRequest: a bad count, or more tasks than --ntasks-per-node lets its nodes hold.
    """
    per_node = int_in(fields["ntasks_per_node"], "ntasks_per_node", 1, MAX_CPUS) if "ntasks_per_node" in fields else None
    if "ntasks" not in fields:
        return (per_node or 1) * nodes, per_node
    ntasks = int_in(fields["ntasks"], "ntasks", 1, MAX_CPUS)
    if per_node is not None and ntasks > per_node * nodes:
        raise InvalidRequest("ntasks", f"{ntasks} tasks do not fit {nodes} node(s) at --ntasks-per-node={per_node}",
                             f"ask for --ntasks={per_node * nodes} or fewer, or raise --ntasks-per-node")
    if ntasks < nodes:
        raise InvalidRequest("ntasks", f"{ntasks} task(s) cannot span {nodes} nodes",
                             f"ask for --ntasks={nodes} or more, or fewer --nodes")
    return ntasks, per_node


def _gpus(fields: Mapping[str, Any], tasks_here: int) -> tuple[str | None, int, int | None]:
    """The GPU type, the GPUs on each node, and --gpus-per-task where given (then the GPUs are that times
    the node's tasks)."""
    if "gpus_per_task" not in fields:
        return (*parse_gpus(fields), None)
    for other in ("gpus", "gres"):
        if other in fields:
            raise InvalidRequest("gpus_per_task", f"given together with {other}",
                                 "give one: --gpus-per-task=N, or the job's GPUs with --gpus")
    gpu_type, per_task = parse_gpu_request(str(fields["gpus_per_task"]), "gpus_per_task")
    if "gpu_type" in fields:
        gpu_type, _ = parse_gpus({"gpus": 1, "gpu_type": fields["gpu_type"]})
    return gpu_type, int_in(per_task * tasks_here, "gpus_per_task", 0, MAX_GPUS), per_task


def _cpus(fields: Mapping[str, Any], gpus: int, tasks_here: int) -> int:
    """The CPUs on each of the job's nodes: --cpus-per-task times the node's tasks, or --cpus-per-gpu
    times its GPUs (not both, as sbatch says)."""
    if "cpus_per_gpu" not in fields:
        per_task = int_in(fields.get("cpus", 1), "cpus", 1, MAX_CPUS)
        return int_in(per_task * tasks_here, "cpus", 1, MAX_CPUS)
    if "cpus" in fields:
        raise InvalidRequest("cpus_per_gpu", "given together with cpus (--cpus-per-task)",
                             "give one: --cpus-per-gpu=N or --cpus-per-task=N")
    per_gpu = int_in(fields["cpus_per_gpu"], "cpus_per_gpu", 1, MAX_CPUS)
    if gpus == 0:
        raise InvalidRequest("cpus_per_gpu", "needs a GPU request", "add --gpus N, or use --cpus-per-task")
    return int_in(per_gpu * gpus, "cpus_per_gpu", 1, MAX_CPUS)


def _override(fields: dict[str, Any], over: Mapping[str, Any]) -> None:
    """`over`'s fields replace `fields`' (a later source's): a setting given in any spelling replaces every other."""
    for group in _ALTERNATIVES:
        if any(key in over for key in group):
            for key in group:
                fields.pop(key, None)
    if "gres" in over:
        fields.pop("gpus", None)  # else an earlier --gpus would beat the later gres in parse_gpus
    if {"gpus", "gres", "gpus_per_node"} & set(over):
        fields.pop("gpus_per_task", None)
    if "gpus_per_task" in over:
        fields.pop("gpus", None)
        fields.pop("gres", None)
    fields.update(over)


# A directive's value, checked on its own: the request's own field of that name (or spelling) replaces it.
_DIRECTIVE_CHECKS: dict[str, Callable[[Any], object]] = {
    "nodes": lambda v: int_in(v, "nodes", 1, MAX_NODES),
    "gres": lambda v: parse_shards(v) if is_shard_gres(v) else parse_gpus({"gres": v}), "gpus": lambda v: parse_gpus({"gpus": v}),
    "cpus": lambda v: int_in(v, "cpus", 1, MAX_CPUS),
    "mem": lambda v: parse_mem({"mem": v}, 1, 1), "mem_per_cpu": lambda v: parse_mem({"mem_per_cpu": v}, 1, 1),
    "mem_per_gpu": lambda v: parse_mem({"mem_per_gpu": v}, 1, 1),
    "time": lambda v: parse_time_limit({"time": v}), "nice": lambda v: int_in(v, "nice", -MAX_NICE, MAX_NICE),
    "partition": lambda v: config_name(v, "partition"), "qos": lambda v: config_name(v, "qos"),
    "dependency": lambda v: dependency_field(v), "kill_on_invalid_dep": lambda v: yes_no(v, "kill_on_invalid_dep"),
    "array": lambda v: array_field(v), "signal": lambda v: signal_text(v),
    "account": lambda v: config_name(v, "account"), "comment": job_comment, "open_mode": open_mode,
    "cpus_per_gpu": lambda v: int_in(v, "cpus_per_gpu", 1, MAX_CPUS), "exclusive": lambda v: yes_no(v, "exclusive"),
    "begin": lambda v: moment(v, "begin", 0.0), "deadline": lambda v: moment(v, "deadline", 0.0),
    "constraint": parse_constraint, "nodelist": lambda v: node_names(v, "nodelist"),
    "exclude": lambda v: node_names(v, "exclude"), "mail_type": mail_types, "mail_user": mail_user,
    "time_min": lambda v: time_min(v, None), "priority": priority,
    "ntasks": lambda v: int_in(v, "ntasks", 1, MAX_CPUS), "ntasks_per_node": lambda v: int_in(v, "ntasks_per_node", 1, MAX_CPUS),
    "gpus_per_task": lambda v: parse_gpu_request(str(v), "gpus_per_task"),
}
_GPU_SPELLINGS = ("gpus", "gres", "gpus_per_node", "gpus_per_task")
_OVERRIDDEN_BY = {key: group for group in _ALTERNATIVES for key in group} | {"gpus": _GPU_SPELLINGS,
                                                                             "gpus_per_task": _GPU_SPELLINGS}


def _check_directives(directives: sbatch.Directives, given: Mapping[str, Any], max_nodes: int, *,
                      field: str = "script", where: str = "the script's directives") -> None:
    """Raise every fault of a script's directives (or of sbatch's options: `field` "options") at once: the
    unsupported or unreadable ones, bad values, and more nodes than this server runs a job on. `given`:
    the fields set over them, whose directives are not checked.

    Raises:
        InvalidRequest: field `field`, each fault in `problems` with its line and fix.
    """
    problems = list(directives.problems)
    too_many = bad_field = ""
    for key, value in directives.fields.items():
        check = _DIRECTIVE_CHECKS.get(key)
        if check is None or any(k in given for k in _OVERRIDDEN_BY.get(key, (key,))):
            continue
        place = directives.places.get(key, f"{'#SBATCH' if field == 'script' else 'sbatch'} {key}")
        try:
            check(value)
        except InvalidRequest as exc:
            prefix = f"{exc.field}: "
            problems.append(f"{place}: {exc.message[len(prefix):] if exc.message.startswith(prefix) else exc.message}")
            bad_field = exc.field
            continue
        if key == "nodes" and int(value) > max_nodes:
            too_many = f"{place}: this server runs each job on one machine (remove it, or run multi-node jobs " \
                       "on a Slurm cluster: corral up --backend slurm)"
    if problems and too_many:  # alone, the server refuses it as Unsatisfiable, as it does --nodes on the command line
        problems.append(too_many)
    if len(problems) == 1 and not directives.problems:  # one bad value: on its field, as the same value given alone
        raise InvalidRequest(bad_field, problems[0], problems=(problems[0],))
    if problems:
        problems.sort(key=sbatch.line_of)
        raise several_problems(field, where, problems)

def update_spec(spec: JobSpec, changes: Mapping[str, Any], now: float = 0.0) -> JobSpec:
    """A pending job's spec with some fields changed (`corral update`), checked as at submit.

    `now`: the server's clock, which a new --begin's or --deadline's time (`now+1hour`) is read against.
    A blank value clears what can be cleared (comment, begin, deadline, constraint, node lists, mail, time_min,
    dependency).

    Raises:
        InvalidRequest: a field that cannot be changed, or a bad value.
    """
    unknown = set(changes) - UPDATE_FIELDS
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "cannot be changed after submit",
                             f"changeable: {', '.join(sorted(UPDATE_FIELDS))}")
    fields = {k: v for k, v in changes.items() if v is not None}
    if not fields:
        raise InvalidRequest("body", "changes nothing", f"give one of {', '.join(sorted(UPDATE_FIELDS))}")
    gpu_type, gpus = spec.gpu_type, spec.gpus
    if (spec.gpu_share_mb or spec.gpu_shards) and {"gpus", "gres", "gpu_type", "gpu_mem"} & set(fields):
        raise InvalidRequest(sorted({"gpus", "gres", "gpu_type", "gpu_mem"} & set(fields))[0],
                             "a sharing job's GPU share cannot be changed", "cancel it and submit it again")
    if {"gpus", "gres", "gpu_type"} & set(fields):
        gpu_fields = {"gpus": spec.gpus, **({"gpu_type": spec.gpu_type} if spec.gpu_type else {}), **fields}
        gpu_type, gpus = parse_gpus(gpu_fields)
    per_task = int_in(fields["cpus"], "cpus", 1, MAX_CPUS) if "cpus" in fields else None
    cpus = int_in(per_task * spec.tasks_per_node, "cpus", 1, MAX_CPUS) if per_task is not None else spec.cpus
    memory_keys = {"mem", "mem_mb", "mem_per_cpu", "mem_per_gpu"} & set(fields)
    mem_mb = parse_mem(fields, cpus, gpus) if memory_keys else spec.mem_mb
    time_keys = {"time", "time_limit_s"} & set(fields)
    gpu_mem_mb = size_or_none(fields, "gpu_mem", "gpu_mem_mb") if "gpu_mem" in fields else spec.gpu_mem_mb
    if gpu_mem_mb is not None and gpus == 0:
        raise InvalidRequest("gpu_mem", "is set but no GPUs are requested", "add gpus, or clear gpu_mem")
    parse_requirements(spec.requirements, gpus)
    time_limit_s = parse_time_limit(fields) if time_keys else spec.time_limit_s
    return replace(
        _update_slurm_fields(spec, fields, time_limit_s, now),
        name=job_name(fields["name"], spec.command, None) if "name" in fields else spec.name,
        gpus=gpus, gpu_type=gpu_type,
        gpus_per_task=spec.gpus_per_task if gpus == spec.gpus else None,
        gpu_mem_mb=gpu_mem_mb,
        cpus=cpus, mem_mb=mem_mb,
        time_limit_s=time_limit_s,
        nice=int_in(fields["nice"], "nice", -MAX_NICE, MAX_NICE) if "nice" in fields else spec.nice,
        partition=config_name(fields["partition"], "partition") if "partition" in fields else spec.partition,
        qos=config_name(fields["qos"], "qos") if "qos" in fields else spec.qos,
        preemptible=yes_no(fields["preemptible"], "preemptible") if "preemptible" in fields else spec.preemptible,
        warnings=(),
    )


INTERACTIVE_MODES = ("pty", "stream")


def interactive_mode(value: Any, array: Any) -> str | None:
    """The request's `interactive` (srun, salloc): how its client talks to it, or None for a batch job."""
    if value is None:
        return None
    if value not in INTERACTIVE_MODES:
        raise InvalidRequest("interactive", f"must be pty or stream, got {value!r}",
                             "give interactive: pty (a terminal) or stream (pipes), or leave it out for a batch job")
    if array is not None:
        raise InvalidRequest("interactive", "an interactive job cannot be an array",
                             "submit the array with sbatch, or run one interactive job")
    return str(value)


def _update_slurm_fields(spec: JobSpec, fields: Mapping[str, Any], time_limit_s: int | None, now: float) -> JobSpec:
    """sbatch's when, where, mail and dependency fields of an update (scontrol update's StartTime, Deadline,
    Features, ReqNodeList, ExcNodeList, MailUser, MailType, Comment, TimeMin, Dependency, Priority)."""
    dependency = dependency_field(fields["dependency"]) if "dependency" in fields else spec.parsed_dependency
    begin = moment(fields["begin"], "begin", now) if "begin" in fields else spec.begin_time
    deadline = moment(fields["deadline"], "deadline", now) if "deadline" in fields else spec.deadline
    shortest = spec.time_min_s
    if "time_min" in fields:
        blank = isinstance(fields["time_min"], str) and not fields["time_min"].strip()
        shortest = None if blank else time_min(fields["time_min"], time_limit_s) or None
    if shortest is not None and time_limit_s is not None and shortest > time_limit_s:
        raise InvalidRequest("time_min", f"{shortest} s is longer than the time limit ({time_limit_s} s)",
                             "give a time_min no longer than the time limit, or clear it (time_min=\"\")")
    if {"begin", "deadline", "time_min", "time", "time_limit_s"} & set(fields):
        check_window(begin, deadline, time_limit_s, shortest, now)
    return replace(
        spec,
        comment=job_comment(fields["comment"]) if "comment" in fields else spec.comment,
        begin_time=begin, deadline=deadline, time_min_s=shortest,
        features=parse_constraint(fields["constraint"]) if "constraint" in fields else spec.features,
        nodelist=node_names(fields["nodelist"], "nodelist") if "nodelist" in fields else spec.nodelist,
        exclude=node_names(fields["exclude"], "exclude") if "exclude" in fields else spec.exclude,
        mail_type=mail_types(fields["mail_type"]) if "mail_type" in fields else spec.mail_type,
        mail_user=mail_user(fields["mail_user"]) if "mail_user" in fields else spec.mail_user,
        dependency=dependency.text if dependency is not None else None, parsed_dependency=dependency,
        priority=priority(fields["priority"]) if "priority" in fields else spec.priority,
    )
