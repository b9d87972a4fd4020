"""HTCondor submit description files, read into a corral request.

`condor_request(text)` turns the text of a submit file into the request fields
`corral.core.spec.build_spec` takes, and warnings for what it ignores, so a job
written for HTCondor runs on corral as it would there. It reads the text only:
no files, no environment, no clock. Keys are case-insensitive; `#` starts a
comment line (only at the start of a line, as in HTCondor); a `\\` at the end of
a line continues it; `key @=END ... @END` writes a value over several lines.

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
log and log_xml (corral writes no job event log), file transfer settings that
corral needs no counterpart for (should_transfer_files, when_to_transfer_output,
transfer_executable, transfer_output_files), e-mail (notification, notify_user,
email_attributes), scheduling hints (priority, nice_user, rank,
accounting_group, accounting_group_user, concurrency_limits, max_idle,
max_materialize), stream_output, stream_error, description, and the rest in
`_IGNORED`; custom job attributes (`+ProjectName`, `MY.x`); keys HTCondor does
not know and nothing refers to (HTCondor warns about those too); commands after
the queue statement, which apply to no job.

Refused with InvalidRequest naming the command, because the job would not run
as it would on HTCondor: a universe other than vanilla, `queue ... in`,
`queue ... from`, `queue ... matching`, `queue 0`, a second queue statement,
requirements and GPU capability constraints, request_ of other resources,
transfer_input_files, transfer_output_remaps, output_destination, job policy
expressions (on_exit_*, periodic_*), retries (max_retries, retry_until,
success_exit_code), hold, deferral and cron times, containers (docker_image,
container_image, +SingularityImage), machine_count, `include` and `if`
statements, $(Cluster) or $(Process) where one value must serve every task
(executable, initialdir, the resources, the name), and a relative executable
with an initialdir whose place corral cannot tell from the text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from corral.core.arrays import MAX_TASKS
from corral.core.units import is_number, parse_memory_mb
from corral.errors import InvalidRequest

# Stand-ins for $(Process) and $(Cluster) between macro expansion and the place each value goes:
# private-use characters, refused in the file itself, that no quoting rule treats specially.
_TASK = "\ue000"
_CLUSTER = "\ue001"
_PLACEHOLDER = re.compile(f"([{_TASK}{_CLUSTER}])")

_KEY = r"[+]?[A-Za-z_][A-Za-z0-9_.]*"
_ASSIGNMENT = re.compile(rf"^({_KEY})\s*=(.*)$", re.DOTALL)
_MULTILINE = re.compile(rf"^({_KEY})\s*@=\s*(\S*)\s*$")
_QUEUE = re.compile(r"^queue(?![A-Za-z0-9_.])\s*(.*)$", re.IGNORECASE | re.DOTALL)
_MACRO = re.compile(r"\$(\$?)([A-Za-z_][A-Za-z0-9_]*)?\(([^()]*)\)")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SPACE = " \t\r\n"
_STATEMENTS = ("include", "if", "elif", "else", "endif", "error", "warning")

_NO_FILE_TRANSFER = "corral runs the job in initialdir on a shared file system: nothing is transferred"
_NO_EMAIL = "corral sends no e-mail"
_OWN_SCHEDULING = "corral orders and places jobs by its own fair-share policy"
_IGNORED: dict[str, str] = {
    "request_disk": "corral does not reserve disk; the job uses the disk of the directory it runs in",
    "log": "corral writes no HTCondor job event log; follow the job with corral's own status and history",
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
    "requirements": _NO_CLASSADS,
    "require_gpus": _NO_CLASSADS,
    "gpus_minimum_capability": _NO_CLASSADS,
    "gpus_maximum_capability": _NO_CLASSADS,
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
    "initialdir", "initial_dir", "universe", "batch_name", "+jobbatchname",
})
_RESOURCES = frozenset({"request_gpus", "request_cpus", "request_memory", "request_disk"})
_RUN_TIME_KEYS = "arguments, environment, input, output and error"


def condor_request(text: str) -> tuple[dict[str, Any], list[str]]:
    """Read an HTCondor submit description file into request fields for `build_spec`.

    Args:
        text: the submit file's text.

    Returns:
        (request, warnings): `request` holds only fields in `corral.core.spec.REQUEST_FIELDS`
        (`command`, and where the file asks for them `name`, `gpus`, `cpus`, `mem_mb`,
        `gpu_mem_mb`, `time_limit_s`, `stdout`, `stderr`, `workdir`, `env`, `export`, `array`);
        `warnings` says, one line each, what the file asks for that corral ignores.

    Raises:
        InvalidRequest: naming the command (or `line N`) that cannot be run as HTCondor would.
    """
    submit = _read(text)
    values = submit.values
    count = submit.count
    array = count > 1
    macros = _Macros(values, array=array)
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
    initialdir = _initialdir(values, macros)
    if initialdir is not None:
        request["workdir"] = initialdir
    executable = _executable(macros, initialdir)
    arguments = _split_arguments(macros.expand("arguments", run_time=True)) if "arguments" in values else []
    static_env, run_time_env = _environment(macros) if "environment" in values else ({}, {})
    if static_env:
        request["env"] = static_env
    request["export"] = _export(macros) if "getenv" in values else "NONE"
    stdin = macros.expand("input", run_time=True).strip() if "input" in values else ""

    name = _batch_name(values, macros)
    words = [executable, *arguments]
    if run_time_env or stdin or any(_PLACEHOLDER.search(word) for word in arguments):
        request["command"] = ["/bin/sh", "-c", _wrapper(words, run_time_env, stdin, array=array)]
        name = name or executable.rstrip("/").rsplit("/", 1)[-1]
    else:
        request["command"] = words
    if name:
        request["name"] = name

    request.update(_resources(values, macros))
    request.update(_log_files(values, macros, array=array))

    warnings = [*_ignored(submit), *submit.warnings]
    return request, warnings


# -- reading the file ----------------------------------------------------------------------------


@dataclass
class _SubmitFile:
    values: dict[str, str]
    """Lower-case key -> raw value, as of the queue statement; `+x` for custom attributes."""
    spelled: dict[str, str]
    """Lower-case key -> the key as the file writes it, for messages."""
    count: int
    referenced: set[str]
    """Names that some $(...) in the file refers to."""
    warnings: list[str] = field(default_factory=list)


def _read(text: str) -> _SubmitFile:
    if "\0" in text:
        raise InvalidRequest("submit file", "contains a NUL byte")
    if _TASK in text or _CLUSTER in text:
        raise InvalidRequest("submit file", "contains the private-use characters U+E000 or U+E001")
    values: dict[str, str] = {}
    spelled: dict[str, str] = {}
    count: int | None = None
    referenced: set[str] = set()
    warnings: list[str] = []
    for lineno, line in _statements(text):
        referenced.update(_macro_names(line))
        assignment = _ASSIGNMENT.match(line)
        if assignment:
            written, value = assignment.group(1), assignment.group(2).strip()
            key = _canonical(written)
            if count is not None:
                warnings.append(f"line {lineno}: {written} comes after the queue statement, so no job has it; ignored")
                continue
            values[key] = _append_to_earlier(key, value, values.get(key))
            spelled[key] = written
            continue
        queue = _QUEUE.match(line)
        if queue:
            if count is not None:
                raise InvalidRequest(
                    "queue", f"line {lineno}: a second queue statement; corral takes one job or one array per file",
                    "split the file, one queue statement in each",
                )
            count = _queue_count(queue.group(1), _Macros(values, array=True), lineno)
            continue
        word = line.split(None, 1)[0].lower()
        if word in _STATEMENTS:
            raise InvalidRequest(
                word, f"line {lineno}: the {word} statement is not supported",
                "write out what it means",
            )
        raise InvalidRequest(f"line {lineno}", f"cannot read {line!r}", "write key = value, or queue [N]")
    if count is None:
        raise InvalidRequest(
            "queue", "the file has no queue statement, so it asks for no job",
            "end it with queue or queue N",
        )
    if "executable" not in values:
        raise InvalidRequest("executable", "is missing", "say which program to run: executable = /path/to/program")
    return _SubmitFile(values, spelled, count, referenced, warnings)


def _statements(text: str) -> Iterator[tuple[int, str]]:
    """(line number, statement): continuations joined, comments and blank lines skipped.

    As in HTCondor, a comment line never continues, and one inside a continued line is left out.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        while line.endswith("\\"):
            line = line[:-1]
            while i < len(lines) and lines[i].lstrip().startswith("#"):
                i += 1
            if i < len(lines):
                line += lines[i].strip()
                i += 1
        multiline = _MULTILINE.match(line)
        if multiline:
            key, tag = multiline.group(1), multiline.group(2)
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != f"@{tag}":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise InvalidRequest(
                    key, f"line {lineno}: the value begun with @={tag} never ends",
                    f"end it with @{tag}",
                )
            i += 1
            line = f"{key} = " + "\n".join(body)
        yield lineno, line


def _macro_names(text: str) -> Iterator[str]:
    for match in _MACRO.finditer(text):
        if not match.group(1) and not match.group(2):
            yield match.group(3).partition(":")[0].strip().lower()


def _canonical(key: str) -> str:
    key = key.lower()
    return "+" + key[3:] if key.startswith("my.") else key


def _append_to_earlier(key: str, value: str, earlier: str | None) -> str:
    """`args = $(args) --more` refers to the earlier value, as in HTCondor's configuration language."""
    if earlier is None or key.startswith("+"):
        return value
    own = re.compile(r"\$\(\s*" + re.escape(key) + r"\s*\)", re.IGNORECASE)
    return own.sub(lambda _: earlier, value)


def _queue_count(text: str, macros: _Macros, lineno: int) -> int:
    expanded = macros.expand_text(text, "queue").strip()
    if not expanded:
        return 1
    if is_number(expanded):
        count = int(expanded)
        if count < 1:
            raise InvalidRequest("queue", f"line {lineno}: queue {count} asks for no job", "write queue N with N >= 1")
        if count > MAX_TASKS:
            raise InvalidRequest("queue", f"line {lineno}: {count} jobs is more than the {MAX_TASKS} an array holds")
        return count
    words = expanded.lower().split()
    form = next((w for w in words if w in ("in", "from", "matching")), None)
    if form is not None:
        raise InvalidRequest(
            "queue", f"line {lineno}: queue ... {form} is not supported",
            "use queue N and $(Process) to tell the jobs apart, or submit one file per item",
        )
    raise InvalidRequest("queue", f"line {lineno}: cannot read queue {expanded!r}", "write queue, or queue N")


# -- macros --------------------------------------------------------------------------------------


class _Macros:
    """Expands $(...) in values: the file's own definitions, and $(Cluster)/$(Process) as stand-ins."""

    def __init__(self, values: dict[str, str], *, array: bool) -> None:
        self.values = values
        self.array = array

    def expand(self, key: str, *, run_time: bool = False) -> str:
        """The value of submit command `key`; `run_time` allows $(Cluster) and $(Process) in it."""
        return self.expand_text(self.values[key], key, run_time=run_time, stack=(key,))

    def expand_text(self, text: str, key: str, *, run_time: bool = False, stack: tuple[str, ...] = ()) -> str:
        def replace(match: re.Match[str]) -> str:
            whole = match.group(0)
            if match.group(1):
                raise InvalidRequest(
                    key, f"{whole} takes its value from the machine the job lands on; corral has no machine ClassAds",
                    "write the value out",
                )
            if match.group(2):
                raise InvalidRequest(
                    key, f"the macro function ${match.group(2)}() in {whole} is not supported",
                    "write out its value",
                )
            name, has_default, default = match.group(3).partition(":")
            name = name.strip().lower()
            if name in ("cluster", "clusterid"):
                return self._per_job(_CLUSTER, whole, key, run_time)
            if name in ("process", "procid", "step"):
                return self._per_job(_TASK, whole, key, run_time)
            if name in ("row", "itemindex"):
                return "0"
            if name == "dollar":
                return "$"
            if name in self.values and not name.startswith("+"):
                if name in stack:
                    raise InvalidRequest(key, f"{whole} refers to itself", "define it without referring back to it")
                return self.expand_text(self.values[name], key, run_time=run_time, stack=(*stack, name))
            if has_default:
                return default
            raise InvalidRequest(
                key, f"unknown macro {whole}",
                "define it in the file (name = value), or write out its value",
            )

        return _MACRO.sub(replace, text)

    def _per_job(self, placeholder: str, whole: str, key: str, run_time: bool) -> str:
        if placeholder == _TASK and not self.array:
            return "0"  # a single job is process 0 of its cluster
        if not run_time:
            raise InvalidRequest(
                key, f"{whole} differs from job to job, and corral takes one {key} for all of them",
                f"use it only in {_RUN_TIME_KEYS}",
            )
        return placeholder


# -- commands ------------------------------------------------------------------------------------


def _refuse_unsupported(key: str, written: str) -> None:
    refused = _REFUSED.get(key)
    if refused is None and key.startswith("request_") and key not in _RESOURCES:
        refused = ("corral schedules GPUs, CPUs and memory only", "remove it")
    if refused is None and key.startswith("cron_"):
        refused = _NO_DELAY
    if refused is not None:
        raise InvalidRequest(written, f"is not supported: {refused[0]}", refused[1])


def _initialdir(values: dict[str, str], macros: _Macros) -> str | None:
    key = "initialdir" if "initialdir" in values else "initial_dir" if "initial_dir" in values else None
    if key is None:
        return None
    return macros.expand(key).strip() or None


def _executable(macros: _Macros, initialdir: str | None) -> str:
    """The path to run from the job's working directory (initialdir)."""
    path = macros.expand("executable").strip()
    if not path:
        raise InvalidRequest("executable", "is empty", "say which program to run: executable = /path/to/program")
    if path.startswith("/"):
        return path
    # HTCondor takes a relative executable from the submit directory even when initialdir is set.
    if initialdir is None:
        return path if "/" in path else "./" + path  # `run.sh` is the file here, never a search of PATH
    parts = [p for p in initialdir.split("/") if p not in ("", ".")]
    if initialdir.startswith("/") or ".." in parts:
        raise InvalidRequest(
            "executable",
            f"{path!r} is relative to the submit directory, which corral cannot find from initialdir {initialdir!r}",
            "give the executable's absolute path",
        )
    return "../" * len(parts) + path if parts else (path if "/" in path else "./" + path)


def _split_arguments(text: str) -> list[str]:
    text = text.strip()
    if text.startswith('"'):
        return _split_quoted(_unquote(text, "arguments"), "arguments")
    words: list[str] = []
    current: list[str] = []
    in_word = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and text[i + 1 : i + 2] == '"':
            current.append('"')
            in_word = True
            i += 2
            continue
        if char == '"':
            raise InvalidRequest(
                "arguments", f"unescaped double quote in {text!r}",
                'write \\" for a double quote, or put all the arguments in double quotes (the new syntax)',
            )
        if char in _SPACE:
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
        else:
            current.append(char)
            in_word = True
        i += 1
    if in_word:
        words.append("".join(current))
    return words


def _unquote(text: str, key: str) -> str:
    """The new syntax: the text inside the outer double quotes, each "" made one "."""
    out: list[str] = []
    i = 1
    while i < len(text):
        char = text[i]
        if char == '"':
            if text[i + 1 : i + 2] == '"':
                out.append('"')
                i += 2
                continue
            rest = text[i + 1 :].strip()
            if rest:
                raise InvalidRequest(key, f"text after the closing double quote: {rest!r}", 'write "" for a " inside')
            return "".join(out)
        out.append(char)
        i += 1
    raise InvalidRequest(key, "the opening double quote is never closed", 'end the value with "')


def _split_quoted(text: str, key: str) -> list[str]:
    """Words split at spaces and tabs; '...' keeps spaces, and '' inside it is a '."""
    words: list[str] = []
    current: list[str] = []
    in_word = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == "'":
            in_word = True  # '' makes an empty argument
            start = i
            i += 1
            while True:
                end = text.find("'", i)
                if end < 0:
                    raise InvalidRequest(
                        key, f"unbalanced single quote at {text[start:]!r}",
                        "close it; '' is a ' inside",
                    )
                current.append(text[i:end])
                if text[end + 1 : end + 2] == "'":
                    current.append("'")
                    i = end + 2
                    continue
                i = end + 1
                break
        elif char in _SPACE:
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            i += 1
        else:
            current.append(char)
            in_word = True
            i += 1
    if in_word:
        words.append("".join(current))
    return words


def _environment(macros: _Macros) -> tuple[dict[str, str], dict[str, str]]:
    """(fixed variables, variables that hold $(Cluster) or $(Process) and are set at run time)."""
    text = macros.expand("environment", run_time=True).strip()
    if text.startswith('"'):
        entries = _split_quoted(_unquote(text, "environment"), "environment")
    else:
        entries = [entry for entry in text.split(";") if entry]
    fixed: dict[str, str] = {}
    per_job: dict[str, str] = {}
    for entry in entries:
        name, has_value, value = entry.partition("=")
        if not has_value:
            raise InvalidRequest("environment", f"{entry!r} has no =", "write NAME=value")
        if not _ENV_NAME.match(name):
            raise InvalidRequest("environment", f"{name!r} is not a variable name", "use letters, digits and _")
        fixed.pop(name, None)
        per_job.pop(name, None)
        (per_job if _PLACEHOLDER.search(value) else fixed)[name] = value
    return fixed, per_job


def _export(macros: _Macros) -> str:
    text = macros.expand("getenv").strip()
    flag = text.lower()
    if flag in ("true", "t", "yes", "1", "*"):
        return "ALL"
    if flag in ("false", "f", "no", "0", ""):
        return "NONE"
    names = [name for name in re.split(r"[\s,]+", text) if name]
    for name in names:
        if not _ENV_NAME.match(name):
            raise InvalidRequest(
                "getenv", f"{name!r} is not a variable name",
                "list names; patterns and -NAME are not supported",
            )
    return ",".join(["NONE", *names])


def _batch_name(values: dict[str, str], macros: _Macros) -> str | None:
    if "batch_name" in values:
        text = macros.expand("batch_name").strip()
        return (text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text) or None
    if "+jobbatchname" in values:
        text = macros.expand("+jobbatchname").strip()
        if not (len(text) >= 2 and text[0] == text[-1] == '"'):
            raise InvalidRequest("+JobBatchName", f"must be a quoted string, got {text!r}", 'write +JobBatchName = "x"')
        return re.sub(r"\\(.)", r"\1", text[1:-1]) or None
    return None


def _resources(values: dict[str, str], macros: _Macros) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "request_gpus" in values:
        out["gpus"] = _whole_number(macros.expand("request_gpus"), "request_gpus", 0)
    if "request_cpus" in values:
        out["cpus"] = _whole_number(macros.expand("request_cpus"), "request_cpus", 1)
    if "request_memory" in values:
        out["mem_mb"] = _megabytes(macros.expand("request_memory"), "request_memory")
    if "gpus_minimum_memory" in values:
        out["gpu_mem_mb"] = _megabytes(macros.expand("gpus_minimum_memory"), "gpus_minimum_memory")
    limits = [
        _whole_number(macros.expand(key), key, 1)
        for key in ("allowed_execute_duration", "allowed_job_duration") if key in values
    ]
    if limits:
        out["time_limit_s"] = min(limits)
    return out


def _whole_number(text: str, key: str, low: int) -> int:
    text = text.strip()
    if not is_number(text) or int(text) < low:
        raise InvalidRequest(
            key, f"must be a whole number of at least {low}, got {text!r}",
            "write a number, not an expression",
        )
    return int(text)


def _megabytes(text: str, key: str) -> int:
    try:
        return parse_memory_mb(text.strip(), field=key)
    except InvalidRequest:
        raise InvalidRequest(
            key, f"cannot read {text.strip()!r} as a size",
            "write MB or a unit, not an expression: 4096, 4096M, 4G, 4GB"
        ) from None


def _log_files(values: dict[str, str], macros: _Macros, *, array: bool) -> dict[str, str]:
    paths = {
        field: _log_pattern(macros.expand(key, run_time=True).strip(), array=array)
        for key, field in (("output", "stdout"), ("error", "stderr"))
        if key in values and values[key].strip()
    }
    if paths:  # HTCondor sends the stream the file does not name to /dev/null
        paths.setdefault("stdout", "/dev/null")
        paths.setdefault("stderr", "/dev/null")
    return paths


def _log_pattern(path: str, *, array: bool) -> str:
    """An HTCondor path as a corral pattern: % doubled, $(Cluster)/$(Process) made %A/%a (or %j)."""
    pieces = []
    for piece in _PLACEHOLDER.split(path):
        if piece == _CLUSTER:
            pieces.append("%A" if array else "%j")
        elif piece == _TASK:
            pieces.append("%a")
        else:
            pieces.append(piece.replace("%", "%%"))
    pattern = "".join(pieces)
    return "./" + pattern if pattern.startswith("~") else pattern  # HTCondor has no ~ expansion


def _wrapper(words: list[str], per_job_env: dict[str, str], stdin: str, *, array: bool) -> str:
    """A /bin/sh script that sets the per-job variables and execs the command; only $CORRAL_* is expanded."""
    lines = [f"export {name}={_shell_word(value, array=array)}" for name, value in per_job_env.items()]
    command = "exec " + " ".join(_shell_word(word, array=array) for word in words)
    if stdin:
        command += " < " + _shell_word(stdin, array=array)
    lines.append(command)
    return "\n".join(lines)


def _shell_word(text: str, *, array: bool) -> str:
    pieces = []
    for piece in _PLACEHOLDER.split(text):
        if piece == _TASK:
            pieces.append('"$CORRAL_ARRAY_TASK_ID"')
        elif piece == _CLUSTER:
            pieces.append('"$CORRAL_ARRAY_JOB_ID"' if array else '"$CORRAL_JOB_ID"')
        elif piece:
            pieces.append(shlex.quote(piece))
    return "".join(pieces) or "''"


def _ignored(submit: _SubmitFile) -> Iterator[str]:
    for key, written in submit.spelled.items():
        if key in _IGNORED:
            yield f"{written}: ignored; {_IGNORED[key]}"
        elif key.startswith("+") and key != "+jobbatchname":
            yield f"{written}: ignored; corral keeps no job ClassAd for custom attributes"
        elif key not in _READ and key not in submit.referenced:
            yield f"{written}: not a submit command corral knows, and nothing refers to it; ignored (a typo?)"
