"""Node features and sbatch's --constraint over them: `nvlink`, `a100&nvlink`, `a100|h100`.

A node's features are declared by its admin (`[node] features = [...]` in config.toml); a job's
constraint says which nodes may run it. As in Slurm, `&` (AND) binds tighter than `|` (OR); Slurm's
bracketed, counted and matching-OR forms (`[a|b]`, `a*2`) choose among the nodes of a multi-node job,
which corral's one node per job cannot mean, so they are refused by name.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from corral.errors import InvalidRequest

FEATURE_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_EXAMPLES = "e.g. nvlink, a100&nvlink or a100|h100"


def parse_constraint(value: Any) -> str | None:
    """The --constraint text, checked and without spaces; None if not given or blank.

    Raises:
        InvalidRequest: field `constraint`, naming the part that cannot be read.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or len(value) > 1000:
        raise InvalidRequest("constraint", f"must be feature names joined by & or |, got {value!r:.60}", _EXAMPLES)
    text = "".join(value.split())
    for bad in "[]()*!":
        if bad in text:
            raise InvalidRequest("constraint", f"{text!r:.60}: {bad!r} (Slurm's bracketed, counted or negated "
                                 "constraints) is not supported: corral runs a job on one node",
                                 f"give feature names joined by & or |, {_EXAMPLES}")
    for name in _names(text):
        if not FEATURE_PATTERN.match(name):
            raise InvalidRequest("constraint", f"{name!r:.60} in {text!r:.60} is not a feature name", _EXAMPLES)
    return text


def satisfies(constraint: str | None, features: Collection[str]) -> bool:
    """Whether a node with `features` meets the constraint (None: any node). Names compare as written."""
    if constraint is None:
        return True
    return any(all(name in features for name in term.split("&")) for term in constraint.split("|"))


def named(constraint: str) -> set[str]:
    """Every feature a constraint names."""
    return set(_names(constraint))


def _names(text: str) -> list[str]:
    return [name for term in text.split("|") for name in term.split("&")]
