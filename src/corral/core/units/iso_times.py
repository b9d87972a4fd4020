"""Epoch seconds as ISO 8601 UTC text, the one way corral writes a time for people and clients:
`2027-01-15T08:00:00Z`, or with milliseconds where jobs and their events carry them; and back."""

from __future__ import annotations

import datetime as dt
from typing import Any, overload


@overload
def iso_utc(ts: float, *, milliseconds: bool = False) -> str: ...
@overload
def iso_utc(ts: None, *, milliseconds: bool = False) -> None: ...
@overload
def iso_utc(ts: float | None, *, milliseconds: bool = False) -> str | None: ...


def iso_utc(ts: float | None, *, milliseconds: bool = False) -> str | None:
    """`ts` as ISO 8601 UTC to the second (`2027-01-15T08:00:00Z`), or to the millisecond
    (`2027-01-15T08:00:00.123Z`); None stays None."""
    if ts is None:
        return None
    moment = dt.datetime.fromtimestamp(float(ts), dt.timezone.utc)
    return moment.isoformat(timespec="milliseconds" if milliseconds else "seconds").replace("+00:00", "Z")


def epoch_seconds(value: Any) -> float | None:
    """Epoch seconds from the API's ISO time (`2024-06-11T14:02:17.123Z`) or a number; None stays None."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
