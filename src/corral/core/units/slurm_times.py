"""Times as Slurm's commands take them (`sacct -S/-E`, `sbatch --begin`): `2026-11-24T08:00[:00]`,
`2026-11-24`, `08:00[:00]` (today), `MM/DD[/YY]`, `now`, `now-2hours`, `now+30`, `today`, `midnight`,
`noon`, `tomorrow`; in the machine's local time, as epoch seconds. Pure: the clock is `now`, a parameter
(the server's, for `--begin` and `--deadline`; the caller's, for sacct's -S/-E). It imports only `time`: Slurm's
commands on corral read their times here too, and must start as fast as Slurm's."""

from __future__ import annotations

import time

_UNITS = {"": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "mins": 60,
          "minute": 60, "minutes": 60, "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400,
          "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}


def parse_time(text: str, now: float, *, next_occurrence: bool = False) -> float:
    """Epoch seconds; raises ValueError naming the text when it is none of Slurm's forms.

    `next_occurrence`: a time of day alone that has passed today means tomorrow's (as sbatch's --begin
    and --deadline read `16:00`); sacct's -S/-E mean today's.
    """
    spec = text.strip().lower()
    today = _midnight(now)
    if spec.startswith("now"):
        return now + _offset(spec[3:], text)
    named = {"today": today, "midnight": today, "noon": today + 12 * 3600, "tomorrow": today + 86400,
             "elevenses": today + 11 * 3600, "fika": today + 15 * 3600, "teatime": today + 16 * 3600}
    if spec in named:
        return named[spec]
    date, _, clock = spec.partition("t")
    if ":" in date and not clock:  # a time of day alone: today
        moment = _at(time.localtime(now)[:3], date, text)
        if next_occurrence and moment < now:
            moment = _at(time.localtime(now + 86400)[:3], date, text)
        return moment
    if "-" in date:
        parts = date.split("-")
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            return _at((int(parts[0]), int(parts[1]), int(parts[2])), clock, text)
    if "/" in date and not clock:
        parts = date.split("/")
        if 2 <= len(parts) <= 3 and all(p.isdigit() for p in parts):
            year = time.localtime(now).tm_year if len(parts) == 2 else int(parts[2]) + (2000 if len(parts[2]) <= 2 else 0)
            return _at((year, int(parts[0]), int(parts[1])), "", text)
    raise ValueError(f"Invalid time specification: {text}")


def _offset(rest: str, text: str) -> float:
    if not rest:
        return 0.0
    sign = {"+": 1, "-": -1}.get(rest[0])
    digits = rest[1:]
    count = ""
    while digits and digits[0].isdigit():
        count, digits = count + digits[0], digits[1:]
    if sign is None or not count or digits not in _UNITS:
        raise ValueError(f"Invalid time specification: {text}")
    return sign * int(count) * _UNITS[digits]


def _at(day: tuple[int, int, int], clock: str, text: str) -> float:
    fields = clock.split(":") if clock else []
    if len(fields) > 3 or not all(f.isdigit() for f in fields) or (fields and len(fields) < 2):
        raise ValueError(f"Invalid time specification: {text}")
    hour, minute, second = ([int(f) for f in fields] + [0, 0, 0])[:3]
    if not (1 <= day[1] <= 12 and 1 <= day[2] <= 31 and hour < 24 and minute < 60 and second < 61):
        raise ValueError(f"Invalid time specification: {text}")
    return time.mktime((day[0], day[1], day[2], hour, minute, second, 0, 0, -1))


def _midnight(now: float) -> float:
    local = time.localtime(now)
    return time.mktime((local.tm_year, local.tm_mon, local.tm_mday, 0, 0, 0, 0, 0, -1))
