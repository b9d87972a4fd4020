"""The boundary where squeue's, sacct's and sbatch's text becomes corral's types; no I/O."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Collection, Iterator
from typing import NamedTuple

from corral.core.jobspec.arrays import parse_array
from corral.core.jobspec.job import Outcome
from corral.core.jobspec.states import JobState
from corral.errors import InvalidRequest

log = logging.getLogger("corral.slurm")

SEP = "\x1f"
"""Field separator: an unprintable character no job name, reason or node list contains."""

SQUEUE_FIELDS = ("%i", "%A", "%F", "%K", "%T", "%r", "%N", "%S", "%M")
"""Job id as Slurm names it (`123`, `123_4`, `123_[4-9%2]`), its own id, array job id, array task id(s),
long state, reason, nodes, start (expected start while pending), time used. No width: no padding."""
SQUEUE_FORMAT = SEP.join(SQUEUE_FIELDS)
SQUEUE_ARGS = ("--noheader", "--all", f"--format={SQUEUE_FORMAT}")
"""squeue's options; the caller adds `--jobs=...` or `--me`."""

SQUEUE_ENDED_FIELDS = ("JobID", "ArrayJobID", "ArrayTaskID", "State", "exit_code", "StartTime", "EndTime",
                       "TimeUsed", "NodeList")
SQUEUE_ENDED_ARGS = ("--noheader", "--all", "--states=all",
                     "--Format=" + ",".join(f"{f}:{SEP}" for f in SQUEUE_ENDED_FIELDS[:-1]) + f",{SQUEUE_ENDED_FIELDS[-1]}:")
"""squeue's options for jobs that ended too (kept MinJobAge): no job name, no text of its owner's, among them.
The caller adds `--user=...`."""

SACCT_FIELDS = ("JobID", "JobIDRaw", "State", "ExitCode", "Start", "End", "Elapsed", "NodeList")
SACCT_ARGS = ("--parsable2", "--noheader", f"--delimiter={SEP}", f"--format={','.join(SACCT_FIELDS)}")
"""sacct's options; the caller adds `--jobs=...` (and `--starttime` for jobs older than today)."""

SLURM_ENV = {"SLURM_TIME_FORMAT": "standard", "SLURM_BITSTR_LEN": "0"}
"""Set for squeue and sacct: ISO times whatever the user's settings, and array ranges never cut at 64 bytes."""

# One table, SkyPilot-style: every Slurm job state (squeue's and sacct's) and what corral calls it.
_STATES = {
    "PENDING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,  # requeued: waits to start again
    "REQUEUE_FED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "SPECIAL_EXIT": JobState.PENDING,  # requeued and held after a special exit code
    "RUNNING": JobState.RUNNING,
    "CONFIGURING": JobState.RUNNING,  # resources allocated, nodes booting
    "COMPLETING": JobState.RUNNING,  # still cleaning up; its outcome is not final yet
    "STAGE_OUT": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    # Suspended or stopped jobs keep their allocation and resume later: not pending, not ended.
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "LAUNCH_FAILED": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,  # a federation sibling ran it instead
    "TIMEOUT": JobState.TIMEOUT,
    "DEADLINE": JobState.TIMEOUT,  # its --deadline passed: out of time, as corral sees it
    "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "NODE_FAIL": JobState.NODE_FAIL,
    "BOOT_FAIL": JobState.NODE_FAIL,  # the node failed to boot for it
    "PREEMPTED": JobState.PREEMPTED,  # see map_state
}
_NO_VALUE = frozenset({"", "None", "NONE", "(null)", "N/A", "n/a", "Unknown", "None assigned", "INVALID"})


class SqueueRow(NamedTuple):
    job_id: str
    """As Slurm names it: `123`, a task `123_4`, or an array's pending tasks `123_[4-9%2]`."""
    raw_id: int
    """Slurm's own id for this record (a task's own; for pending tasks, the array's)."""
    array_job_id: int | None
    array_task_ids: tuple[int, ...]
    """() for a plain job; one task; or every pending task of a range row."""
    slurm_state: str
    state: JobState
    reason: str | None
    node: str | None
    start_time: float | None
    """When it started; while pending, when Slurm expects it to start."""
    time_used_s: int | None

    @property
    def is_range(self) -> bool:
        """One row for several pending tasks of an array."""
        return "[" in self.job_id

    @property
    def settling(self) -> bool:
        """Its processes are gone but Slurm is still cleaning up (COMPLETING): how it ended is not final
        yet, and accounting has it soon."""
        return self.slurm_state.startswith("COMPLETING")


class SacctRow(NamedTuple):
    job_id: str
    """As Slurm names it: `123`, `123_4` or `123_[1-3]`."""
    raw_id: int
    array_job_id: int | None
    array_task_ids: tuple[int, ...]
    slurm_state: str
    """Slurm's whole text, such as `CANCELLED by 1000`."""
    state: JobState
    exit_code: int | None
    signal: int | None
    start_time: float | None
    end_time: float | None
    elapsed_s: int | None
    node: str | None


def map_state(slurm_state: str, *, requeue: bool = True) -> JobState:
    """Slurm's state (`RUNNING`, `CANCELLED by 0`, `COMPLETING+`) as a corral JobState.

    Args:
        requeue: the job was submitted with --requeue. Then PREEMPTED is a pause (Slurm queues it again);
            without, it is the end, and FAILED is the closest ending corral has.
    """
    word = slurm_state.strip().split(" ", 1)[0].rstrip("+")
    state = _STATES.get(word)
    if state is None:
        # Newer Slurm versions add states; treat one as still active so the job is polled, never dropped.
        log.warning("unknown Slurm job state %r, treated as RUNNING", slurm_state)
        return JobState.RUNNING
    if state is JobState.PREEMPTED and not requeue:
        return JobState.FAILED
    return state


def split_lines(text: str, width: int, command: str) -> Iterator[tuple[str, list[str]]]:
    """(line, its stripped fields) for each line of `command`'s SEP-separated output with `width`
    fields; a line with another count is logged and skipped."""
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split(SEP)
        if len(fields) != width:
            log.warning("%s line with %d fields, expected %d: %r", command, len(fields), width, line)
            continue
        yield line, [f.strip() for f in fields]


def parse_squeue(text: str, *, requeue: bool = True) -> list[SqueueRow]:
    """Rows of `squeue` run with SQUEUE_ARGS; a line that cannot be read is logged and skipped."""
    rows = []
    for line, fields in split_lines(text, len(SQUEUE_FIELDS), "squeue"):
        job_id, raw_id, array_job_id, task_text, state, reason, nodes, start, used = fields
        try:
            is_array = task_text not in _NO_VALUE
            rows.append(SqueueRow(
                job_id=job_id,
                raw_id=int(raw_id),
                array_job_id=int(array_job_id) if is_array else None,
                array_task_ids=_task_ids(task_text) if is_array else (),
                slurm_state=state,
                state=map_state(state, requeue=requeue),
                reason=parse_reason(reason),
                node=_value(nodes),
                start_time=parse_slurm_time(start),
                time_used_s=parse_slurm_duration(used),
            ))
        except ValueError as exc:
            log.warning("cannot read squeue line %r: %s", line, exc)
    return rows


def parse_sacct(text: str, *, requeue: bool = True) -> list[SacctRow]:
    """Job rows of `sacct` run with SACCT_ARGS; step rows (`123.batch`, `123.0`) are skipped."""
    rows = []
    for line, fields in split_lines(text, len(SACCT_FIELDS), "sacct"):
        job_id, raw_id, state, exit_text, start, end, elapsed, nodes = fields
        if "." in job_id:  # a step: the job's own row says how the job ended
            continue
        try:
            array_job_id, task_ids = _array_of(job_id)
            exit_code, signal = parse_exit_code(exit_text)
            rows.append(SacctRow(
                job_id=job_id,
                raw_id=int(raw_id),
                array_job_id=array_job_id,
                array_task_ids=task_ids,
                slurm_state=state,
                state=map_state(state, requeue=requeue),
                exit_code=exit_code,
                signal=signal,
                start_time=parse_slurm_time(start),
                end_time=parse_slurm_time(end),
                elapsed_s=parse_slurm_duration(elapsed),
                node=_value(nodes),
            ))
        except ValueError as exc:
            log.warning("cannot read sacct line %r: %s", line, exc)
    return rows


def parse_squeue_ended(text: str, job_ids: Collection[str], *, requeue: bool = True) -> list[SacctRow]:
    """Lines of `squeue` run with SQUEUE_ENDED_ARGS, for these jobs (an array's id names all its tasks), read as
    sacct's rows: what a cluster without accounting still knows of a job for MinJobAge after it ends."""
    wanted = set(job_ids)
    rows = []
    for line, fields in split_lines(text, len(SQUEUE_ENDED_FIELDS), "squeue"):
        raw_text, array_text, task_text, state, status, start, end, used, nodes = fields
        is_array = task_text not in _NO_VALUE
        job_id = raw_text if not is_array else (
            f"{array_text}_{task_text}" if task_text.isdigit() else f"{array_text}_[{task_text}]")
        if not wanted & {job_id, raw_text, array_text if is_array else raw_text}:
            continue
        try:
            exit_code, signal = _from_wait_status(status)
            rows.append(SacctRow(
                job_id=job_id,
                raw_id=int(raw_text),
                array_job_id=int(array_text) if is_array else None,
                array_task_ids=_task_ids(task_text) if is_array else (),
                slurm_state=state,
                state=map_state(state, requeue=requeue),
                exit_code=exit_code,
                signal=signal,
                start_time=parse_slurm_time(start),
                end_time=parse_slurm_time(end),
                elapsed_s=parse_slurm_duration(used),
                node=_value(nodes),
            ))
        except ValueError as exc:
            log.warning("cannot read squeue line %r: %s", line, exc)
    return rows


def _from_wait_status(text: str) -> tuple[int | None, int | None]:
    """squeue's exit_code, a wait status (`512`: exit 2; `9`: killed by SIGKILL), as (exit code, signal)."""
    if not text.isdigit():
        raise ValueError(f"exit code {text!r} is not a wait status")
    status = int(text)
    signal = status & 0x7F
    return (status >> 8, None) if signal == 0 else (128 + signal, signal)


def outcome_from_sacct(row: SacctRow, *, now: float | None = None) -> Outcome:
    """How a job that Slurm reports as ended ended.

    Args:
        now: the end time to record when Slurm has none (it always has one for an ended job).

    Raises:
        ValueError: the row's job has not ended, or it has no end time and `now` was not given.
    """
    if not row.state.is_terminal():
        raise ValueError(f"job {row.job_id} has not ended: {row.slurm_state}")
    end_time = row.end_time if row.end_time is not None else now
    if end_time is None:
        raise ValueError(f"job {row.job_id} has no end time")
    # Keep what corral's state name loses: `CANCELLED by 0`, BOOT_FAIL, DEADLINE, PREEMPTED.
    error = None if row.slurm_state == row.state.value else f"Slurm: {row.slurm_state}"
    return Outcome(row.state.value, row.exit_code, row.signal, end_time, error)


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """sacct's ExitCode `code:signal` as corral's (exit code, signal): `2:0` -> (2, None), `0:15` -> (143, 15).

    A signal is reported as the shell would (128 + signal), as the local backend does. Numbers above 64
    are not signals (Slurm writes `0:125` for some kills): the code is then unknown.
    """
    code_text, _, signal_text = text.strip().partition(":")
    if not code_text.isdigit() or (signal_text and not signal_text.isdigit()):
        raise ValueError(f"exit code {text!r} is not code:signal")
    code, signal = int(code_text), int(signal_text or 0)
    if signal == 0:
        return code, None
    if signal > 64:
        return None, None
    return 128 + signal, signal


def parse_reason(text: str) -> str | None:
    """A pending reason (`Resources`, squeue's `(Resources)` form too); None when Slurm gives none."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")") and text != "(null)":
        text = text[1:-1]
    return _value(text)


def parse_slurm_time(text: str) -> float | None:
    """Slurm's `2026-11-21T08:30:00` (local time, as Slurm prints it) as a Unix time; Unknown/None/N/A -> None.

    Raises:
        ValueError: text that is neither a time nor one of Slurm's words for none.
    """
    text = text.strip()
    if text in _NO_VALUE:
        return None
    # naive, so .timestamp() reads it in this process's time zone: run squeue/sacct with the same TZ
    return dt.datetime.fromisoformat(text).timestamp()


def parse_slurm_duration(text: str) -> int | None:
    """Slurm's `M:SS`, `H:MM:SS`, `D-HH:MM:SS` (or `D-HH`, or whole minutes) in seconds; INVALID/UNLIMITED -> None.

    Raises:
        ValueError: text that is not a duration.
    """
    text = text.strip()
    if text in _NO_VALUE or text in ("UNLIMITED", "Partition_Limit", "NOT_SET"):
        return None
    days_text, has_days, rest = text.rpartition("-")
    parts = rest.split(":")
    if not all(p.isdigit() for p in parts) or len(parts) > 3 or (has_days and not days_text.isdigit()):
        raise ValueError(f"{text!r} is not a Slurm duration")
    numbers = [int(p) for p in parts]
    if has_days:  # D-HH, D-HH:MM, D-HH:MM:SS
        numbers += [0] * (3 - len(numbers))
        hours, minutes, seconds = numbers
        return int(days_text) * 86400 + hours * 3600 + minutes * 60 + seconds
    if len(numbers) == 1:  # whole minutes
        return numbers[0] * 60
    if len(numbers) == 2:  # M:SS
        return numbers[0] * 60 + numbers[1]
    return numbers[0] * 3600 + numbers[1] * 60 + numbers[2]


def parse_sbatch_id(text: str) -> int:
    """The job id that `sbatch --parsable` prints: `123` or `123;cluster`.

    Raises:
        ValueError: the output holds no job id.
    """
    first = text.strip().splitlines()[0] if text.strip() else ""
    job_id = first.split(";", 1)[0].strip()
    if not job_id.isdigit():
        raise ValueError(f"sbatch printed no job id: {text!r}")
    return int(job_id)


def _array_of(job_id: str) -> tuple[int | None, tuple[int, ...]]:
    """`123` -> (None, ()); `123_4` -> (123, (4,)); `123_[1-3,7%2]` -> (123, (1, 2, 3, 7))."""
    base, underscore, tasks = job_id.partition("_")
    if not underscore:
        int(base)  # a plain job id, or a ValueError
        return None, ()
    return int(base), _task_ids(tasks.strip("[]"))


def _task_ids(text: str) -> tuple[int, ...]:
    try:
        return parse_array(text).task_ids
    except InvalidRequest as exc:
        raise ValueError(f"array tasks {text!r}: {exc}") from None


def _value(text: str) -> str | None:
    text = text.strip()
    return None if text in _NO_VALUE else text
