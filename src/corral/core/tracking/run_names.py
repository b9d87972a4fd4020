"""Readable default names for runs started without one.

A run among others of its project is named by the config values that set it apart from the run
nearest to it (the recent one it differs from least: `lr=0.0003 bs=64`), which is what one would
have typed; a run with nothing apart (the first of its project, or a repeat) gets an adjective-noun
pair and its number in the project (`calm-heron-3`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

MAX_KEYS = 3
MAX_NAME = 120
ADJECTIVES = ("amber", "brisk", "calm", "clever", "crisp", "daring", "eager", "gentle", "golden", "hardy", "keen",
              "lively", "lucky", "mellow", "nimble", "proud", "quiet", "rapid", "silver", "steady", "sunny", "swift",
              "tidy", "vivid", "witty", "young", "bold", "bright", "cosmic", "fresh")
NOUNS = ("badger", "bison", "crane", "dolphin", "falcon", "ferret", "gecko", "heron", "ibis", "jaguar", "koala",
         "lemur", "lynx", "marten", "moose", "newt", "otter", "panda", "puffin", "quail", "raven", "salmon", "seal",
         "sparrow", "tapir", "tiger", "walrus", "wombat", "yak", "zebra")


def default_name(config: Mapping[str, Any], others: Sequence[Mapping[str, Any]], *, seed: str, number: int) -> str:
    """The name of a new run with `config`, among the `others` (recent configs of its project).

    Args:
        seed: chooses the pair (the run's uid: the same run, the same name).
        number: the run's number in its project (1 for its first).
    """
    differing = differing_keys(config, others)
    if differing:
        name = " ".join(f"{key}={_short(config[key])}" for key in differing[:MAX_KEYS])
        if len(name) <= MAX_NAME:
            return name
    digest = hashlib.sha256(seed.encode()).digest()
    return f"{ADJECTIVES[digest[0] % len(ADJECTIVES)]}-{NOUNS[digest[1] % len(NOUNS)]}-{number}"


def differing_keys(config: Mapping[str, Any], others: Sequence[Mapping[str, Any]]) -> list[str]:
    """The top-level scalar keys of `config` whose values the nearest of `others` (newest first; the
    one with the fewest such keys, the newest of those) does not share, in config order."""
    nearest: list[str] | None = None
    for other in others:
        keys = [key for key, value in config.items()
                if not isinstance(value, (dict, list)) and value is not None and other.get(key) != value]
        if nearest is None or len(keys) < len(nearest):
            nearest = keys
    return nearest or []


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= 24 else text[:23] + "…"
