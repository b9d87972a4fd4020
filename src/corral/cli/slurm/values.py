"""Slurm's spellings of job values: state codes, durations, times, sizes; from the API's job JSON.

Pure and cheap to import: only `time` (loaded with the interpreter).
"""

from __future__ import annotations

import time

from corral.core.units.units import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

# corral's states are Slurm's names; these are squeue's compact codes (squeue %t, sacct has none)
STATE_CODES = {
    "PENDING": "PD", "RUNNING": "R", "COMPLETING": "CG", "COMPLETED": "CD", "FAILED": "F", "CANCELLED": "CA",
    "TIMEOUT": "TO", "OUT_OF_MEMORY": "OOM", "NODE_FAIL": "NF", "PREEMPTED": "PR", "SUSPENDED": "S",
    "REQUEUED": "RQ", "BOOT_FAIL": "BF", "DEADLINE": "DL", "CONFIGURING": "CF",
}
CODE_STATES = {code: state for state, code in STATE_CODES.items()}
UNLIMITED = "UNLIMITED"


def state_code(state: str) -> str:
    return STATE_CODES.get(state, state[:2])


def duration(seconds: float | None, *, limit: bool = False) -> str:
    """Slurm's `[D-]HH:MM:SS` (squeue %M/%l, sacct Elapsed/Timelimit): `5:03`, `1:05:03`, `2-01:05:03`.

    `limit`: a time limit, where None is UNLIMITED; otherwise None (not started) is `0:00`.
    """
    if seconds is None and not limit:
        return "0:00"
    return format_duration(seconds)


def full_duration(seconds: float | None) -> str:
    """`HH:MM:SS` always, with `D-` past a day (sacct's Elapsed, CPUTime; scontrol's RunTime)."""
    if seconds is None:
        return "00:00:00"
    total = max(int(seconds), 0)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def parse_iso(text: str | None) -> float | None:
    """The API's ISO-8601 UTC times (`2026-11-24T23:45:01.123456+00:00` or `...Z`) as epoch seconds."""
    if not text:
        return None
    date, _, clock = text.partition("T")
    if not clock:
        return None
    for sign in ("+", "-", "Z"):
        cut = clock.find(sign)
        if cut > 0:
            offset_text, clock = clock[cut:], clock[:cut]
            break
    else:
        offset_text = ""
    whole, _, fraction = clock.partition(".")
    year, month, day = (int(part) for part in date.split("-"))
    hour, minute, second = (int(part) for part in whole.split(":"))
    offset = 0
    if offset_text and offset_text != "Z":
        hours, _, minutes = offset_text[1:].partition(":")
        offset = (int(hours) * 3600 + int(minutes or 0) * 60) * (1 if offset_text[0] == "+" else -1)
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
    return seconds + (float("0." + fraction) if fraction.isdigit() else 0.0)


def local_time(epoch: float | None, unknown: str = "Unknown") -> str:
    """Slurm's timestamps, in the machine's local time: `2026-11-24T23:45:01`; None is `unknown`."""
    if epoch is None:
        return unknown
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def size(mb: float | None, unit: str = "M") -> str:
    """A size in Slurm's style, `4000M`, `16G`: whole gigabytes as G, the rest as M; None or 0 is `0`."""
    if not mb:
        return "0"
    if unit == "M" and mb >= 1024 and mb % 1024 == 0:
        return f"{int(mb // 1024)}G"
    return f"{int(mb)}M" if mb == int(mb) else f"{mb:.2f}M"


def exit_code(code: int | None, signal: int | None) -> str:
    """sacct's and scontrol's `ExitCode=code:signal`."""
    return f"{code or 0}:{signal or 0}"


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 (Howard Hinnant's algorithm): no datetime or calendar import."""
    year -= month <= 2
    era = (year if year >= 0 else year - 399) // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def percent_fields(fmt: str) -> list[tuple[str, int, bool, str]]:
    """The `%[.][width]code` fields of a sinfo or sprio format (text before the first `%` left to the
    caller), each as (code, width, right-aligned, the text after it)."""
    fields = []
    for token in fmt.split("%")[1:]:
        if not token:
            continue
        right = token.startswith(".")
        i = 1 if right else 0
        width = 0
        while i < len(token) and token[i].isdigit():
            width = width * 10 + int(token[i])
            i += 1
        if i < len(token):
            fields.append((token[i], width, right, token[i + 1:]))
    return fields


def outside_text(processes: Iterable[Mapping[str, Any]]) -> str:
    """`in use outside corral by alice (pid 4242, 2048 MB)`: a GPU's processes that belong to no job (the API's
    `outside` of a GPU), as `corral nodes` and `scontrol show node` say it."""
    held = ", ".join(f"{p['user']} (pid {p['pid']}" + ("" if p.get("mem_mb") is None else f", {p['mem_mb']} MB") + ")"
                     for p in processes)
    return f"in use outside corral by {held}"
