"""Turning what frameworks hand a logger into what a corral run stores."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any


def as_number(value: Any) -> float | None:
    """A plain float for numbers, one-element tensors and numpy scalars; None for anything else."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)  # torch.Tensor, numpy arrays and scalars
    if not callable(item):
        return None
    try:
        number = item()  # raises for more than one element
    except (TypeError, ValueError, RuntimeError):
        return None
    return None if isinstance(number, bool) or not isinstance(number, numbers.Real) else float(number)


def numbers_only(values: Mapping[str, Any]) -> dict[str, float]:
    """The entries that are numbers (NaN and infinities included: the server stores them)."""
    out = {}
    for key, value in values.items():
        number = as_number(value)
        if number is not None:
            out[str(key)] = number
    return out


def jsonable(value: Any, depth: int = 0) -> Any:
    """`value` as JSON can carry it: containers kept, numbers as numbers, anything else as its str."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth > 8:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in value]
    number = as_number(value)
    if number is not None:
        return jsonable(number)
    if callable(value):
        return getattr(value, "__qualname__", None) or getattr(value, "__name__", None) or str(value)
    return str(value)
