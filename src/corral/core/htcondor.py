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
    queue [N] V in (...), queue [N] V1, V2 from (...), with an optional [start:stop:step] slice
                          an array with a task per item (times N); $(V), $(Item), $(Step), $(ItemIndex), $(Row)
                          are set per task by a `case` on $CORRAL_ARRAY_TASK_ID in the wrapper. `from FILE` and
                          `matching GLOB` need files: `resolve_queue`, which the CLI calls, lists them inline
    requirements, require_gpus, gpus_minimum_capability, gpus_maximum_capability
                          requirements: one ClassAd expression (corral.core.classad) over each GPU and the node
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

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from corral.core import classad
from corral.core.arrays import MAX_TASKS
from corral.core.units import is_number, parse_memory_mb
from corral.errors import InvalidRequest

# Stand-ins for $(Process) and $(Cluster) between macro expansion and the place each value goes:
# private-use characters, refused in the file itself, that no quoting rule treats specially.
_TASK = "\ue000"
_CLUSTER = "\ue001"
# A variable of `queue ... in/from/matching` that differs from task to task: U+E100 + its number.
_ITEM_BASE = 0xE100
_PLACEHOLDER = re.compile("([\ue000\ue001\ue100-\ue1ff])")
_MAX_ITEM_VARIABLES = 64
MAX_ITEM_TABLE_BYTES = 64 * 1024

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
    macros = _Macros(values, array=array, items=submit.items)
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
    redirects = _item_redirects(values, macros)
    if run_time_env or stdin or redirects or any(_PLACEHOLDER.search(word) for word in arguments):
        script = _wrapper(words, run_time_env, stdin, redirects, array=array)
        request["command"] = ["/bin/sh", "-c", _item_table(submit.items, script)]
        name = name or executable.rstrip("/").rsplit("/", 1)[-1]
    else:
        request["command"] = words
    if name:
        request["name"] = name

    request.update(_resources(values, macros))
    if not redirects:
        request.update(_log_files(values, macros, array=array))
    requirements = _requirements(values, macros)
    if requirements:
        request["requirements"] = requirements
    user_log = macros.expand("log", run_time=True, cluster_only=True).strip() if "log" in values else ""
    if user_log:
        request["user_log"] = _log_pattern(user_log, array=True)

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
    items: _Items | None = None
    """The values of `queue ... in/from` variables, task by task; None for `queue [N]`."""


@dataclass
class _Items:
    names: list[str]
    """Lower-case names: the queue's variables, then step, itemindex and row."""
    rows: list[list[str]]
    """Per task (its process number), the value of each name."""


def _read(text: str) -> _SubmitFile:
    if "\0" in text:
        raise InvalidRequest("submit file", "contains a NUL byte")
    if re.search("[\ue000-\ue1ff]", text):
        raise InvalidRequest("submit file", "contains private-use characters U+E000 to U+E1FF")
    values: dict[str, str] = {}
    spelled: dict[str, str] = {}
    count: int | None = None
    items: _Items | None = None
    referenced: set[str] = set()
    warnings: list[str] = []
    for lineno, line, _end in _statements(text):
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
            count, items = _queue(queue.group(1), _Macros(values, array=True), lineno)
            referenced.update(items.names if items else ())
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
    return _SubmitFile(values, spelled, count, referenced, warnings, items)


def _statements(text: str) -> Iterator[tuple[int, str, int]]:
    """(line number, statement, index of the line after it): continuations joined, comments and blank
    lines skipped; `queue ... (` takes the lines up to one that is `)`.

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
        elif _QUEUE.match(line) and line.endswith("(") and re.search(r"\b(in|from|matching)\b", line, re.I):
            body = []
            while i < len(lines) and lines[i].strip() != ")":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise InvalidRequest("queue", f"line {lineno}: the list begun with ( never ends", "end it with a line )")
            i += 1
            line = line + "\n" + "\n".join(body) + "\n)"
        yield lineno, line, i


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


_QUEUE_FORM = re.compile(r"^(.*?)(?<![A-Za-z0-9_])(in|from|matching)(?![A-Za-z0-9_])(.*)$", re.IGNORECASE | re.DOTALL)
_SLICE = re.compile(r"^\[\s*(-?\d*)\s*(?::\s*(-?\d*)\s*(?::\s*(-?\d*)\s*)?)?\]")


def _queue(text: str, macros: _Macros, lineno: int) -> tuple[int, _Items | None]:
    """The number of jobs a queue statement makes, and the values of its variables for each."""
    expanded = macros.expand_text(text, "queue").strip()
    form = _QUEUE_FORM.match(expanded)
    head, rest = (form.group(1).strip(), form.group(3).strip()) if form else (expanded, "")
    words = [w for w in re.split(r"[\s,]+", head) if w]
    count = 1
    if words and is_number(words[0]):
        count = int(words.pop(0))
        if count < 1:
            raise InvalidRequest("queue", f"line {lineno}: queue {count} asks for no job", "write queue N with N >= 1")
    if form is None:
        if words:
            raise InvalidRequest("queue", f"line {lineno}: cannot read queue {expanded!r}",
                                 "write queue, queue N, or queue [N] VAR in/from/matching ...")
        _check_size(count, lineno)
        return count, None
    kind = form.group(2).lower()
    names = [w.lower() for w in words] or ["item"]
    for name in names:
        if not _ENV_NAME.match(name):
            raise InvalidRequest("queue", f"line {lineno}: {name!r} is not a variable name", "use letters, digits and _")
    if len(names) > _MAX_ITEM_VARIABLES:
        raise InvalidRequest("queue", f"line {lineno}: more than {_MAX_ITEM_VARIABLES} variables")
    if kind == "matching":
        raise InvalidRequest(
            "queue", f"line {lineno}: queue ... matching lists files, which the corral CLI does for you",
            "submit the file with corral submit --condor, from the directory it names files in",
        )
    rest, chosen = _slice(rest, lineno)
    if kind == "in":
        inner = _in_parentheses(rest, lineno) if rest.startswith("(") else rest
        rows = [[item] for item in re.split(r"[\s,]+", inner) if item]
        if len(names) > 1:
            raise InvalidRequest("queue", f"line {lineno}: queue ... in takes one variable",
                                 "use queue A, B from (...) for several")
    else:
        if not rest.startswith("("):
            raise InvalidRequest(
                "queue", f"line {lineno}: queue ... from {rest!r} reads a file, which the corral CLI does for you",
                "submit the file with corral submit --condor, or list the items: queue VAR from ( ... )",
            )
        rows = [_split_row(line, len(names)) for line in _in_parentheses(rest, lineno).split("\n")
                if line.strip() and not line.strip().startswith("#")]
    rows = rows[chosen] if chosen is not None else rows
    if not rows:
        raise InvalidRequest("queue", f"line {lineno}: the list of items is empty, so no job is queued",
                             "give at least one item")
    total = count * len(rows)
    _check_size(total, lineno)
    table = [
        [*row, str(step), str(index), str(index)]
        for index, row in enumerate(rows) for step in range(count)
    ]
    return total, _Items([*names, "step", "itemindex", "row"], table)


def _check_size(count: int, lineno: int) -> None:
    if count > MAX_TASKS:
        raise InvalidRequest("queue", f"line {lineno}: {count} jobs is more than the {MAX_TASKS} an array holds")


def _slice(rest: str, lineno: int) -> tuple[str, slice | None]:
    match = _SLICE.match(rest)
    if match is None:
        return rest, None
    parts = [int(p) if p else None for p in match.groups()]
    if parts[2] == 0:
        raise InvalidRequest("queue", f"line {lineno}: a slice step of 0", "write [start:stop:step] with step >= 1")
    if ":" not in match.group(0):
        raise InvalidRequest("queue", f"line {lineno}: {match.group(0)} is not a slice", "write [start:stop:step]")
    return rest[match.end():].strip(), slice(*parts)


def _in_parentheses(rest: str, lineno: int) -> str:
    if not (rest.startswith("(") and rest.endswith(")")):
        raise InvalidRequest("queue", f"line {lineno}: the list {rest!r} is not in parentheses", "write ( ... )")
    return rest[1:-1]


def _split_row(line: str, names: int) -> list[str]:
    """A `from` row: split at commas and spaces, the last variable taking the rest of the line."""
    values: list[str] = []
    rest = line.strip()
    while len(values) < names - 1:
        match = re.match(r"([^\s,]*)[\s,]*(.*)$", rest, re.DOTALL)
        assert match is not None
        values.append(match.group(1))
        rest = match.group(2)
    values.append(rest.strip())
    return values


def resolve_queue(
    text: str, read_file: Callable[[str], str], list_matching: Callable[[list[str], str | None], list[str]],
) -> str:
    """The submit file with `queue ... from FILE` and `queue ... matching PATTERNS` made `from ( ... )`.

    The CLI calls it with its own I/O, as the submitting user, before sending the file to the server.
    `list_matching(patterns, "files" | "dirs" | None)` lists what the globs match, sorted.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    for lineno, line, end in _statements(text):
        queue = _QUEUE.match(line)
        if not queue:
            continue
        form = _QUEUE_FORM.match(queue.group(1).strip())
        if form is None or form.group(2).lower() == "in":
            return text
        rest = form.group(3).strip()
        slice_text = ""
        if form.group(2).lower() == "matching":
            kind = None
            first = rest.split(None, 1)
            if first and first[0].lower() in ("files", "dirs"):
                kind = first[0].lower()
                rest = first[1] if len(first) > 1 else ""
            match = _SLICE.match(rest)
            if match:
                slice_text, rest = match.group(0) + " ", rest[match.end():].strip()
            patterns = [p for p in re.split(r"[\s,]+", rest[1:-1] if rest.startswith("(") else rest) if p]
            items = list_matching(patterns, kind)
        else:
            match = _SLICE.match(rest)
            if match:
                slice_text, rest = match.group(0) + " ", rest[match.end():].strip()
            if rest.startswith("(") or not rest:
                return text
            items = read_file(rest).replace("\r\n", "\n").split("\n")
        for item in items:
            if item.strip() in (")",) or "\0" in item:
                raise InvalidRequest("queue", f"line {lineno}: cannot pass the item {item!r}", "rename it")
        statement = f"queue {form.group(1).strip()} from {slice_text}(\n" + "\n".join(items) + "\n)"
        return "\n".join([*lines[:lineno - 1], statement, *lines[end:]])
    return text


# -- macros --------------------------------------------------------------------------------------


class _Macros:
    """Expands $(...) in values: the file's own definitions, and $(Cluster)/$(Process) as stand-ins."""

    def __init__(self, values: dict[str, str], *, array: bool, items: _Items | None = None) -> None:
        self.values = values
        self.array = array
        self.items = items
        self.cluster_only = False

    def expand(self, key: str, *, run_time: bool = False, cluster_only: bool = False) -> str:
        """The value of submit command `key`; `run_time` allows $(Cluster) and $(Process) in it
        (`cluster_only`: $(Cluster) alone)."""
        self.cluster_only = cluster_only
        try:
            return self.expand_text(self.values[key], key, run_time=run_time, stack=(key,))
        finally:
            self.cluster_only = False

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
            if self.items is not None and name in self.items.names:
                return self._item(name, whole, key, run_time)
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

    def _item(self, name: str, whole: str, key: str, run_time: bool) -> str:
        assert self.items is not None
        column = self.items.names.index(name)
        if not self.array:
            return self.items.rows[0][column]  # one job: its value is known now
        if not run_time or self.cluster_only:
            raise InvalidRequest(
                key, f"{whole} differs from job to job, and corral takes one {key} for all of them",
                f"use it only in {_RUN_TIME_KEYS}",
            )
        return chr(_ITEM_BASE + column)

    def _per_job(self, placeholder: str, whole: str, key: str, run_time: bool) -> str:
        if placeholder == _TASK and not self.array:
            return "0"  # a single job is process 0 of its cluster
        if self.cluster_only and placeholder == _TASK:
            raise InvalidRequest(
                key, f"{whole} differs from job to job; corral writes one {key} for the whole cluster",
                "use $(Cluster) alone in it",
            )
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


def _wrapper(words: list[str], per_job_env: dict[str, str], stdin: str, redirects: list[tuple[str, str]], *,
             array: bool) -> str:
    """A /bin/sh script that sets the per-job variables and execs the command; only $CORRAL_* and the
    item variables it sets itself are expanded."""
    lines = [f"export {name}={_shell_word(value, array=array)}" for name, value in per_job_env.items()]
    command = "exec " + " ".join(_shell_word(word, array=array) for word in words)
    if stdin:
        command += " < " + _shell_word(stdin, array=array)
    for operator, path in redirects:
        command += f" {operator}" + _shell_word(path, array=array)
    lines.append(command)
    return "\n".join(lines)


def _item_redirects(values: dict[str, str], macros: _Macros) -> list[tuple[str, str]]:
    """Where output and error name a queue variable: the wrapper opens them (a corral pattern cannot)."""
    if macros.items is None or not macros.array:
        return []
    paths = {
        key: macros.expand(key, run_time=True).strip()
        for key in ("output", "error") if key in values and values[key].strip()
    }
    if not any(re.search("[\ue100-\ue1ff]", path) for path in paths.values()):
        return []
    return [(">", paths.get("output", "/dev/null")), ("2>", paths.get("error", "/dev/null"))]


def _item_table(items: _Items | None, script: str) -> str:
    """The script, after a `case` that sets each item variable it uses for this task."""
    used = sorted({ord(c) - _ITEM_BASE for c in script if _ITEM_BASE <= ord(c) < _ITEM_BASE + 0x100})
    if items is None or not used:
        return script
    lines = ['case "$CORRAL_ARRAY_TASK_ID" in']
    for task, row in enumerate(items.rows):
        sets = " ".join(f"_corral_{k}={shlex.quote(row[k])}" for k in used)
        lines.append(f"{task}) {sets};;")
    lines.append("esac")
    table = sum(len(line) for line in lines)
    if table > MAX_ITEM_TABLE_BYTES:
        raise InvalidRequest(
            "queue", f"its items take {table // 1024} KB in the job's command; corral takes up to "
            f"{MAX_ITEM_TABLE_BYTES // 1024} KB (an argument the kernel passes whole, kept with every task)",
            "split the sweep into several files, or queue N and read line $(Process) of the list in the job",
        )
    body = _PLACEHOLDER.sub(lambda m: f'"$_corral_{ord(m.group(1)) - _ITEM_BASE}"'
                            if ord(m.group(1)) >= _ITEM_BASE else m.group(1), script)
    return "\n".join([*lines, body])


def _requirements(values: dict[str, str], macros: _Macros) -> str | None:
    """requirements, require_gpus and the gpus_ capability bounds as one expression, checked here."""
    parts: list[str] = []
    for key in ("requirements", "require_gpus"):
        if key in values and macros.expand(key).strip():
            text = " ".join(macros.expand(key).split())
            classad.parse(text, key)
            parts.append(f"({text})")
    for key, operator in (("gpus_minimum_capability", ">="), ("gpus_maximum_capability", "<=")):
        if key in values:
            text = macros.expand(key).strip()
            if not is_number(text) and not re.fullmatch(r"\d+\.\d+|\d+", text):
                raise InvalidRequest(key, f"must be a compute capability such as 7.0, got {text!r}", "write a number")
            parts.append(f"(Capability {operator} {text})")
    return " && ".join(parts) or None


def _shell_word(text: str, *, array: bool) -> str:
    pieces = []
    for piece in _PLACEHOLDER.split(text):
        if len(piece) == 1 and _ITEM_BASE <= ord(piece) < _ITEM_BASE + 0x100:
            pieces.append(piece)  # _item_table makes it "$_corral_N"
        elif piece == _TASK:
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
