"""Parsing and formatting of the sizes and durations people type (Slurm's syntax)."""

from __future__ import annotations

import math

from corral.errors import InvalidRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

# compiled on first use: `corral queue` formats with this module and must not pay for `re` (a few ms)
_MEMORY_PATTERN = r"^\s*([0-9]{1,18}(?:\.[0-9]{1,18})?)\s*([KMGTP]?)(?:I?B)?\s*$"
_MB_PER_UNIT = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}
_SUFFIX_DURATION_PATTERN = r"^\s*([0-9]{1,18}(?:\.[0-9]{1,18})?)\s*(s|sec|m|min|h|hr|d|day|days)\s*$"
_SECONDS_PER_SUFFIX = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "day": 86400, "days": 86400}
UNLIMITED = ("unlimited", "infinite", "inf")


MAX_DIGITS = 18  # what a 64-bit integer holds; Python's int() refuses more than 4,300 (a 500)


def _compiled(pattern: str) -> re.Pattern[str]:
    import re

    return re.compile(pattern, re.IGNORECASE)  # re caches what it compiled


def is_number(text: str) -> bool:
    """1 to 18 ASCII digits: str.isdigit() also takes "٣" and "²", and int() fails on 5,000 digits."""
    return 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def parse_memory_mb(value: str | int, *, field: str = "mem") -> int:
    """Megabytes from `16G`, `512M`, `1.5T` or a bare number of megabytes (Slurm's default unit).

    Raises:
        InvalidRequest: the text is not a size.
    """
    if isinstance(value, bool):
        raise InvalidRequest(field, f"expected a size like 16G or 512M, got {value!r}")
    if isinstance(value, int):
        mb = value
    else:
        match = _compiled(_MEMORY_PATTERN).match(str(value))
        if not match:
            raise InvalidRequest(field, f"cannot read {value!r:.60} as a size", "write it like 16G, 512M or 1T")
        # rounded up, as Slurm does: --mem=100K must not become 0, which means "no limit"
        mb = math.ceil(float(match.group(1)) * _MB_PER_UNIT[match.group(2).upper()])
    if mb < 0:
        raise InvalidRequest(field, f"must not be negative, got {value!r}")
    return mb


def parse_duration_s(value: str | int, *, field: str = "time") -> int | None:
    """Seconds from Slurm's time formats; None for UNLIMITED.

    Accepts `minutes`, `minutes:seconds`, `hours:minutes:seconds`, `days-hours`,
    `days-hours:minutes`, `days-hours:minutes:seconds`, and the shorthands `90s`,
    `30m`, `2h`, `1d`. A bare integer (or digit string) is minutes, as in sbatch.

    Raises:
        InvalidRequest: the text is not a duration.
    """
    if isinstance(value, bool):
        raise InvalidRequest(field, f"expected a duration like 1:00:00, got {value!r}")
    if isinstance(value, int):
        seconds = value * 60
    else:
        text = str(value).strip()
        if text.lower() in UNLIMITED:
            return None
        seconds = _parse_duration_text(text, field)
    if seconds <= 0:
        raise InvalidRequest(field, f"must be positive, got {value!r}", "use UNLIMITED for no limit")
    return seconds


def _parse_duration_text(text: str, field: str) -> int:
    suffixed = _compiled(_SUFFIX_DURATION_PATTERN).match(text)
    if suffixed:
        return round(float(suffixed.group(1)) * _SECONDS_PER_SUFFIX[suffixed.group(2).lower()])
    bad = InvalidRequest(
        field, f"cannot read {text!r:.60} as a duration", "write minutes, MM:SS, HH:MM:SS, D-HH:MM:SS, or 30m / 2h / 1d"
    )
    days = 0
    rest = text
    if "-" in text:
        day_text, rest = text.split("-", 1)
        if not is_number(day_text):
            raise bad
        days = int(day_text)
    parts = rest.split(":")
    if not all(is_number(p) for p in parts) or len(parts) > 3:
        raise bad
    numbers = [int(p) for p in parts]
    if "-" in text:
        # days-hours[:minutes[:seconds]]
        numbers += [0] * (3 - len(numbers))
        hours, minutes, seconds = numbers
    elif len(numbers) == 1:
        hours, minutes, seconds = 0, numbers[0], 0
    elif len(numbers) == 2:
        hours, minutes, seconds = 0, numbers[0], numbers[1]
    else:
        hours, minutes, seconds = numbers
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def format_duration(seconds: float | None) -> str:
    """Slurm's elapsed-time style: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`; UNLIMITED for None."""
    if seconds is None:
        return "UNLIMITED"
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def format_memory(mb: int | None) -> str:
    """`80G`, `512M`; `-` for no request."""
    if not mb:
        return "-"
    if mb % (1024 * 1024) == 0:
        return f"{mb // (1024 * 1024)}T"
    if mb % 1024 == 0:
        return f"{mb // 1024}G"
    return f"{mb}M"


def format_mb(mb: float) -> str:
    """`64 GB`, `3.1 GB`, `512 MB`: a measured size, rounded for a person to read at a glance
    (`format_memory` writes a request exactly, in Slurm's syntax)."""
    if mb >= 10 * 1024:
        return f"{mb / 1024:.0f} GB"
    if mb >= 1024:
        return f"{mb / 1024:.1f} GB"
    return f"{mb:.0f} MB"


def format_peak_mb(mb: float) -> str:
    """`0.5 MB`, `512.0 MB`, `15.74 GB`: a measured peak as seff states it (a tenth of a MB below a GB,
    hundredths of a GB above), the one figure `corral eff`, its advice and diagnosis quote."""
    if mb >= 1024:
        return f"{mb / 1024:.2f} GB"
    return f"{mb:.1f} MB"
