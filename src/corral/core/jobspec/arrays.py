"""Job arrays, as sbatch's --array writes them: `0-99`, `1,3,5-9`, `0-20:4`, and a throttle `%4`."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from corral.core.jobspec.states import JobState
from corral.errors import InvalidRequest

MAX_TASK_ID = 4_000_000
MAX_TASKS = 100_000
MAX_REF = 64  # characters of a job's ref (`12_[0,2,4,...+99997]`): one row of the queue, whatever the array
_RANGE = re.compile(r"^([0-9]{1,9})(?:-([0-9]{1,9})(?::([0-9]{1,9}))?)?$")


@dataclass(frozen=True, slots=True)
class ArraySpec:
    task_ids: tuple[int, ...]
    """Sorted, without repeats."""
    throttle: int | None = None
    """At most this many tasks run at once."""


def parse_array(text: str) -> ArraySpec:
    """Read sbatch's --array.

    Raises:
        InvalidRequest: naming what cannot be read and the forms that can.
    """
    hint = "write e.g. 0-99, 1,3,5-9, 0-20:4, and %4 at the end to run at most 4 at once"
    raw = str(text).strip()
    body, _, throttle_text = raw.partition("%")
    throttle = None
    if throttle_text:
        if not (throttle_text.isascii() and throttle_text.isdigit()) or not 1 <= int(throttle_text) <= MAX_TASKS:
            raise InvalidRequest("array", f"throttle {throttle_text!r} is not a number from 1 to {MAX_TASKS}", hint)
        throttle = int(throttle_text)
    ids: set[int] = set()
    for part in body.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise InvalidRequest("array", f"cannot read {part.strip()!r:.40} in {raw!r:.80}", hint)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        step = int(match.group(3)) if match.group(3) is not None else 1
        if last < first or step < 1:
            raise InvalidRequest("array", f"{part.strip()!r} is an empty range", hint)
        if last > MAX_TASK_ID:
            raise InvalidRequest("array", f"task ids go up to {MAX_TASK_ID}, got {last}")
        if (last - first) // step + 1 + len(ids) > MAX_TASKS:
            raise InvalidRequest("array", f"more than {MAX_TASKS} tasks", "split it into several arrays")
        ids.update(range(first, last + 1, step))
    return ArraySpec(tuple(sorted(ids)), throttle)


def format_ranges(task_ids: Iterable[int]) -> str:
    """`[0, 1, 2, 5, 7, 8]` -> `0-2,5,7-8` (what the queue shows for tasks not yet started)."""
    parts = []
    ids = sorted(task_ids)
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


def abbreviate_ranges(task_ids: Sequence[int], limit: int) -> str:
    """`format_ranges` of sorted ids in at most `limit` characters: the first ranges, then how many tasks
    were left out (`0,2,4,...+99997`). Reads only the ranges it could show, however long the list."""
    parts: list[tuple[str, int]] = []  # (text, tasks in it)
    length = -1
    i = 0
    while i < len(task_ids) and length <= limit:
        j = i
        while j + 1 < len(task_ids) and task_ids[j + 1] == task_ids[j] + 1:
            j += 1
        part = str(task_ids[i]) if i == j else f"{task_ids[i]}-{task_ids[j]}"
        parts.append((part, j - i + 1))
        length += len(part) + 1
        i = j + 1
    if i == len(task_ids) and length <= limit:
        return ",".join(text for text, _ in parts)
    shown = sum(count for _, count in parts)
    while True:
        tail = f"...+{len(task_ids) - shown}"
        if length + len(tail) + 1 <= limit or not parts:
            return ",".join([text for text, _ in parts] + [tail])
        text, count = parts.pop()
        length -= len(text) + 1
        shown -= count


def throttle_of(text: str) -> int | None:
    """The `%N` of an --array text already checked by parse_array (without reading its ranges)."""
    _, _, throttle = text.rpartition("%")
    return int(throttle) if "%" in text else None


@functools.lru_cache(maxsize=256)  # listings show the same few long arrays again and again
def abbreviate_array(text: str, limit: int) -> str:
    """An --array text for a listing: as it is when short, else its tasks abbreviated (`0,2,4,...+99997%4`)."""
    if len(text) <= limit:
        return text
    throttle = throttle_of(text)
    suffix = f"%{throttle}" if throttle else ""
    return abbreviate_ranges(parse_array(text).task_ids, limit - len(suffix)) + suffix


def parse_ranges(text: str) -> list[int]:
    """The inverse of format_ranges."""
    if not text:
        return []
    return list(parse_array(text).task_ids)


def array_summary(task_states: Iterable[JobState], waiting: Sequence[int]) -> dict[str, object]:
    """What an array's tasks add up to: how many, how many in each state, and those still waiting.

    Args:
        task_states: the states of the tasks that have a record.
        waiting: the task ids without a record yet (they wait in the array's place in the queue).

    Returns:
        {"tasks": total, "ended": how many ended, "states": {state: count} (waiting ones as PENDING),
        "waiting": their ids as ranges (`4-99`)}.
    """
    counts: dict[str, int] = {}
    ended = 0
    for state in task_states:
        counts[state.value] = counts.get(state.value, 0) + 1
        ended += state.is_terminal()
    if waiting:
        counts[JobState.PENDING.value] = counts.get(JobState.PENDING.value, 0) + len(waiting)
    return {"tasks": sum(counts.values()), "ended": ended, "states": counts, "waiting": format_ranges(waiting)}


def array_state(task_states: Iterable[JobState], *, cancelled: bool) -> JobState:
    """The final state of an array whose tasks have all ended.

    Args:
        task_states: the states of the tasks that got a record (started, or cancelled while waiting).
        cancelled: the array was cancelled while some of its tasks had not ended; the tasks
            never materialised then never run, so the array did not do its work.

    Returns:
        CANCELLED if it was cancelled (whatever its started tasks did: the user's word wins,
        and `afterok` on it never holds); else COMPLETED if every task completed; else FAILED if
        a task ended any other way than COMPLETED or CANCELLED; else CANCELLED.
    """
    if cancelled:
        return JobState.CANCELLED
    states = set(task_states)
    if states and states <= {JobState.COMPLETED}:
        return JobState.COMPLETED
    if states - {JobState.COMPLETED, JobState.CANCELLED}:
        return JobState.FAILED
    return JobState.CANCELLED
