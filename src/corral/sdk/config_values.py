"""A run's configuration as JSON: what `init(config=...)` and `run.log_params` accept, made safe to send."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any


def config_dict(config: Any) -> dict[str, Any]:
    """A JSON-safe dict from a dict, an argparse.Namespace, a dataclass or any object with attributes."""
    if config is None:
        return {}
    if isinstance(config, argparse.Namespace):
        config = vars(config)
    elif dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    elif not isinstance(config, Mapping):
        config = vars(config)
    return {str(k): _jsonable(v) for k, v in config.items()}


def with_sweep_values(config: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The config with a sweep task's values (`$CORRAL_SWEEP_PARAMS`, `corral.core.tracking.sweeps.task_env`) filled in
    where the script's own config does not name them: what the script parsed itself is what it ran with."""
    text = environ.get("CORRAL_SWEEP_PARAMS")
    if not text:
        return config
    try:
        values = json.loads(text)
    except ValueError:
        return config
    if not isinstance(values, dict):
        return config
    return {**{str(k): _jsonable(v) for k, v in values.items()}, **config}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy and torch scalars
        try:
            return _jsonable(value.item())
        except (TypeError, ValueError, RuntimeError):
            pass
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)
