"""What Slurm 22.05's `squeue` prints, from the API's job JSON: columns, widths, truncation, order.

    format_squeue(jobs, *, now, fmt=None, fmt_long=None, long=False, noheader=False, start=False,
                  array=False, sort=None, node_name="localhost", errors=None) -> str

- `jobs`: job dicts as `GET /api/v1/jobs` answers (`corral.core.job_fields.JobFields`); a pending array's
  waiting tasks are one record whose `ref` is `12_[4-9%2]`. An optional `priority` (int, higher runs
  first: corral's JSON has none) orders pending jobs as Slurm's default sort does; where no job has one,
  the order given stands for it (the API's, oldest first), held jobs last.
- `now`: epoch seconds, for TIME (%M), TIME_LEFT (%L) and the `-l` date line.
- `fmt`: `-o/--format` (`%.18i %-8j ...`); `fmt_long`: `-O/--Format` (`JobID,Name:.10,State:20|`).
  Neither: Slurm's default columns, `-l` ones with `long`, `--start` ones with `start`.
- `long`: `-l` (STATE and TIME_LIMIT columns, and the date line first unless `noheader`).
- `start`: `--start`: only pending jobs, START_TIME and SCHEDNODES columns, sorted by start time.
- `array`: `-r`: one line per waiting array task (`12_4`, `12_5`) instead of `12_[4-9]`.
- `sort`: `-S` keys (`i`, `-t`, `u,-M`); Slurm's default is `P,t,-p`.
- `node_name`: NODELIST of a running job whose record names no node.
- `errors`: collects what Slurm writes to stderr and goes on after (`Invalid job format specification: X`);
  the caller prints each as `squeue: error: ...`. An unknown sort key raises ValueError (Slurm exits 1).

Returns the lines, each ending in a newline (nothing at all for no header and no jobs).

Slurm's own quirks are kept, since scripts parse what it prints: the format is cut at every `%`, so `%%j`
is `%j` and `%%|` prints `%|`; `%-10j` is no field (only `.` and a width are), printed as it is, with an
error; a left-aligned column truncates its value, a right-aligned one truncates all but times and node
lists; `-O` columns are 20 wide with no space between them; `-O JobID` is the bare id (`JobArrayID` is
`%i`). Codes corral has nothing for print what Slurm prints for a job without them (`(null)`, `N/A`, `*`).

Pure and cheap to import: only `time`.
"""

from __future__ import annotations

import time

from corral.cli.slurm.values import UNLIMITED, local_time, parse_iso, state_code

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any

    Item = tuple[str | None, int, bool, str]
    """A column: its code ("" literal text, None what Slurm calls invalid), width, right-aligned, text after."""

DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
LONG_FORMAT = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
DEFAULT_SORT = "P,t,-p"
START_SORT = "S"
LONG_DEFAULT_WIDTH = 20
YEAR_SECONDS = 365 * 24 * 3600

# code: header. Slurm's headers, whatever the code's value below (those it has no value for print N/A)
HEADERS = {
    "a": "ACCOUNT", "A": "JOBID", "b": "TRES_PER_NODE", "B": "EXEC_HOST", "c": "MIN_CPUS", "C": "CPUS",
    "d": "MIN_TMP_DISK", "D": "NODES", "e": "END_TIME", "E": "DEPENDENCY", "f": "FEATURES",
    "F": "ARRAY_JOB_ID", "g": "GROUP", "G": "GROUP", "h": "OVER_SUBSCRIBE", "H": "SOCKETS_PER_NODE",
    "i": "JOBID", "I": "CORES_PER_SOCKET", "j": "NAME", "J": "THREADS_PER_CORE", "k": "COMMENT",
    "K": "ARRAY_TASK_ID", "l": "TIME_LIMIT", "L": "TIME_LEFT", "m": "MIN_MEMORY", "M": "TIME",
    "n": "REQ_NODES", "N": "NODELIST", "o": "COMMAND", "O": "CONTIGUOUS", "p": "PRIORITY",
    "P": "PARTITION", "q": "QOS", "Q": "PRIORITY", "r": "REASON", "R": "NODELIST(REASON)",
    "S": "START_TIME", "t": "ST", "T": "STATE", "U": "UID", "u": "USER", "v": "RESERVATION",
    "V": "SUBMIT_TIME", "w": "WCKEY", "W": "LICENSES", "x": "EXC_NODES", "X": "CORE_SPEC", "y": "NICE",
    "Y": "SCHEDNODES", "z": "S:C:T", "Z": "WORK_DIR",
    # -O only
    "stdout": "STDOUT", "stderr": "STDERR", "tres-alloc": "TRES_ALLOC", "tres-per-job": "TRES_PER_JOB",
    "pendingtime": "PENDING_TIME", "eligibletime": "ELIGIBLE_TIME", "exit_code": "EXIT_CODE",
    "restartcnt": "RESTART_CNT", "cpus-per-task": "CPUS_PER_TASK", "timemin": "TIME_MIN",
}
# -O names (lower case) for the codes above
LONG_NAMES = {
    "account": "a", "jobid": "A", "gres": "b", "tres-per-node": "b", "batchhost": "B", "mincpus": "c",
    "numcpus": "C", "mintmpdisk": "d", "numnodes": "D", "endtime": "e", "dependency": "E", "feature": "f",
    "arrayjobid": "F", "groupname": "g", "groupid": "G", "oversubscribe": "h", "shared": "h",
    "sockets": "H", "jobarrayid": "i", "cores": "I", "name": "j", "threads": "J", "comment": "k",
    "arraytaskid": "K", "timelimit": "l", "timeleft": "L", "minmemory": "m", "timeused": "M",
    "reqnodes": "n", "nodelist": "N", "command": "o", "contiguous": "O", "priority": "p",
    "partition": "P", "qos": "q", "prioritylong": "Q", "reason": "r", "reasonlist": "R",
    "starttime": "S", "statecompact": "t", "state": "T", "userid": "U", "username": "u",
    "reservation": "v", "submittime": "V", "wckey": "w", "licenses": "W", "corespec": "X", "nice": "y",
    "schednodes": "Y", "sct": "z", "workdir": "Z", "stdout": "stdout", "stderr": "stderr",
    "tres": "tres-alloc", "tres-alloc": "tres-alloc", "tres-per-job": "tres-per-job",
    "pendingtime": "pendingtime", "eligibletime": "eligibletime", "exit_code": "exit_code",
    "restartcnt": "restartcnt", "cpuspertask": "cpus-per-task", "cpus-per-task": "cpus-per-task",
    "mintime": "timemin",
}
# Slurm truncates every value that does not fit, except times and node lists
_UNCUT = frozenset("MlLN")
_UNCUT_HEADERS = frozenset("NRY")
_PENDING, _RUNNING = "PENDING", "RUNNING"


def format_squeue(jobs: Iterable[Mapping[str, object]], *, now: float, fmt: str | None = None,
                  fmt_long: str | None = None, long: bool = False, noheader: bool = False, start: bool = False,
                  array: bool = False, sort: str | None = None, node_name: str = "localhost",
                  errors: list[str] | None = None) -> str:
    """squeue's output (see the module's docstring)."""
    problems: list[str] = [] if errors is None else errors
    now = int(now)  # Slurm's time(NULL): whole seconds, so a time left rounds as Slurm's does
    if fmt is None and fmt_long is None:
        fmt = START_FORMAT if start else LONG_FORMAT if long else DEFAULT_FORMAT
    items = parse_format(fmt, problems) if fmt is not None else parse_long_format(fmt_long or "", problems)
    rows = _record_order([dict(job) for job in jobs])
    if not any("priority" in job for job in rows):
        _queue_order_priority(rows)
    if start:
        rows = [job for job in rows if job.get("state") == _PENDING]
        sort = START_SORT if sort is None else sort
    rows = sort_jobs(rows, DEFAULT_SORT if sort is None else sort, now)
    out: list[str] = []
    if not noheader:
        if long:
            out.append(time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now)))
        out.append(_line(items, None, now, node_name))
    for job in rows:
        for shown in _array_tasks(job) if array else (job,):
            out.append(_line(items, shown, now, node_name))
    return "".join(line + "\n" for line in out)


def parse_format(fmt: str, errors: list[str]) -> list[Item]:
    """`-o`: Slurm's parse_format: tokens split on `%` (empty ones skipped), each `[.][width]code` + text."""
    items: list[Item] = []
    cut = fmt.find("%")
    if cut == -1:
        return [("", 0, False, fmt)]
    if cut > 0:
        items.append(("", 0, False, fmt[:cut]))
    for token in fmt[cut:].split("%"):
        if not token:
            continue
        i = 0
        right = token[0] == "."
        i += right
        width = 0
        while i < len(token) and token[i].isdigit() and token[i].isascii():
            width = width * 10 + int(token[i])
            i += 1
        code = token[i] if i < len(token) else ""
        suffix = token[i + 1:]
        if code and code in HEADERS and len(code) == 1:
            items.append((code, width, right, suffix))
        else:
            items.append((None, width, right, "%" + token))
            errors.append(f"Invalid job format specification: {code}")
    return items


def parse_long_format(fmt_long: str, errors: list[str]) -> list[Item]:
    """`-O`: comma-separated names, each `name[:[.][width][text]]`; no `:` is 20 wide, left-aligned."""
    items: list[Item] = []
    for token in fmt_long.split(","):
        if not token:
            continue
        name, colon, spec = token.partition(":")
        suffix = ""
        if colon:
            right = spec.startswith(".")
            digits = spec[1:] if right else spec
            end = 0
            while end < len(digits) and digits[end].isdigit() and digits[end].isascii():
                end += 1
            width = int(digits[:end]) if end else 0
            suffix = digits[end:]
        else:
            right, width = False, LONG_DEFAULT_WIDTH
        code = LONG_NAMES.get(name.lower())
        if code is None:
            items.append((None, width, right, suffix))
            errors.append(f"Invalid job format specification: {name}")
        else:
            items.append((code, width, right, suffix))
    return items


def sort_jobs(jobs: list[dict[str, object]], keys: str, now: float) -> list[dict[str, object]]:
    """Slurm's sort of `jobs` (in `_record_order`): first by start time, latest first (never-started last), then each `-S` key from the
    last to the first, each a stable sort, so the first key decides; `-` before a key reverses it."""
    started = [job for job in jobs if _start(job)]
    never = [job for job in jobs if not _start(job)]
    started.sort(key=lambda job: _start_key(job, now), reverse=True)
    rows = started + never[::-1]  # Slurm's comparison puts never-started jobs last, in reverse
    i = len(keys) - 1
    while i >= 0:
        key = keys[i]
        if key in ",+-":
            i -= 1
            continue
        reverse = i > 0 and keys[i - 1] == "-"
        if key == "b":
            pass  # Slurm: "Invalid sort specification: b", and goes on
        elif key in "cfhnO":
            pass  # Slurm accepts these and does not sort by them
        elif key == "S":
            rows = _sort_by_start(rows, reverse, now)
        elif key in _SORT_KEYS:
            by = _SORT_KEYS[key]
            rows.sort(key=lambda job: by(job, now), reverse=reverse)
        else:
            raise ValueError(f"Invalid sort specification: {key}")
        i -= 1
    return rows


def _sort_by_start(rows: list[dict[str, object]], reverse: bool, now: float) -> list[dict[str, object]]:
    started = [job for job in rows if _start(job)]
    never = [job for job in rows if not _start(job)]
    started.sort(key=lambda job: _start_key(job, now), reverse=reverse)
    return started + never[::-1]  # as in the first sort: Slurm's merge sort turns them round each time


def _queue_order_priority(jobs: list[dict[str, object]]) -> None:
    """Without priorities, the order given stands for them (the API lists the queue oldest first, which is
    the order of Slurm's age priority), and a held job has Slurm's priority 0."""
    for rank, job in enumerate(jobs):
        job["priority"] = 0 if job.get("held") or job.get("reason") == "JobHeldUser" else len(jobs) - rank


def _record_order(jobs: list[dict[str, object]]) -> list[dict[str, object]]:
    """The order slurmctld keeps its records in, which breaks Slurm's ties: by creation, where an array's
    waiting tasks move to a new record each time one of its tasks starts (after that task's record)."""
    newest: dict[int, int] = {}
    for job in jobs:
        array_job = job.get("array_job_id")
        if isinstance(array_job, int):
            newest[array_job] = max(newest.get(array_job, 0), _int(job.get("id")))
    return sorted(jobs, key=lambda job: max(_int(job.get("id")), newest.get(_int(job.get("id")), 0)))


def _start(job: Mapping[str, object]) -> float | None:
    """Slurm's start_time: when it started, or for a pending job when it is expected to."""
    if job.get("state") == _PENDING:
        return parse_iso(_text(job.get("estimated_start")))
    return parse_iso(_text(job.get("start_time")))


def _start_key(job: Mapping[str, object], now: float) -> float:
    begin = _start(job) or 0.0
    return max(begin, now) if job.get("state") == _PENDING else begin


def _id_key(job: Mapping[str, object], now: float) -> tuple[int, int]:
    task = job.get("array_task_id")
    if isinstance(task, int) and job.get("array_job_id") is not None:
        return _int(job.get("array_job_id")), task
    return _int(job.get("id")), _NO_TASK


_NO_TASK = 0xFFFFFFFE  # Slurm's NO_VAL: a job that is not a task sorts after its array's tasks

_SORT_KEYS: dict[str, Callable[[Mapping[str, object], float], Any]] = {
    "C": lambda job, now: _int(job.get("cpus")),
    "D": lambda job, now: _int(job.get("nodes")) or 1,
    "e": lambda job, now: _end(job, now) or 0.0,
    "i": _id_key,
    "j": lambda job, now: str(job.get("name") or ""),
    "l": lambda job, now: _limit_minutes(job),
    "L": lambda job, now: _time_left_key(job, now),
    "m": lambda job, now: _int(job.get("mem_mb")),
    "M": lambda job, now: _used(job, now),
    "N": lambda job, now: _nodes(job, "") or "",
    "p": lambda job, now: _int(job.get("priority")),
    "Q": lambda job, now: _int(job.get("priority")),
    "P": lambda job, now: str(job.get("partition") or ""),
    "t": lambda job, now: state_code(str(job.get("state"))),
    "T": lambda job, now: str(job.get("state")),
    "u": lambda job, now: str(job.get("user") or ""),
    "V": lambda job, now: parse_iso(_text(job.get("submit_time"))) or 0.0,
    "y": lambda job, now: _int(job.get("nice")),
}


def _limit_minutes(job: Mapping[str, object]) -> int:
    limit = job.get("time_limit_s")
    return 0xFFFFFFFF if limit is None else _int(limit) // 60


def _time_left_key(job: Mapping[str, object], now: float) -> float:
    limit = job.get("time_limit_s")
    return float(0xFFFFFFFF) if limit is None else (_int(limit) // 60) * 60 - _used(job, now)


def _array_tasks(job: dict[str, object]) -> list[dict[str, object]]:
    """`-r`: a pending array's record (`12_[4-6%2]`) as one record per waiting task."""
    ref = str(job.get("ref") or "")
    head, bracket, rest = ref.partition("_[")
    if not bracket or job.get("state") != _PENDING:
        return [job]
    tasks = []
    for task in _task_ids(rest.rstrip("]").partition("%")[0]):
        tasks.append(dict(job, ref=f"{head}_{task}", array_task_id=task, array_job_id=int(head) if head.isdigit() else job.get("array_job_id")))
    return tasks or [job]


def _task_ids(ranges: str) -> list[int]:
    """`4-6,9` -> [4, 5, 6, 9]; an abbreviated tail (`...+97`) cannot be named and is left out."""
    ids: list[int] = []
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            continue
        ids.extend(range(int(first), int(last or first) + 1))
    return ids


def _line(items: Sequence[Item], job: Mapping[str, object] | None, now: float, node_name: str) -> str:
    parts = []
    for code, width, right, suffix in items:
        if code == "" or code is None:
            parts.append(suffix)
            continue
        if job is None:
            parts.append(_pad(HEADERS[code], width, right, code not in _UNCUT_HEADERS))
        else:
            text, cut = _value(code, job, now, node_name)
            parts.append(_pad(text, width, right, cut))
        parts.append(suffix)
    return "".join(parts)


def _pad(text: str | None, width: int, right: bool, cut: bool) -> str:
    """Slurm's _print_str: `%{w}s` (cut to w if `cut`) or `%.{w}s` then spaces; width 0 as it is."""
    if text is None:  # glibc prints a null string as "(null)", or nothing where the precision is under 6
        text = "(null)" if right or width == 0 or width >= 6 else ""
    if width <= 0:
        return text
    if right:
        text = text.rjust(width)
        return text[:width] if cut else text
    return text[:width].ljust(width)


def _value(code: str, job: Mapping[str, object], now: float, node_name: str) -> tuple[str | None, bool]:
    """The text Slurm prints for one job's column, and whether Slurm truncates it to the width."""
    cut = code not in _UNCUT
    state = str(job.get("state") or "")
    if code == "i":
        return str(job.get("ref") or job.get("id")), cut
    if code == "A":
        return str(job.get("id")), cut
    if code == "F":
        array_job = job.get("array_job_id")
        return str(array_job if array_job is not None else job.get("id")), cut
    if code == "K":
        return _array_task_text(job), cut
    if code == "j":
        return _text(job.get("name")), cut
    if code == "u":
        return _text(job.get("user")), cut
    if code == "a":
        return _text(job.get("account")) or _text(job.get("user")), cut
    if code == "P":
        return _text(job.get("partition")), cut
    if code == "q":
        return _text(job.get("qos")) or "normal", cut
    if code == "T":
        return state, cut
    if code == "t":
        return state_code(state), cut
    if code == "M":
        return _secs(_used(job, now)), cut
    if code == "l":
        limit = job.get("time_limit_s")
        return (UNLIMITED if limit is None else _secs((_int(limit) // 60) * 60)), cut
    if code == "L":
        limit = job.get("time_limit_s")
        return (UNLIMITED if limit is None else _secs((_int(limit) // 60) * 60 - _used(job, now))), cut
    if code == "D":
        return str(_int(job.get("nodes")) or 1), cut
    if code in "Cc":
        return str(_int(job.get("cpus")) or 1), cut
    if code == "m":
        return mem_size(_int(job.get("mem_mb"))), cut
    if code == "d":
        return "0", cut
    if code == "b":
        return _tres_per_node(job), cut
    if code == "tres-alloc":
        return _tres_alloc(job), cut
    if code == "R":
        if state in _REASON_STATES:
            return f"({_reason(job)})", True
        return _nodes(job, node_name), False
    if code == "r":
        return _reason(job), cut
    if code == "N":
        return _nodes(job, node_name) or "", False
    if code == "S":
        return _time(_start(job)), cut
    if code == "e":
        end = _end(job, now)
        if job.get("time_limit_s") is None and end is not None and end > now:
            return "NONE", cut
        return _time(end), cut
    if code == "V":
        return _time(parse_iso(_text(job.get("submit_time")))), cut
    if code == "eligibletime":
        return _time(parse_iso(_text(job.get("submit_time")))), cut
    if code == "pendingtime":
        begin = parse_iso(_text(job.get("start_time")))
        submit = parse_iso(_text(job.get("submit_time"))) or now
        return str(int((begin if begin and begin < now else now) - submit)), cut
    if code == "E":
        return _dependency(job), cut
    if code in "pQ":
        priority = _int(job.get("priority"))
        return (f"{priority / 0xFFFFFFFF:16.14f}" if code == "p" else str(priority)), cut
    if code == "y":
        return str(_int(job.get("nice"))), cut
    if code == "Z":
        return _text(job.get("workdir")), cut
    if code == "o":
        command = job.get("command")
        return (" ".join(str(word) for word in command) if isinstance(command, list) and command else None), cut
    if code == "stdout":
        return _text(job.get("stdout_path")), cut
    if code == "stderr":
        return _text(job.get("stderr_path")), cut
    if code == "Y":
        return _sched_nodes(job, now, node_name), False
    if code in "kfwv":
        return _text(job.get({"k": "comment", "f": "constraint"}.get(code, ""))) or None, cut
    if code in "nx":
        return "", cut
    if code == "h":
        return "OK", cut
    if code == "O":
        return "0", cut
    if code in "HIJ":
        return "*", cut
    if code == "z":
        return "*:*:*", cut
    if code == "tres-per-job":
        return "N/A", cut
    if code == "exit_code":
        return str(_int(job.get("exit_code"))), cut
    if code == "restartcnt":
        return str(_int(job.get("restarts"))), cut
    if code == "B":
        return (_nodes(job, node_name) or "n/a"), cut
    return "N/A", cut


# the states whose NODELIST(REASON) is the reason, not the node (Slurm's _print_job_reason_list)
_REASON_STATES = frozenset({_PENDING, "TIMEOUT", "OUT_OF_MEMORY", "DEADLINE", "FAILED"})


# what Slurm gives as the reason of a job that ended so, where corral's record names none
_END_REASONS = {"FAILED": "NonZeroExitCode", "TIMEOUT": "TimeLimit", "OUT_OF_MEMORY": "OutOfMemory",
                "DEADLINE": "DeadLine", "NODE_FAIL": "NodeDown"}


def _reason(job: Mapping[str, object]) -> str:
    reason = _text(job.get("reason"))
    if reason and reason != "None":
        return reason
    return _END_REASONS.get(str(job.get("state")), "None")


def _nodes(job: Mapping[str, object], node_name: str) -> str | None:
    if job.get("state") == _PENDING:
        return ""
    node = _text(job.get("node"))
    return node or (node_name if job.get("start_time") else "")


def _sched_nodes(job: Mapping[str, object], now: float, node_name: str) -> str | None:
    """Where backfill plans to start a pending job; none where it has no plan (Slurm's year-out estimate)
    or where the start is the job's own --begin."""
    begin = _start(job)
    if job.get("state") != _PENDING or not begin or begin - now > YEAR_SECONDS - 86400 or job.get("reason") == "BeginTime":
        return None
    return node_name


def _array_task_text(job: Mapping[str, object]) -> str:
    ref = str(job.get("ref") or "")
    if "_[" in ref:
        return ref.partition("_[")[2].rstrip("]")
    task = job.get("array_task_id")
    return "N/A" if task is None else str(task)


def _tres_per_node(job: Mapping[str, object]) -> str:
    """Slurm 22.05's TresPerNode as --gres writes it: `gres:gpu:2`, `gres:gpu:a100:2`; no GPUs N/A."""
    gpus = _int(job.get("gpus"))
    if not gpus:
        return "N/A"
    nodes = _int(job.get("nodes")) or 1
    kind = _text(job.get("gpu_type"))
    per_node = gpus // nodes if gpus % nodes == 0 else gpus
    return f"gres:gpu:{kind}:{per_node}" if kind else f"gres:gpu:{per_node}"


def _tres_alloc(job: Mapping[str, object]) -> str:
    cpus = _int(job.get("cpus")) or 1
    parts = [f"cpu={cpus}", f"mem={mem_size(_int(job.get('mem_mb')))}", f"node={_int(job.get('nodes')) or 1}",
             f"billing={cpus}"]
    gpus = _int(job.get("gpus"))
    if gpus:
        parts.append(f"gres/gpu={gpus}")
    return ",".join(parts)


def _dependency(job: Mapping[str, object]) -> str | None:
    """Slurm lists the dependencies still waited on, each with its state; met ones are dropped."""
    spec = _text(job.get("dependency"))
    reason = job.get("reason")
    if not spec or job.get("state") != _PENDING or reason not in ("Dependency", "DependencyNeverSatisfied"):
        return None
    status = "(unfulfilled)" if reason == "Dependency" else "(failed)"
    out = []
    for clause in spec.replace("?", ",").split(","):
        kind, _, ids = clause.partition(":")
        if not ids:
            out.append(clause + status)
            continue
        out.extend(f"{kind}:{one}{status}" for one in ids.split(":") if one)
    return ",".join(out)


def _used(job: Mapping[str, object], now: float) -> float:
    """Slurm's job_time_used: 0 while pending; running: since start; ended: start to end."""
    if job.get("state") == _PENDING:
        return 0.0
    begin = parse_iso(_text(job.get("start_time")))
    if not begin:
        return 0.0
    end = parse_iso(_text(job.get("end_time"))) if job.get("state") != _RUNNING else None
    return max((end or now) - begin, 0.0)


def _end(job: Mapping[str, object], now: float) -> float | None:
    """Slurm's end_time: the expected end (start + limit, or far off when unlimited) until it ends."""
    ended = parse_iso(_text(job.get("end_time")))
    if ended:
        return ended
    begin = _start(job)
    if not begin:
        return None
    limit = job.get("time_limit_s")
    return begin + (_int(limit) // 60) * 60 if limit is not None else begin + YEAR_SECONDS


def _secs(seconds: float) -> str:
    """Slurm's _print_secs: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`; INVALID below 0 or past a year."""
    total = int(seconds)
    if total < 0 or total > YEAR_SECONDS:
        return "INVALID"
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def _time(epoch: float | None) -> str:
    return local_time(epoch) if epoch else "N/A"


def mem_size(mb: int) -> str:
    """squeue's MIN_MEMORY (convert_num_unit, exact): divided by 1024 while it stays a multiple of 512,
    so 1024 is `1G`, 1536 `1.50G`, 1000 `1000M`."""
    if not mb:
        return "0"
    value = float(mb)
    units = "MGTP"
    unit = 0
    while value >= 1024 and int(value) % 512 == 0 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{int(value)}{units[unit]}" if value == int(value) else f"{value:.2f}{units[unit]}"


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None

