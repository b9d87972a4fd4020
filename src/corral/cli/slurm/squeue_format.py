"""What Slurm 22.05's `squeue` prints, from the API's job JSON: columns, widths, truncation, order.

    format_squeue(jobs, *, now, fmt=None, fmt_long=None, long=False, noheader=False, start=False,
                  array=False, sort=None, node_name="localhost", errors=None) -> str

- `jobs`: job dicts as `GET /api/v1/jobs` answers (`corral.core.jobspec.job_fields.JobFields`); a pending array's
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

from corral.cli.slurm.squeue_fields import PENDING, as_int, as_text, end_time, field_value, node_list, start_time, used_seconds
from corral.cli.slurm.values import parse_iso, state_code

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
    "restartcnt": "RESTART_CNT", "cpus-per-task": "CPUS_PER_TASK", "timemin": "TIME_MIN", "deadline": "DEADLINE",
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
    "mintime": "timemin", "deadline": "deadline",
}
# Slurm truncates every value that does not fit, except times and node lists
_UNCUT_HEADERS = frozenset("NRY")


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
    for job in rows:  # an admin's --priority stands, except while held (Slurm's priority 0)
        if job.get("fixed_priority") is not None and not job.get("held"):
            job["priority"] = job["fixed_priority"]
    if start:
        rows = [job for job in rows if job.get("state") == PENDING]
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
    started = [job for job in jobs if start_time(job)]
    never = [job for job in jobs if not start_time(job)]
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
    started = [job for job in rows if start_time(job)]
    never = [job for job in rows if not start_time(job)]
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
            newest[array_job] = max(newest.get(array_job, 0), as_int(job.get("id")))
    return sorted(jobs, key=lambda job: max(as_int(job.get("id")), newest.get(as_int(job.get("id")), 0)))




def _start_key(job: Mapping[str, object], now: float) -> float:
    begin = start_time(job) or 0.0
    return max(begin, now) if job.get("state") == PENDING else begin


def _id_key(job: Mapping[str, object], now: float) -> tuple[int, int]:
    task = job.get("array_task_id")
    if isinstance(task, int) and job.get("array_job_id") is not None:
        return as_int(job.get("array_job_id")), task
    return as_int(job.get("id")), _NO_TASK


_NO_TASK = 0xFFFFFFFE  # Slurm's NO_VAL: a job that is not a task sorts after its array's tasks

_SORT_KEYS: dict[str, Callable[[Mapping[str, object], float], Any]] = {
    "C": lambda job, now: as_int(job.get("cpus")),
    "D": lambda job, now: as_int(job.get("nodes")) or 1,
    "e": lambda job, now: end_time(job, now) or 0.0,
    "i": _id_key,
    "j": lambda job, now: str(job.get("name") or ""),
    "l": lambda job, now: _limit_minutes(job),
    "L": lambda job, now: _time_left_key(job, now),
    "m": lambda job, now: as_int(job.get("mem_mb")),
    "M": lambda job, now: used_seconds(job, now),
    "N": lambda job, now: node_list(job, "") or "",
    "p": lambda job, now: as_int(job.get("priority")),
    "Q": lambda job, now: as_int(job.get("priority")),
    "P": lambda job, now: str(job.get("partition") or ""),
    "t": lambda job, now: state_code(str(job.get("state"))),
    "T": lambda job, now: str(job.get("state")),
    "u": lambda job, now: str(job.get("user") or ""),
    "V": lambda job, now: parse_iso(as_text(job.get("submit_time"))) or 0.0,
    "y": lambda job, now: as_int(job.get("nice")),
}


def _limit_minutes(job: Mapping[str, object]) -> int:
    limit = job.get("time_limit_s")
    return 0xFFFFFFFF if limit is None else as_int(limit) // 60


def _time_left_key(job: Mapping[str, object], now: float) -> float:
    limit = job.get("time_limit_s")
    return float(0xFFFFFFFF) if limit is None else (as_int(limit) // 60) * 60 - used_seconds(job, now)


def _array_tasks(job: dict[str, object]) -> list[dict[str, object]]:
    """`-r`: a pending array's record (`12_[4-6%2]`) as one record per waiting task."""
    ref = str(job.get("ref") or "")
    head, bracket, rest = ref.partition("_[")
    if not bracket or job.get("state") != PENDING:
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
            text, cut = field_value(code, job, now, node_name)
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
