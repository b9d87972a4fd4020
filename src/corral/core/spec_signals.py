"""A job spec's warning signal: sbatch's --signal, read into a signal number and a lead time."""

from __future__ import annotations

from typing import Any

from corral.core.units import is_number
from corral.errors import InvalidRequest


def parse_signal(text: str) -> tuple[int, int]:
    """sbatch's --signal=[B:]SIG[@SECONDS] -> (signal number, seconds before the time limit; 60 by default).

    Raises:
        InvalidRequest: an unknown signal or a bad time.
    """
    import signal as signals

    body = text.strip()
    if body[:2] in ("B:", "R:"):
        body = body[2:]
    name, _, when = body.partition("@")
    hint = "write e.g. USR1@90, TERM@120 or 10@60"
    if is_number(name):
        number = int(name)
    else:
        upper = name.upper()
        member = getattr(signals, upper if upper.startswith("SIG") else f"SIG{upper}", None)
        if not isinstance(member, signals.Signals):
            raise InvalidRequest("signal", f"unknown signal {name!r}", hint)
        number = int(member)
    if not 1 <= number <= 64 or number == signals.SIGKILL:
        raise InvalidRequest("signal", f"{name!r} cannot be sent as a warning", hint)
    if when and not is_number(when):
        raise InvalidRequest("signal", f"{when!r} is not a number of seconds", hint)
    seconds = int(when) if when else 60
    if seconds > 65535:
        raise InvalidRequest("signal", "the warning can come at most 65535 s before the limit", hint)
    return number, seconds


def signal_text(value: Any) -> str | None:
    """The --signal text, checked and stripped; None if not given."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("signal", f"must be text such as USR1@90, got {value!r}")
    parse_signal(value)
    return value.strip()
