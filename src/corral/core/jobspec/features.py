"""Node features and sbatch's --constraint over them: `nvlink`, `a100&nvlink`, `a100|h100`.

A node's features are declared by its admin (`[node] features = [...]` in config.toml), and its GPU types are
features without being declared (`a100` on a node of A100s, as clusters name them: `gpu_type_features`); a job's
constraint says which nodes may run it. As in Slurm, `&` (AND) binds tighter than `|` (OR); Slurm's
bracketed, counted and matching-OR forms (`[a|b]`, `a*2`) choose among the nodes of a multi-node job,
which corral's one node per job cannot mean, so they are refused by name.

Names compare without regard to case (`A100`, `a100`), where Slurm's compare as written: whatever Slurm accepts
is accepted, and a GPU type matches as `--gpus a100:1` matches it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
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
    """Whether a node with `features` meets the constraint (None: any node). Names compare without case."""
    if constraint is None:
        return True
    folded = {feature.lower() for feature in features}
    return any(all(name.lower() in folded for name in term.split("&")) for term in constraint.split("|"))


def gpu_type_features(types: Mapping[int, str]) -> dict[str, frozenset[int]]:
    """A node's GPU types as the features a --constraint names them by (`A100` -> `a100`), each with its GPUs.

    Args:
        types: each GPU's type (a MIG slice's: the type of the GPU it is cut from; its profile is asked for as a
            GPU type, `--gres=gpu:3g.40gb:1`, not as a feature). An unknown one (`GPU`) names nothing.
    """
    out: dict[str, set[int]] = {}
    for index, name in types.items():
        feature = name.strip().lower().replace(" ", "-")
        if feature and feature != "gpu" and FEATURE_PATTERN.match(feature):
            out.setdefault(feature, set()).add(index)
    return {feature: frozenset(gpus) for feature, gpus in out.items()}


def named(constraint: str) -> set[str]:
    """Every feature a constraint names."""
    return set(_names(constraint))


def _names(text: str) -> list[str]:
    return [name for term in text.split("|") for name in term.split("&")]
