"""sbatch's when, where and who-hears fields of a job spec: --begin, --deadline, --nodelist, --exclude,
--mail-type, --mail-user, --time-min, --priority.

Each parser reads one request field and raises InvalidRequest naming it. Times are read as Slurm's
(`16:00`, `now+1hour`, `2026-12-01T08:00`, or epoch seconds from the REST API) against `now`, the
server's clock, handed in: core reads no clock.
"""

from __future__ import annotations

import math
import re
from typing import Any

from corral.core.jobspec.job_spec import MAX_TIME_S
from corral.core.units.slurm_times import parse_time
from corral.core.jobspec.spec_resources import int_in
from corral.core.units.units import parse_duration_s
from corral.errors import InvalidRequest

MAX_PRIORITY = 2**32 - 2  # Slurm's: a job's priority is a 32-bit count, NO_VAL above it
# sbatch's --mail-type values; ALL means these four (and Slurm's stage-out and invalid-dependency mails)
MAIL_TYPES = ("BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND", "TIME_LIMIT", "TIME_LIMIT_90",
              "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS")
_ALL = ("BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND")
_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_ADDRESS = re.compile(r"^[A-Za-z0-9._%+\-]{1,64}(@[A-Za-z0-9.\-]{1,189})?$")
MAX_MOMENT = 253402300799.0  # 9999-12-31T23:59:59Z: what a time can be shown as
_TIME_FORMS = "write HH:MM[:SS] (the next one), now+1hour, now+30 (seconds), YYYY-MM-DD[THH:MM[:SS]] or epoch seconds"


def moment(value: Any, field: str, now: float) -> float | None:
    """--begin or --deadline as epoch seconds, Slurm's forms read against `now`; None if not given."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value) if not isinstance(value, int) or abs(value) < 2**53 else math.inf
    elif isinstance(value, str):
        text = value.strip()
        try:
            if re.fullmatch(r"[0-9]{9,12}(\.[0-9]+)?", text):  # epoch seconds, as the REST API may send them
                seconds = float(text)
            else:
                seconds = parse_time(text, now, next_occurrence=True)
        except (ValueError, OverflowError):
            raise InvalidRequest(field, f"cannot read {text!r:.60} as a time (Invalid time specification)",
                                 _TIME_FORMS) from None
    else:
        raise InvalidRequest(field, f"must be a time, got {value!r:.60}", _TIME_FORMS)
    if not math.isfinite(seconds) or not -MAX_MOMENT <= seconds <= MAX_MOMENT:
        raise InvalidRequest(field, f"{value!r:.60} is not a time before the year 10000", _TIME_FORMS)
    return max(seconds, 0.0)  # long past is as past as 1970 (a --deadline in the past is refused by its check)


def check_window(begin: float | None, deadline: float | None, time_limit_s: int | None,
                 time_min_s: int | None, now: float) -> None:
    """Refuse a deadline the job can no longer meet (as Slurm does at submit).

    Raises:
        InvalidRequest: field `deadline`: past, before --begin, or too close for the time limit.
    """
    if deadline is None:
        return
    start = max(now, begin or now)
    if deadline <= now:
        raise InvalidRequest("deadline", "is already past (Invalid time specified)", "give a later --deadline")
    if begin is not None and begin >= deadline:
        raise InvalidRequest("deadline", "is not after --begin (Incompatible begin and deadline time specification)",
                             "give a --deadline after --begin")
    shortest = time_min_s or time_limit_s
    if shortest is not None and start + shortest > deadline:
        raise InvalidRequest(
            "deadline", f"leaves {int(deadline - start)} s from the earliest start, less than the job's "
            f"{'--time-min' if time_min_s else 'time limit'} of {shortest} s: it could not end in time",
            "give a later --deadline or a shorter --time")


def node_names(value: Any, field: str) -> tuple[str, ...]:
    """--nodelist or --exclude: node names, comma-separated (or a list); () if not given."""
    if value is None:
        return ()
    if isinstance(value, str):
        names = [n.strip() for n in value.split(",")]
    elif isinstance(value, list) and all(isinstance(n, str) for n in value):
        names = [n.strip() for n in value]
    else:
        raise InvalidRequest(field, f"must be node names, comma-separated, got {value!r:.60}", "e.g. gpu1,gpu2")
    names = [n for n in names if n]
    for name in names:
        if "[" in name or not _NODE_NAME.match(name):
            raise InvalidRequest(field, f"{name!r:.60} is not a node name",
                                 "list the names, comma-separated (hostlist ranges such as gpu[1-3] are not read)")
    return tuple(dict.fromkeys(names))


def mail_types(value: Any) -> tuple[str, ...]:
    """--mail-type: the events to mail about, ALL spelled out; () for NONE or not given."""
    if value is None:
        return ()
    if not isinstance(value, str):
        raise InvalidRequest("mail_type", f"must be text such as END,FAIL, got {value!r:.60}")
    chosen: list[str] = []
    for word in (w.strip().upper() for w in value.split(",") if w.strip()):
        if word == "NONE":
            chosen.clear()
        elif word == "ALL":
            chosen.extend(_ALL)
        elif word in MAIL_TYPES:
            chosen.append(word)
        else:
            raise InvalidRequest("mail_type", f"{word!r:.40} is not a mail type (Invalid --mail-type specification)",
                                 f"use NONE, ALL or some of {','.join(MAIL_TYPES)}")
    return tuple(dict.fromkeys(chosen))


def mail_user(value: Any) -> str | None:
    """--mail-user: an address, or a user name (the server adds its mail domain); None if not given."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or len(value) > 254 or not _ADDRESS.match(value.strip()):
        raise InvalidRequest("mail_user", f"{value!r:.60} is not a mail address", "e.g. alice@example.org")
    return value.strip()


def time_min(value: Any, time_limit_s: int | None) -> int | None:
    """--time-min in seconds (Slurm's duration forms); None if not given. At most the time limit."""
    if value is None:
        return None
    seconds = parse_duration_s(value, field="time_min")
    if seconds is None:
        return None
    if seconds > MAX_TIME_S:
        raise InvalidRequest("time_min", f"must be at most 365 days, got {seconds} s")
    if time_limit_s is not None and seconds > time_limit_s:
        raise InvalidRequest("time_min", f"{seconds} s is longer than the time limit ({time_limit_s} s)",
                             "give a --time-min no longer than --time")
    return seconds


def priority(value: Any) -> int | None:
    """--priority: a whole number from 0 (held, as Slurm's priority 0 is) upward; None if not given."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().upper() == "TOP":
        raise InvalidRequest("priority", "TOP is not supported", "give a number")
    return int_in(value, "priority", 0, MAX_PRIORITY)
