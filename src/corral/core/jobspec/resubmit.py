"""Running a job again: its spec turned back into a submit request, with changes laid over it (pure).

The request goes through `build_spec` as any submit does, as the job's owner, whoever asks: so every check
(their directories, partitions, limits) applies anew, and a rerun never runs the owner's command and environment
as someone else (an admin, root). What belonged to the first run only is left out: its dependency (on jobs that
have ended), its --begin and --deadline (times now past), an admin's fixed priority.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core.jobspec.job_spec import REQUEST_FIELDS, JobSpec
from corral.errors import InvalidRequest

# Spellings of one setting: a change in any of them replaces the original's in all of them.
_SPELLINGS = (
    frozenset({"command", "script", "script_args", "options", "condor"}),
    frozenset({"gpus", "gres", "gpus_per_task", "gpus_per_node"}),
    frozenset({"cpus", "cpus_per_gpu"}),
    frozenset({"mem", "mem_mb", "mem_per_cpu", "mem_per_gpu"}),
    frozenset({"time", "time_limit_s"}),
    frozenset({"gpu_mem", "gpu_mem_mb"}),
    frozenset({"export", "environment"}),
)
# Set once the two merge: a change adds to the original's (and a null value removes one).
_MERGED = ("env", "labels")
CONFIRM_OWNER = "confirm_owner"
"""The field an admin sends to run another user's job again: the owner's name, as whom it will run."""


def check_owner_confirmed(ref: str, owner: str, caller: str, confirmed: object) -> None:
    """Refuse to run `owner`'s job `ref` again for `caller` unless `confirmed` names the owner: the rerun runs as
    them, and whoever asks for another's job must have said so. The owner's own rerun needs nothing.

    Raises:
        InvalidRequest: naming `confirm_owner`, and the owner to send in it.
    """
    hint = f'send "{CONFIRM_OWNER}": "{owner}" to run it again as {owner}'
    if confirmed is not None and not isinstance(confirmed, str):
        raise InvalidRequest(CONFIRM_OWNER, f"must be the job's owner's user name, got {confirmed!r:.40}", hint)
    if confirmed is None and caller == owner:
        return
    if confirmed is None:
        raise InvalidRequest(CONFIRM_OWNER, f"job {ref} is {owner}'s: it runs again as {owner} (their account, limits "
                             f"and files), not as you ({caller})", hint)
    if confirmed != owner:
        raise InvalidRequest(CONFIRM_OWNER, f"job {ref} is {owner}'s, not {confirmed[:64]!r}'s; it runs again as "
                             f"{owner}", hint)


def request_of(spec: JobSpec, *, task_id: int | None = None) -> dict[str, Any]:
    """The submit request that runs `spec` again, as its owner; `task_id`: a task of an array, run again alone
    (as an array of that one task, so it sees the same SLURM_ARRAY_TASK_ID).

    Raises:
        InvalidRequest: an interactive job (srun's or salloc's), which has no batch to run again.
    """
    if spec.interactive is not None:
        raise InvalidRequest("job_id", "is an interactive job (srun or salloc); it has no batch to run again",
                             "run srun or salloc again")
    request: dict[str, Any] = {"name": spec.name}
    if spec.script is not None:
        request["script"] = spec.script
        request["script_args"] = list(spec.script_args)
    else:
        request["command"] = list(spec.command)
    if spec.gpus_per_task is not None:
        request["gpus_per_task"] = spec.gpus_per_task
    else:
        request["gpus"] = spec.gpus
    request["cpus"] = spec.cpus_per_task
    request["mem_mb"] = spec.mem_mb
    request["nodes"] = spec.nodes
    request["ntasks"] = spec.ntasks
    _put(request, "ntasks_per_node", spec.ntasks_per_node)
    _put(request, "gpu_type", spec.gpu_type)
    _put(request, "gpu_mem_mb", spec.gpu_mem_mb)
    _put(request, "time_limit_s", spec.time_limit_s)
    request["env"] = dict(spec.env)
    # inherited: the server's environment under the explicit variables, as the first submit had it;
    # otherwise the variables it had are all there is (NONE adds the few a shell needs)
    request["export"] = "ALL" if spec.inherit_env else "NONE"
    request["labels"] = dict(spec.labels)
    request["workdir"] = spec.workdir
    request["submit_dir"] = spec.submit_dir
    request["stdout"] = spec.stdout
    _put(request, "stderr", spec.stderr)
    _put(request, "account", spec.account)
    _put(request, "mail_user", spec.mail_user)
    if spec.nice:
        request["nice"] = spec.nice
    _put(request, "partition", spec.partition or None)
    _put(request, "qos", spec.qos or None)
    if task_id is not None:
        request["array"] = str(task_id)
    else:
        _put(request, "array", spec.array)
    if spec.preemptible:
        request["preemptible"] = True
    _put(request, "requeue", spec.requeue)
    _put(request, "signal", spec.warn_signal)
    if spec.umask is not None:
        request["umask"] = f"{spec.umask:04o}"
    _put(request, "requirements", spec.requirements)
    _put(request, "user_log", spec.user_log)
    request["open_mode"] = spec.open_mode
    _put(request, "comment", spec.comment)
    if spec.exclusive:
        request["exclusive"] = True
    _put(request, "constraint", spec.features)
    _put(request, "nodelist", ",".join(spec.nodelist) or None)
    _put(request, "exclude", ",".join(spec.exclude) or None)
    _put(request, "mail_type", ",".join(spec.mail_type) or None)
    if spec.time_min_s is not None:
        request["time_min"] = _minutes(spec.time_min_s)
    container = spec.container
    if container is not None:
        request["image"] = container.image
        _put(request, "container_mounts", ",".join(m.text() for m in container.mounts) or None)
        _put(request, "container_workdir", container.workdir)
        _put(request, "container_env", ",".join(container.env) or None)
        request["container_mount_home"] = container.mount_home
        if container.remap_root:
            request["container_remap_root"] = True
    return request


def _put(request: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        request[key] = value


def _minutes(seconds: int) -> str:
    """Seconds as Slurm's D-HH:MM:SS."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"


def with_changes(request: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """The request with `changes` laid over it: a changed setting replaces every spelling of it, `env` and
    `labels` are merged (a null value removes one), and `None` elsewhere removes a field.

    Raises:
        InvalidRequest: a change that is not a request field, or env or labels that are not objects.
    """
    merged = dict(request)
    for key, value in changes.items():
        if key not in REQUEST_FIELDS:
            raise InvalidRequest(key, "unknown field", f"known fields: {', '.join(sorted(REQUEST_FIELDS))}")
        for spellings in _SPELLINGS:
            if key in spellings:
                for other in spellings:
                    merged.pop(other, None)
        if key in _MERGED and value is not None:
            if not isinstance(value, Mapping):
                raise InvalidRequest(key, "must be an object of names to values", f'write {{"{key}": {{"NAME": "value"}}}}')
            combined = {**dict(merged.get(key) or {}), **value}
            merged[key] = {k: v for k, v in combined.items() if v is not None}
        elif value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` pairs as changes: `env.NAME=value` and `label.NAME=value` set one variable or label.

    Raises:
        InvalidRequest: a pair without `=`, or a key that is not a request field.
    """
    changes: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidRequest("set", f"{pair!r:.60} is not KEY=VALUE", "write --set time=2h or --set env.LR=3e-4")
        head, dot, name = key.partition(".")
        if dot and head in ("env", "label", "labels"):
            target = "env" if head == "env" else "labels"
            changes.setdefault(target, {})[name] = value
            continue
        key = key.replace("-", "_")
        if key not in REQUEST_FIELDS:
            raise InvalidRequest("set", f"{key!r:.60} is not a job field",
                                 f"known fields: {', '.join(sorted(REQUEST_FIELDS))}")
        changes[key] = value
    return changes
