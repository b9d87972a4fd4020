"""HTCondor submit description files, read into a corral request.

`condor_request(text, max_tasks=...)` turns the text of a submit file into the request fields
`corral.core.jobspec.spec.build_spec` takes, and warnings for what it ignores, so a job
written for HTCondor runs on corral as it would there. It reads the text only:
no files, no environment, no clock. Keys are case-insensitive; `#` starts a
comment line (only at the start of a line, as in HTCondor); a `\\` at the end of
a line continues it; `key @=END ... @END` writes a value over several lines.
`htcondor_submit_file` reads the file's statements and its queue, `htcondor_macros`
expands $(...), `htcondor_commands` reads each command's value, and `htcondor_wrapper`
writes the shell script that sets what is known only at run time.

Supported, and where each goes:

    executable            command[0]; a relative path is relative to the submit directory, as in
                          HTCondor, also when initialdir is set (a relative initialdir only)
    arguments             command[1:]; the old syntax (split on spaces, \\" for a quote) and the new one
                          (all in double quotes; '...' groups, '' is a ' inside it, "" is a ")
    environment           env; the new syntax ("A=1 B='x y'") and the old one (A=1;B=2)
    getenv                export: True -> ALL; False or absent (HTCondor's default) -> NONE;
                          a list of names -> NONE,NAME,...
    request_gpus          gpus
    request_cpus          cpus
    request_memory        mem_mb; a bare number is MB, as in HTCondor; K, M, G, T (with or without B)
    gpus_minimum_memory   gpu_mem_mb, with the same units
    allowed_execute_duration, allowed_job_duration
                          time_limit_s (seconds); corral kills the job where HTCondor puts it on hold
    output, error         stdout, stderr; when only one is given the other goes to /dev/null, as in
                          HTCondor; when neither is, corral keeps its own log files (HTCondor discards both)
    input                 the job's stdin, through a shell wrapper (`< file`)
    initialdir            workdir (also spelled initial_dir)
    batch_name, +JobBatchName
                          name; without one, the executable's file name when the command is wrapped
    universe              vanilla, or absent
    queue, queue N        one job, or N > 1 jobs as the array 0-(N-1)
    queue [N] V in (...), queue [N] V1, V2 from (...), with an optional [start:stop:step] slice
                          an array with a task per item (times N); $(V), $(Item), $(Step), $(ItemIndex), $(Row)
                          are set per task by a `case` on $CORRAL_ARRAY_TASK_ID in the wrapper. `from FILE` and
                          `matching GLOB` need files: `resolve_queue`, which the CLI calls, lists them inline
    requirements, require_gpus, gpus_minimum_capability, gpus_maximum_capability
                          requirements: one ClassAd expression (corral.core.dialects.classad) over each GPU and the node
    log                   user_log: HTCondor's job event log, $(Cluster) as %A (see corral.executor.condor_log)

Macros: `$(Cluster)`/`$(ClusterId)` is the job's id (the array's id for an
array) and `$(Process)`/`$(ProcId)`/`$(Step)` the task number (0 for a single
job). In `output` and `error` they become corral's `%A`/`%a` (`%j` for a
single job's cluster). In `arguments`, `environment` and `input` they become the
job's numbers at run time: the command turns into `/bin/sh -c SCRIPT`, where SCRIPT
quotes every literal piece with `shlex.quote` and reads only
`$CORRAL_ARRAY_TASK_ID` and `$CORRAL_ARRAY_JOB_ID` (`$CORRAL_JOB_ID` for a
single job). Without such macros, and without `input`, the command is plain
`[executable, *arguments]`. `$(Row)` and `$(ItemIndex)` are 0, `$(DOLLAR)` is a
`$`, `$(name)` and `$(name:default)` expand the file's own definitions as of the
queue statement, and `name = $(name) more` appends to the earlier value. A macro
the file does not define, `$$(...)` (from the machine's ClassAd) and macro
functions (`$ENV()`, `$RANDOM_CHOICE()`, `$Fn()`, ...) raise InvalidRequest.

Warned and ignored, because the job runs the same without them: request_disk,
log_xml, file transfer settings that
corral needs no counterpart for (should_transfer_files, when_to_transfer_output,
transfer_executable, transfer_output_files), e-mail (notification, notify_user,
email_attributes), scheduling hints (priority, nice_user, rank,
accounting_group, accounting_group_user, concurrency_limits, max_idle,
max_materialize), stream_output, stream_error, description, and the rest in
`_IGNORED`; custom job attributes (`+ProjectName`, `MY.x`); keys HTCondor does
not know and nothing refers to (HTCondor warns about those too); commands after
the queue statement, which apply to no job.

Refused with InvalidRequest naming the command, because the job would not run
as it would on HTCondor: a universe other than vanilla, `queue ... from FILE` and
`queue ... matching` not resolved first, `queue 0`, a second queue statement,
a requirements expression corral cannot evaluate (the part named), gpus_minimum_runtime,
request_ of other resources,
transfer_input_files, transfer_output_remaps, output_destination, job policy
expressions (on_exit_*, periodic_*), retries (max_retries, retry_until,
success_exit_code), hold, deferral and cron times, containers (docker_image,
container_image, +SingularityImage), machine_count, `include` and `if`
statements, $(Cluster) or $(Process) where one value must serve every task
(executable, initialdir, the resources, the name, $(Process) in log), and a relative executable
with an initialdir whose place corral cannot tell from the text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from corral.core.dialects import htcondor_commands
from corral.core.dialects.htcondor_macros import PLACEHOLDER, Macros
from corral.core.dialects.htcondor_submit_file import SubmitFile, read_submit_file
from corral.core.dialects.htcondor_wrapper import item_redirects, item_table, wrapper_script
from corral.errors import InvalidRequest

_NO_FILE_TRANSFER = "corral runs the job in initialdir on a shared file system: nothing is transferred"
_NO_EMAIL = "corral sends no e-mail"
_OWN_SCHEDULING = "corral orders and places jobs by its own fair-share policy"
_IGNORED: dict[str, str] = {
    "request_disk": "corral does not reserve disk; the job uses the disk of the directory it runs in",
    "log_xml": "corral writes no HTCondor job event log",
    "should_transfer_files": _NO_FILE_TRANSFER,
    "when_to_transfer_output": _NO_FILE_TRANSFER,
    "transfer_executable": _NO_FILE_TRANSFER,
    "transfer_output_files": "the job's files stay where it writes them, in initialdir",
    "encrypt_input_files": _NO_FILE_TRANSFER,
    "encrypt_output_files": _NO_FILE_TRANSFER,
    "notification": _NO_EMAIL,
    "notify_user": _NO_EMAIL,
    "email_attributes": _NO_EMAIL,
    "priority": _OWN_SCHEDULING,
    "nice_user": _OWN_SCHEDULING,
    "rank": _OWN_SCHEDULING,
    "accounting_group": _OWN_SCHEDULING,
    "accounting_group_user": _OWN_SCHEDULING,
    "concurrency_limits": _OWN_SCHEDULING,
    "max_idle": _OWN_SCHEDULING,
    "max_materialize": _OWN_SCHEDULING,
    "stream_output": "corral writes output straight to its file",
    "stream_error": "corral writes output straight to its file",
    "description": "corral shows the job's name instead",
    "job_lease_duration": "corral has no separate submit machine to lose touch with",
    "leave_in_queue": "corral keeps finished jobs in its history",
    "copy_to_spool": _NO_FILE_TRANSFER,
    "coresize": "corral leaves core dump limits as they are",
    "image_size": "corral does not use HTCondor's image size estimate",
    "kill_sig": "corral stops jobs with SIGTERM, then SIGKILL",
    "want_graceful_removal": "corral stops jobs with SIGTERM, then SIGKILL",
    "job_max_vacate_time": "corral stops jobs with SIGTERM, then SIGKILL",
    "submit_event_notes": "corral writes no HTCondor job event log",
}
_NO_CLASSADS = (
    "corral cannot evaluate ClassAd expressions against machines",
    "remove it: corral runs the job on any node with the GPUs, CPUs and memory it asks for",
)
_NO_POLICY = ("corral cannot evaluate job policy expressions", "remove it, or handle the condition in the job")
_NO_RETRY = ("corral does not rerun a job by itself", "remove it, or retry inside the job")
_NO_DELAY = ("corral starts a job as soon as it can run", "remove it, or submit the job later")
_NO_CONTAINER = ("corral runs jobs directly, not in containers", "run the container from the executable")
_REFUSED: dict[str, tuple[str, str]] = {
    "gpus_minimum_runtime": _NO_CLASSADS,
    "transfer_input_files": (
        "corral copies no input files into a scratch directory",
        "put the inputs in initialdir (the job's working directory) and refer to them from there",
    ),
    "transfer_output_remaps": ("corral does not move output files", "write them where they belong from the job"),
    "output_destination": ("corral does not move output files", "write them where they belong from the job"),
    "on_exit_remove": _NO_POLICY,
    "on_exit_hold": _NO_POLICY,
    "periodic_remove": _NO_POLICY,
    "periodic_hold": _NO_POLICY,
    "periodic_release": _NO_POLICY,
    "periodic_vacate": _NO_POLICY,
    "max_retries": _NO_RETRY,
    "retry_until": _NO_RETRY,
    "success_exit_code": _NO_RETRY,
    "hold": ("corral cannot submit a job on hold", "remove it, and submit when the job should run"),
    "deferral_time": _NO_DELAY,
    "deferral_window": _NO_DELAY,
    "deferral_prep_time": _NO_DELAY,
    "docker_image": _NO_CONTAINER,
    "container_image": _NO_CONTAINER,
    "+singularityimage": _NO_CONTAINER,
    "machine_count": ("corral runs a job on one machine", "remove it, or set it to 1"),
}
_READ = frozenset({
    "executable", "arguments", "environment", "getenv", "request_gpus", "request_cpus", "request_memory",
    "gpus_minimum_memory", "allowed_execute_duration", "allowed_job_duration", "output", "error", "input",
    "initialdir", "initial_dir", "universe", "batch_name", "+jobbatchname", "log", "requirements", "require_gpus",
    "gpus_minimum_capability", "gpus_maximum_capability",
})
_RESOURCES = frozenset({"request_gpus", "request_cpus", "request_memory", "request_disk"})


def condor_request(text: str, *, max_tasks: int) -> tuple[dict[str, Any], list[str]]:
    """Read an HTCondor submit description file into request fields for `build_spec`.

    Args:
        text: the submit file's text.
        max_tasks: the most jobs an array holds (`corral.core.jobspec.arrays.MAX_TASKS`), checked before any
            queue statement's items are expanded.

    Returns:
        (request, warnings): `request` holds only fields in `corral.core.jobspec.spec.REQUEST_FIELDS`
        (`command`, and where the file asks for them `name`, `gpus`, `cpus`, `mem_mb`,
        `gpu_mem_mb`, `time_limit_s`, `stdout`, `stderr`, `workdir`, `env`, `export`, `array`);
        `warnings` says, one line each, what the file asks for that corral ignores.

    Raises:
        InvalidRequest: naming the command (or `line N`) that cannot be run as HTCondor would.
    """
    submit = read_submit_file(text, max_tasks=max_tasks)
    values = submit.values
    count = submit.count
    array = count > 1
    macros = Macros(values, array=array, items=submit.items)
    for key in values:
        _refuse_unsupported(key, submit.spelled[key])
    universe = macros.expand("universe").strip().lower() if "universe" in values else "vanilla"
    if universe not in ("vanilla", ""):
        raise InvalidRequest(
            "universe", f"the {universe} universe is not supported",
            "corral runs vanilla universe jobs: set universe = vanilla",
        )

    request: dict[str, Any] = {}
    if array:
        request["array"] = f"0-{count - 1}"
    initialdir = htcondor_commands.initialdir(values, macros)
    if initialdir is not None:
        request["workdir"] = initialdir
    executable = htcondor_commands.executable(macros, initialdir)
    arguments = (
        htcondor_commands.split_arguments(macros.expand("arguments", run_time=True)) if "arguments" in values else []
    )
    static_env, run_time_env = htcondor_commands.environment(macros) if "environment" in values else ({}, {})
    if static_env:
        request["env"] = static_env
    request["export"] = htcondor_commands.export(macros) if "getenv" in values else "NONE"
    stdin = macros.expand("input", run_time=True).strip() if "input" in values else ""

    name = htcondor_commands.batch_name(values, macros)
    words = [executable, *arguments]
    redirects = item_redirects(values, macros)
    if run_time_env or stdin or redirects or any(PLACEHOLDER.search(word) for word in arguments):
        script = wrapper_script(words, run_time_env, stdin, redirects, array=array)
        request["command"] = ["/bin/sh", "-c", item_table(submit.items, script)]
        name = name or executable.rstrip("/").rsplit("/", 1)[-1]
    else:
        request["command"] = words
    if name:
        request["name"] = name

    request.update(htcondor_commands.resources(values, macros))
    if not redirects:
        request.update(htcondor_commands.log_files(values, macros, array=array))
    requirements = htcondor_commands.requirements(values, macros)
    if requirements:
        request["requirements"] = requirements
    user_log = macros.expand("log", run_time=True, cluster_only=True).strip() if "log" in values else ""
    if user_log:
        request["user_log"] = htcondor_commands.log_pattern(user_log, array=True)

    warnings = [*_ignored(submit), *submit.warnings]
    return request, warnings


def _refuse_unsupported(key: str, written: str) -> None:
    refused = _REFUSED.get(key)
    if refused is None and key.startswith("request_") and key not in _RESOURCES:
        refused = ("corral schedules GPUs, CPUs and memory only", "remove it")
    if refused is None and key.startswith("cron_"):
        refused = _NO_DELAY
    if refused is not None:
        raise InvalidRequest(written, f"is not supported: {refused[0]}", refused[1])


def _ignored(submit: SubmitFile) -> Iterator[str]:
    for key, written in submit.spelled.items():
        if key in _IGNORED:
            yield f"{written}: ignored; {_IGNORED[key]}"
        elif key.startswith("+") and key != "+jobbatchname":
            yield f"{written}: ignored; corral keeps no job ClassAd for custom attributes"
        elif key not in _READ and key not in submit.referenced:
            yield f"{written}: not a submit command corral knows, and nothing refers to it; ignored (a typo?)"
