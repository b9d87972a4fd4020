"""Moments in time as people write them in queries: `-30m`, `now`, ISO 8601, epoch seconds."""

from __future__ import annotations

import datetime as dt
import math
import re

from corral.errors import InvalidRequest

_RELATIVE = re.compile(r"^-\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_moment(text: str | float | int | None, now: float, *, field: str) -> float | None:
    """Epoch seconds for `-30m`/`-2h`/`-1d` (before `now`), `now`, an ISO 8601 time (UTC unless it
    says otherwise) or epoch seconds; None for None or "".

    Raises:
        InvalidRequest: `field`, with the forms that are understood.
    """
    if text is None or text == "":
        return None
    bad = InvalidRequest(field, f"cannot read {text!r} as a time",
                         "write -30m, -2h, -1d, now, 2026-11-21T10:00:00Z or epoch seconds")
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if not math.isfinite(text):
            raise bad
        return float(text)
    raw = str(text).strip()
    if raw.lower() == "now":
        return now
    relative = _RELATIVE.match(raw)
    if relative:
        return now - float(relative.group(1)) * _UNIT_S[relative.group(2).lower()]
    try:
        number = float(raw)
    except ValueError:
        pass
    else:
        if not math.isfinite(number):
            raise bad
        return number
    try:
        moment = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise bad from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.timestamp()
