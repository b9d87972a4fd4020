"""NaN and the infinities in JSON, which has no such numbers: the strings "NaN", "Infinity" and
"-Infinity", as the run series, the tools and alert payloads write them."""

from __future__ import annotations

import math
from typing import TypeVar

T = TypeVar("T")


def json_number(value: float | T) -> float | str | T:
    """`value` with a non-finite float written as "NaN", "Infinity" or "-Infinity"; anything else as it is."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value
