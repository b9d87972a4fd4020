"""The job spec: frozen data built from a request, validated in one place.

A request comes from the CLI, the REST API, the Python client or a script's
`#SBATCH` header; all of them end up in `build_spec`, so each field is checked
once and every mistake is reported the same way, naming the field and the fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from corral.core import classad, sbatch
from corral.core.arrays import parse_array
from corral.core.bodies import check_text
from corral.core.dependency import Dependency, parse_dependency
from corral.core.htcondor import condor_request
from corral.core.paths import check_pattern
from corral.core.resources import Request
from corral.core.units import is_number, parse_duration_s, parse_memory_mb
from corral.errors import InvalidRequest, several_problems

MAX_NODES = 1024
MAX_GPUS = 1024
MAX_CPUS = 100_000
MAX_TIME_S = 365 * 86400
MAX_NICE = 10_000
MAX_NAME = 200
MAX_ENV_BYTES = 1 << 20
DEFAULT_MAX_SCRIPT_MB = 4  # Slurm's default max_script_size
MAX_SCRIPT_MB_RANGE = (1, 32)  # what [server] max_script_mb may be set to
MAX_MB = 2**31 - 1  # 2 PiB; the database stores megabytes in 32-bit integers
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,62}$")
_GPU_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
_INTERPRETERS = {"python", "python3", "bash", "sh", "zsh", "torchrun", "uv", "accelerate", "deepspeed", "srun"}
# What a job started with --export=NONE still needs to find programs and its home.
MINIMAL_ENV_KEYS = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM", "SHELL", "TMPDIR")

# Spellings of one setting: a request that uses any of them replaces what the script said in any other.
_ALTERNATIVES = (("mem", "mem_mb", "mem_per_cpu", "mem_per_gpu"), ("time", "time_limit_s"))

REQUEST_FIELDS = frozenset({
    "command", "script", "script_args", "name", "gpus", "gpus_per_node", "nodes", "gres", "gpu_type", "gpu_mem", "gpu_mem_mb", "cpus",
    "mem", "mem_mb", "mem_per_cpu", "mem_per_gpu", "time", "time_limit_s", "env", "export", "environment",
    "labels", "workdir", "submit_dir", "stdout", "stderr", "nice", "script_name", "partition", "qos",
    "dependency", "kill_on_invalid_dep", "array", "preemptible", "signal", "condor", "account", "umask",
    "requirements", "user_log",
})


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What to run and what it needs. Immutable once accepted."""

    name: str
    user: str
    command: tuple[str, ...]
    """argv; empty when `script` is set."""
    script: str | None
    script_args: tuple[str, ...]
    gpus: int
    gpu_type: str | None
    gpu_mem_mb: int | None
    """Each GPU must have at least this much memory."""
    cpus: int
    mem_mb: int
    """Host memory; 0 asks for none and sets no limit."""
    time_limit_s: int | None
    env: Mapping[str, str]
    inherit_env: bool
    """Start from the server's environment (True) or from `env` alone (False)."""
    labels: Mapping[str, str]
    workdir: str
    submit_dir: str
    """Where it was submitted from: the default working directory, and SLURM_SUBMIT_DIR."""
    stdout: str
    """Path pattern (`%j`, `%x`, `%A`, `%a`, ...), relative to `workdir` unless absolute."""
    stderr: str | None
    """None: stderr goes to the stdout file, as in sbatch with --output alone."""
    nice: int = 0
    partition: str | None = None
    """None until the server fills in its default."""
    qos: str | None = None
    dependency: str | None = None
    """sbatch's --dependency text, checked by corral.core.dependency."""
    kill_on_invalid_dep: bool = False
    array: str | None = None
    """sbatch's --array text for an array job; None for a single job (and for each task)."""
    preemptible: bool = False
    """A job of higher priority may stop it (warning signal, grace period) and queue it again."""
    warn_signal: str | None = None
    """sbatch's --signal: `USR1@90` sends SIGUSR1 90 s before the time limit (and on preemption)."""
    nodes: int = 1
    """Nodes it spans; `gpus`, `cpus` and `mem_mb` are per node. More than one needs the Slurm backend."""
    account: str | None = None
    """sbatch's --account: its coordinators may manage the job (None until the server fills in the default)."""
    umask: int | None = None
    """The submitter's umask, applied to the job's files (None: the server's)."""
    requirements: str | None = None
    """A ClassAd expression (HTCondor's requirements) over the node and each GPU it gets; see corral.core.classad."""
    user_log: str | None = None
    """An HTCondor job event log to append to (submit, execute, terminate): an absolute path pattern (`%A`)."""
    warnings: tuple[str, ...] = field(default=(), compare=False)
    parsed_dependency: Dependency | None = field(default=None, compare=False, repr=False)
    """`dependency`, parsed: once at submit, carried through every `replace`, read by admission and the queue."""

    def __post_init__(self) -> None:
        parsed = self.parsed_dependency
        if self.dependency is None and parsed is not None:
            object.__setattr__(self, "parsed_dependency", None)
        elif self.dependency is not None and (parsed is None or parsed.text != self.dependency):
            object.__setattr__(self, "parsed_dependency", parse_dependency(self.dependency))  # as read from the store

    @property
    def request(self) -> Request:
        """The resources it needs, as the scheduler sees them."""
        return Request(self.gpus, self.gpu_type, self.gpu_mem_mb, self.cpus, self.mem_mb, self.requirements)


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
    can_enter: Callable[[str], bool] | None = None, max_nodes: int = MAX_NODES,
) -> JobSpec:
    """Validate a submit request and turn it into a JobSpec.

    Script directives (`#SBATCH`) apply first; fields set in the request override them.
    `can_enter`: whether `user` can enter a directory (asked as them on a shared server, so that
    nobody learns what lies where they may not look); the service layer passes it, since looking is
    I/O; None checks only that the paths are absolute. `max_nodes`: the most nodes this server's
    backend runs a job on, for a script's `--nodes`.

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
        from_condor, condor_warnings = condor_request(given.pop("condor"))
        warnings.extend(condor_warnings)
        given = {**from_condor, **given}
    command, script, script_args = _command(given)
    fields: dict[str, Any] = {}
    if script is not None:
        directives = sbatch.read_script(script)
        _check_directives(directives, given, max_nodes)
        warnings.extend(directives.warnings)
        fields.update(directives.fields)
        for group in _ALTERNATIVES:
            if any(key in given for key in group):
                for key in group:
                    fields.pop(key, None)
        if "gres" in given:
            fields.pop("gpus", None)  # else the script's --gpus would beat the request's gres in _gpus
    fields.update(given)
    if "gpus_per_node" in fields:
        if "gpus" in given:
            raise InvalidRequest("gpus_per_node", "given together with gpus", "give one: with --nodes, GPUs are per node")
        fields["gpus"] = fields.pop("gpus_per_node")
    nodes = _int_in(fields.get("nodes", 1), "nodes", 1, MAX_NODES)

    gpu_type, gpus = _gpus(fields)
    cpus = _int_in(fields.get("cpus", 1), "cpus", 1, MAX_CPUS)
    mem_mb = _mem(fields, cpus, gpus)
    gpu_mem_mb = _size_or_none(fields, "gpu_mem", "gpu_mem_mb")
    if gpu_mem_mb is not None and gpus == 0:
        raise InvalidRequest("gpu_mem", "is set but no GPUs were requested", "add --gpus N")
    time_limit_s = _time_limit(fields)
    nice = _int_in(fields.get("nice", 0), "nice", -MAX_NICE, MAX_NICE)
    env, inherit_env = _environment(fields, server_env)
    submit_dir = _directory(fields.get("submit_dir", default_workdir), "submit_dir", user, can_enter)
    workdir_text = fields.get("workdir", submit_dir)
    if not isinstance(workdir_text, str) or not workdir_text:
        raise InvalidRequest("workdir", "must be a directory path")
    workdir = _directory(os.path.join(submit_dir, workdir_text), "workdir", user, can_enter)
    stdout, stderr = _log_patterns(fields, log_dir)
    requirements = _requirements(fields.get("requirements"), gpus)
    user_log = _user_log(fields.get("user_log"), workdir)
    dependency = _dependency(fields.get("dependency"))
    return JobSpec(
        name=_name(fields.get("name"), command, fields.get("script_name") if script is not None else None),
        user=user,
        command=command,
        script=script,
        script_args=script_args,
        gpus=gpus,
        gpu_type=gpu_type,
        gpu_mem_mb=gpu_mem_mb,
        cpus=cpus,
        mem_mb=mem_mb,
        time_limit_s=time_limit_s,
        env=env,
        inherit_env=inherit_env,
        labels=_labels(fields.get("labels", {})),
        workdir=workdir,
        submit_dir=submit_dir,
        stdout=stdout,
        stderr=stderr,
        nice=nice,
        partition=_config_name(fields.get("partition"), "partition"),
        qos=_config_name(fields.get("qos"), "qos"),
        dependency=dependency.text if dependency is not None else None,
        parsed_dependency=dependency,
        kill_on_invalid_dep=_yes_no(fields.get("kill_on_invalid_dep", False), "kill_on_invalid_dep"),
        array=_array(fields.get("array")),
        nodes=nodes,
        preemptible=_yes_no(fields.get("preemptible", False), "preemptible"),
        warn_signal=_signal_text(fields.get("signal")),
        account=_config_name(fields.get("account"), "account"),
        umask=_umask(fields.get("umask")),
        requirements=requirements,
        user_log=user_log,
        warnings=tuple(warnings),
    )


# A directive's value, checked on its own: the request's own field of that name (or spelling) replaces it.
_DIRECTIVE_CHECKS: dict[str, Callable[[Any], object]] = {
    "nodes": lambda v: _int_in(v, "nodes", 1, MAX_NODES),
    "gres": lambda v: _gpus({"gres": v}), "gpus": lambda v: _gpus({"gpus": v}),
    "cpus": lambda v: _int_in(v, "cpus", 1, MAX_CPUS),
    "mem": lambda v: _mem({"mem": v}, 1, 1), "mem_per_cpu": lambda v: _mem({"mem_per_cpu": v}, 1, 1),
    "mem_per_gpu": lambda v: _mem({"mem_per_gpu": v}, 1, 1),
    "time": lambda v: _time_limit({"time": v}), "nice": lambda v: _int_in(v, "nice", -MAX_NICE, MAX_NICE),
    "partition": lambda v: _config_name(v, "partition"), "qos": lambda v: _config_name(v, "qos"),
    "dependency": lambda v: _dependency(v), "kill_on_invalid_dep": lambda v: _yes_no(v, "kill_on_invalid_dep"),
    "array": lambda v: _array(v), "signal": lambda v: _signal_text(v),
}
_OVERRIDDEN_BY = {key: group for group in _ALTERNATIVES for key in group} | {"gpus": ("gpus", "gres", "gpus_per_node")}


def _check_directives(directives: sbatch.Directives, given: Mapping[str, Any], max_nodes: int) -> None:
    """Raise every fault of a script's directives at once: the unsupported or unreadable ones, bad
    values, and more nodes than this server runs a job on.

    Raises:
        InvalidRequest: field `script`, each fault in `problems` with its line and fix.
    """
    problems = list(directives.problems)
    too_many = bad_field = ""
    for key, value in directives.fields.items():
        check = _DIRECTIVE_CHECKS.get(key)
        if check is None or any(k in given for k in _OVERRIDDEN_BY.get(key, (key,))):
            continue
        place = directives.places.get(key, f"#SBATCH {key}")
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
        raise several_problems("script", "the script's directives", problems)


UPDATE_FIELDS = frozenset({
    "name", "gpus", "gres", "gpu_type", "gpu_mem", "cpus", "mem", "mem_mb", "mem_per_cpu", "mem_per_gpu", "time",
    "time_limit_s", "nice", "partition", "qos", "preemptible",
})


def update_spec(spec: JobSpec, changes: Mapping[str, Any]) -> JobSpec:
    """A pending job's spec with some fields changed (`corral update`), checked as at submit.

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
    if {"gpus", "gres", "gpu_type"} & set(fields):
        gpu_fields = {"gpus": spec.gpus, **({"gpu_type": spec.gpu_type} if spec.gpu_type else {}), **fields}
        gpu_type, gpus = _gpus(gpu_fields)
    cpus = _int_in(fields["cpus"], "cpus", 1, MAX_CPUS) if "cpus" in fields else spec.cpus
    memory_keys = {"mem", "mem_mb", "mem_per_cpu", "mem_per_gpu"} & set(fields)
    mem_mb = _mem(fields, cpus, gpus) if memory_keys else spec.mem_mb
    time_keys = {"time", "time_limit_s"} & set(fields)
    gpu_mem_mb = _size_or_none(fields, "gpu_mem", "gpu_mem_mb") if "gpu_mem" in fields else spec.gpu_mem_mb
    if gpu_mem_mb is not None and gpus == 0:
        raise InvalidRequest("gpu_mem", "is set but no GPUs are requested", "add gpus, or clear gpu_mem")
    _requirements(spec.requirements, gpus)
    return replace(
        spec,
        name=_name(fields["name"], spec.command, None) if "name" in fields else spec.name,
        gpus=gpus, gpu_type=gpu_type,
        gpu_mem_mb=gpu_mem_mb,
        cpus=cpus, mem_mb=mem_mb,
        time_limit_s=_time_limit(fields) if time_keys else spec.time_limit_s,
        nice=_int_in(fields["nice"], "nice", -MAX_NICE, MAX_NICE) if "nice" in fields else spec.nice,
        partition=_config_name(fields["partition"], "partition") if "partition" in fields else spec.partition,
        qos=_config_name(fields["qos"], "qos") if "qos" in fields else spec.qos,
        preemptible=_yes_no(fields["preemptible"], "preemptible") if "preemptible" in fields else spec.preemptible,
        warnings=(),
    )


def _requirements(value: Any, gpus: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("requirements", "must be the text of a ClassAd expression", "e.g. (CUDACapability >= 7.0)")
    text = " ".join(value.split())
    if len(text) > 4000:
        raise InvalidRequest("requirements", f"is {len(text)} characters; corral takes up to 4000", "shorten it")
    expr = classad.parse(text)
    if classad.uses_gpu(expr) and gpus == 0:
        raise InvalidRequest(
            "requirements", f"{text} names GPU properties, but the job asks for no GPU", "add request_gpus (--gpus N)",
        )
    return text


def _user_log(value: Any, workdir: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("user_log", "must be a file path", "e.g. job.log")
    check_pattern(value, "user_log")
    return os.path.normpath(os.path.join(workdir, value))


def _command(given: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None, tuple[str, ...]]:
    command = given.get("command")
    script = given.get("script")
    if (command is None) == (script is None):
        raise InvalidRequest("command", "give exactly one of command (an argv list) or script (a batch script's text)")
    args = _str_list(given.get("script_args", []), "script_args")
    if script is not None:
        if not isinstance(script, str) or not script.strip():
            raise InvalidRequest("script", "must be the non-empty text of a batch script")
        if "\0" in script:
            raise InvalidRequest("script", "must be text, found a NUL byte")
        sbatch.check_shebang(script)
        return (), script, args
    argv = _str_list(command, "command")
    if not argv or not argv[0]:
        raise InvalidRequest("command", "must not be empty", 'give the program and its arguments, e.g. ["python", "train.py"]')
    if args:
        raise InvalidRequest("script_args", "only applies to a script", "append the arguments to command instead")
    return argv, None, ()


def _str_list(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise InvalidRequest(name, "must be a list of strings", 'e.g. ["python", "train.py", "--lr", "0.1"]')
    for item in value:
        if not isinstance(item, str):
            raise InvalidRequest(name, f"must be a list of strings, found {item!r}")
        if "\0" in item:
            raise InvalidRequest(name, "an argument contains a NUL byte")
    return tuple(value)


def _int_in(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool):
        raise InvalidRequest(name, f"must be a whole number, got {value!r}")
    if isinstance(value, str):
        value = value.strip()
        if not re.fullmatch(r"-?[0-9]{1,18}", value):
            raise InvalidRequest(name, f"must be a whole number, got {value!r:.60}")
        value = int(value)
    if not isinstance(value, int):
        raise InvalidRequest(name, f"must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise InvalidRequest(name, f"must be between {low} and {high}, got {value}")
    return value


def parse_gpu_request(text: str, name: str) -> tuple[str | None, int]:
    """`2` -> (None, 2); `a100:2` -> ("a100", 2); `gpu:a100:2` (gres) -> ("a100", 2)."""
    parts = [p.strip() for p in str(text).split(":")]
    if name == "gres":
        if parts[0] != "gpu":
            raise InvalidRequest("gres", f"only gpu resources are supported, got {text!r}", "write gpu:N or gpu:TYPE:N")
        parts = parts[1:] or ["1"]
    hint = "write gpu:N or gpu:TYPE:N" if name == "gres" else "write N or TYPE:N"
    if len(parts) == 1 and not is_number(parts[0]):
        if not parts[0][:1].isalpha():  # `-1`, `2.5`: a bad count, not a type name
            raise InvalidRequest(name, f"cannot read {text!r:.60} as a GPU request", hint)
        parts = [parts[0], "1"]  # `gpu:a100` and `--gpus=a100` mean one of that type
    if len(parts) > 2 or not is_number(parts[-1]):
        raise InvalidRequest(name, f"cannot read {text!r:.60} as a GPU request", hint)
    gpu_type = parts[0] if len(parts) == 2 else None
    return gpu_type, _int_in(int(parts[-1]), name, 0, MAX_GPUS)


def _gpus(fields: Mapping[str, Any]) -> tuple[str | None, int]:
    gpu_type: str | None = None
    gpus = 0
    if "gres" in fields:
        gres = str(fields["gres"])
        if "," in gres:
            raise InvalidRequest("gres", f"only one gpu resource is supported, got {gres!r}", "write gpu:N or gpu:TYPE:N")
        gpu_type, gpus = parse_gpu_request(gres, "gres")
    if "gpus" in fields:
        raw = fields["gpus"]
        if isinstance(raw, int):  # a bool too: _int_in refuses it
            gpus = _int_in(raw, "gpus", 0, MAX_GPUS)
            gpu_type = gpu_type if "gres" in fields else None
        else:
            typed, gpus = parse_gpu_request(str(raw), "gpus")
            gpu_type = typed or gpu_type
    if "gpu_type" in fields:
        gpu_type = str(fields["gpu_type"]).strip()
    if gpu_type is not None and not _GPU_TYPE.match(gpu_type):
        raise InvalidRequest("gpu_type", f"{gpu_type!r} is not a GPU type name", "e.g. A100, H100, a100-80g")
    if gpus == 0 and gpu_type is not None:
        raise InvalidRequest("gpu_type", "is set but no GPUs were requested", "add --gpus N")
    return gpu_type, gpus


def _size_or_none(fields: Mapping[str, Any], text_key: str, mb_key: str) -> int | None:
    if text_key in fields and mb_key in fields:
        raise InvalidRequest(text_key, f"give {text_key} or {mb_key}, not both")
    if mb_key in fields:
        return _int_in(fields[mb_key], mb_key, 0, MAX_MB)
    if text_key in fields:
        return _bounded_mb(parse_memory_mb(fields[text_key], field=text_key), text_key)
    return None


def _bounded_mb(mb: int, name: str) -> int:
    if mb > MAX_MB:
        raise InvalidRequest(name, f"{mb} MB is more than any machine has", "ask for at most 2047T")
    return mb


def _mem(fields: Mapping[str, Any], cpus: int, gpus: int) -> int:
    given = [k for k in ("mem", "mem_mb", "mem_per_cpu", "mem_per_gpu") if k in fields]
    if len(given) > 1:
        raise InvalidRequest(given[1], f"conflicts with {given[0]}", "give one way of asking for memory")
    if not given:
        return 0
    key = given[0]
    if key == "mem_mb":
        return _int_in(fields[key], key, 0, MAX_MB)
    mb = parse_memory_mb(fields[key], field=key)
    if key == "mem_per_cpu":
        mb *= cpus
    elif key == "mem_per_gpu":
        if gpus == 0:
            raise InvalidRequest("mem_per_gpu", "needs a GPU request", "use --mem instead, or add --gpus N")
        mb *= gpus
    return _bounded_mb(mb, key)


def _time_limit(fields: Mapping[str, Any]) -> int | None:
    if "time" in fields and "time_limit_s" in fields:
        raise InvalidRequest("time", "give time or time_limit_s, not both")
    seconds: int | None
    if "time_limit_s" in fields:
        seconds = _int_in(fields["time_limit_s"], "time_limit_s", 1, MAX_TIME_S)
    elif "time" in fields:
        seconds = parse_duration_s(fields["time"], field="time")
    else:
        return None
    if seconds is None:
        return None
    if seconds > MAX_TIME_S:
        raise InvalidRequest("time", f"must be at most 365 days, got {seconds} s", "use UNLIMITED for no limit")
    return seconds


def _str_map(value: Any, name: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise InvalidRequest(name, "must be an object of string keys and values", '{"KEY": "value"}')
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise InvalidRequest(name, f"entry {k!r} must map a string to a string")
        out[k] = str(v)
    return out


def _environment(fields: Mapping[str, Any], server_env: Mapping[str, str]) -> tuple[dict[str, str], bool]:
    """Resolve sbatch's --export against the submitter's environment (or the server's)."""
    explicit = _str_map(fields.get("env", {}), "env")
    snapshot = _str_map(fields["environment"], "environment") if "environment" in fields else None
    if snapshot is not None:
        # submitted from inside a Slurm allocation: its SLURM_* describe that job, not this one
        snapshot = {k: v for k, v in snapshot.items() if not k.startswith("SLURM_")}
    source = snapshot if snapshot is not None else server_env
    export = str(fields.get("export", "ALL")).strip()
    items = [item.strip() for item in export.split(",") if item.strip()]
    if not items:
        raise InvalidRequest("export", "must not be empty", "use ALL, NONE, or a list like ALL,VAR=value")
    head = items[0].upper()
    env: dict[str, str] = {}
    inherit = False
    if head == "ALL":
        if snapshot is not None:
            env.update(snapshot)
        else:
            inherit = True
        items = items[1:]
    elif head == "NONE":
        env.update({k: source[k] for k in MINIMAL_ENV_KEYS if k in source})
        items = items[1:]
    else:
        env.update({k: source[k] for k in MINIMAL_ENV_KEYS if k in source})
    for item in items:
        key, has_value, value = item.partition("=")
        _check_env_name(key, "export")
        if has_value:
            env[key] = value
        elif key in source:
            env[key] = source[key]
    for key in explicit:
        _check_env_name(key, "env")
    env.update(explicit)
    # Inherited names pass as they are (shells export functions as BASH_FUNC_name%%).
    size = 0
    for key, value in env.items():
        if "\0" in value or "=" in key or "\0" in key:
            raise InvalidRequest("env", f"variable {key!r} holds a NUL byte or its name an =")
        size += len(key) + len(value)
    if size > MAX_ENV_BYTES:
        raise InvalidRequest("env", f"is {size} bytes; the limit is {MAX_ENV_BYTES}", "pass large data in a file")
    return env, inherit


def _dependency(value: Any) -> Dependency | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InvalidRequest("dependency", f"must be text such as afterok:12, got {value!r}")
    return parse_dependency(value)


def parse_signal(text: str) -> tuple[int, int]:
    """sbatch's --signal=[B:]SIG[@SECONDS] -> (signal number, seconds before the time limit; 60 by default).

    Raises:
        InvalidRequest: an unknown signal or a bad time.
    """
    import signal as signals

    body = text.strip()
    if body[:2] in ("B:", "R:"):
        body = body[2:]
    name, _, when = body.partition("@")
    hint = "write e.g. USR1@90, TERM@120 or 10@60"
    if is_number(name):
        number = int(name)
    else:
        upper = name.upper()
        member = getattr(signals, upper if upper.startswith("SIG") else f"SIG{upper}", None)
        if not isinstance(member, signals.Signals):
            raise InvalidRequest("signal", f"unknown signal {name!r}", hint)
        number = int(member)
    if not 1 <= number <= 64 or number == signals.SIGKILL:
        raise InvalidRequest("signal", f"{name!r} cannot be sent as a warning", hint)
    if when and not is_number(when):
        raise InvalidRequest("signal", f"{when!r} is not a number of seconds", hint)
    seconds = int(when) if when else 60
    if seconds > 65535:
        raise InvalidRequest("signal", "the warning can come at most 65535 s before the limit", hint)
    return number, seconds


def _signal_text(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("signal", f"must be text such as USR1@90, got {value!r}")
    parse_signal(value)
    return value.strip()


def _array(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("array", f"must be text such as 0-99%4, got {value!r}")
    parse_array(value)
    return value.strip()


def _yes_no(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("yes", "true", "1", "no", "false", "0"):
        return value.strip().lower() in ("yes", "true", "1")
    raise InvalidRequest(field, f"must be yes or no, got {value!r}")


def _config_name(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _GPU_TYPE.match(value):
        raise InvalidRequest(field, f"{value!r} is not a {field} name", "use letters, digits, _ . -")
    return value


def _check_env_name(key: str, field: str) -> None:
    if not _ENV_KEY.match(key):
        raise InvalidRequest(field, f"{key!r} is not a variable name", "use letters, digits and _, not starting with a digit")


def _directory(value: Any, field: str, user: str, can_enter: Callable[[str], bool] | None) -> str:
    """A directory the user can enter; relative paths have already been joined to the submit directory.

    One answer for "does not exist" and "may not be reached": the second must not reveal the first.
    """
    if not isinstance(value, str) or not value or "\0" in value:
        raise InvalidRequest(field, "must be a directory path")
    if not os.path.isabs(value):
        raise InvalidRequest(field, f"must be an absolute path, got {value!r}")
    if can_enter is not None and not can_enter(value):  # the caller looks, as the user: core does no I/O
        raise InvalidRequest(field, f"{value} is not a directory {user} can enter",
                             "it does not exist, or it is not theirs to reach: create it, or submit from another directory")
    return os.path.normpath(value)


def _umask(value: Any) -> int | None:
    """A umask as an octal string ("0022", "027") or an int; None leaves the server's."""
    if value is None:
        return None
    if isinstance(value, str) and re.fullmatch(r"0?[0-7]{1,3}", value):
        return int(value, 8)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o777:
        return value
    raise InvalidRequest("umask", f"{value!r} is not a umask", 'give octal digits such as "0022" or "0077"')


def _log_patterns(fields: Mapping[str, Any], log_dir: str) -> tuple[str, str | None]:
    stdout = fields.get("stdout")
    stderr = fields.get("stderr")
    for name, value in (("stdout", stdout), ("stderr", stderr)):
        if value is not None:
            if not isinstance(value, str) or not value.strip():
                raise InvalidRequest(name, "must be a file path pattern", "e.g. logs/%x-%j.out")
            check_pattern(value, name)
    if stdout is None and stderr is None:
        return os.path.join(log_dir, "%j.out"), os.path.join(log_dir, "%j.err")
    if stdout is None:
        return os.path.join(log_dir, "%j.out"), stderr
    return stdout, stderr


def _labels(value: Any) -> dict[str, str]:
    labels = _str_map(value, "labels")
    for key, val in labels.items():
        if not _LABEL_KEY.match(key):
            raise InvalidRequest("labels", f"{key!r} is not a label key", "use up to 63 letters, digits, _ . - /")
        if len(val) > 256:
            raise InvalidRequest("labels", f"value of {key} is longer than 256 characters")
        check_text(val, f"labels.{key}")
    return labels


def _name(value: Any, command: tuple[str, ...], script_name: Any) -> str:
    if value is None:
        if not command:
            return os.path.basename(str(script_name or "script"))[:MAX_NAME] or "script"
        name = os.path.basename(command[0])
        if name in _INTERPRETERS:
            # `python train.py` is better named train.py; `sh -c "..."` stays sh
            args = list(command[1:])
            index = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
            if index is not None and (index == 0 or args[index - 1] != "-c"):
                name = os.path.basename(args[index])
        return name[:MAX_NAME] or "job"
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("name", "must be a non-empty string")
    if len(value) > MAX_NAME:
        raise InvalidRequest("name", f"is {len(value)} characters; the limit is {MAX_NAME}")
    return check_text(value, "name")
