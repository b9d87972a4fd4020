"""A job spec's warning signal: sbatch's --signal=[{R|B}:]SIG[@SECONDS], read as Slurm 22.05 reads it
(`get_signal_opts` in src/common/proc_args.c).

`B:` sends it to the batch shell alone; without it every srun step of the job gets it and the batch shell
does not. `R:` lets the job overlap a reservation with MaxStartDelay; corral's reservations have no such
delay, so it changes nothing here (the Slurm backend passes it on). Both may be given, `BR:` or `RB:`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corral.core.units.units import is_number
from corral.errors import InvalidRequest

DEFAULT_BEFORE_S = 60
MAX_BEFORE_S = 65535
_HINT = "write e.g. USR1@90, B:USR1@90 (the batch shell alone), TERM@120 or 10@60"


@dataclass(frozen=True, slots=True)
class WarningSignal:
    """What --signal asks: signal `number`, `before_s` seconds before the time limit, to the batch shell alone
    (`batch`, B:) or else to the job's steps; `reservation` is R:."""

    number: int
    before_s: int
    batch: bool = False
    reservation: bool = False


def parse_signal(text: str) -> WarningSignal:
    """sbatch's --signal=[{R|B}:]SIG[@SECONDS] (60 seconds by default).

    Raises:
        InvalidRequest: unknown flags, an unknown signal or a bad time.
    """
    import signal as signals

    body = text.strip()
    flags, colon, rest = body.partition(":")
    if colon:
        letters = flags.upper()
        if not letters or len(letters) > 2 or set(letters) - {"B", "R"} or len(set(letters)) < len(letters):
            raise InvalidRequest("signal", f"{flags!r} is not a --signal flag (B: the batch shell alone, R: may "
                                           "overlap a reservation, or BR:)", _HINT)
        body = rest
    else:
        letters = ""
    name, _, when = body.partition("@")
    if is_number(name):
        number = int(name)
    else:
        upper = name.upper()
        member = getattr(signals, upper if upper.startswith("SIG") else f"SIG{upper}", None)
        if not isinstance(member, signals.Signals):
            raise InvalidRequest("signal", f"unknown signal {name!r}", _HINT)
        number = int(member)
    if not 1 <= number <= 64 or number == signals.SIGKILL:
        raise InvalidRequest("signal", f"{name!r} cannot be sent as a warning", _HINT)
    if when and not is_number(when):
        raise InvalidRequest("signal", f"{when!r} is not a number of seconds", _HINT)
    seconds = int(when) if when else DEFAULT_BEFORE_S
    if seconds > MAX_BEFORE_S:
        raise InvalidRequest("signal", f"the warning can come at most {MAX_BEFORE_S} s before the limit", _HINT)
    return WarningSignal(number, seconds, batch="B" in letters, reservation="R" in letters)


def signal_text(value: Any) -> str | None:
    """The --signal text, checked and stripped; None if not given."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("signal", f"must be text such as USR1@90, got {value!r}")
    parse_signal(value)
    return value.strip()
