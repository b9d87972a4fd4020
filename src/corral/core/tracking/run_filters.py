"""Run search expressions: `config.lr=0.1`, `config.model.depth>=4`, `metric.loss.min<0.2`."""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from corral.errors import InvalidRequest

_EXPR = re.compile(r"^(config|metric)\.([^<>=!]+?)\s*(<=|>=|!=|==|=|<|>)\s*(.*)$", re.S)
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge,
}
METRIC_STATS = ("last", "min", "max")
_HINT = "write config.KEY OP VALUE or metric.KEY[.last|.min|.max] OP NUMBER, with OP one of = != < <= > >="


@dataclass(frozen=True)
class RunFilter:
    scope: str  # "config" or "metric"
    path: tuple[str, ...]  # config: the nested keys; metric: (key,)
    stat: str  # metrics: last, min or max
    op: str
    value: Any

    def compare(self, actual: Any) -> bool:
        return _compare(actual, self.op, self.value)

    def matches_config(self, config: Mapping[str, Any]) -> bool:
        value: Any = config
        for part in self.path:
            if not isinstance(value, Mapping) or part not in value:
                return False
            value = value[part]
        return self.compare(value)


def parse_filter(expr: str) -> RunFilter:
    """Parse one `where` expression.

    Raises:
        InvalidRequest: names `where` and shows the accepted form.
    """
    match = _EXPR.match(expr.strip())
    if not match:
        raise InvalidRequest("where", f"cannot read {expr!r}", _HINT)
    scope, name, op, raw = match.groups()
    op = "=" if op == "==" else op
    value = _literal(raw.strip())
    if scope == "config":
        path = tuple(name.split("."))
        if not all(path):
            raise InvalidRequest("where", f"{expr!r} has an empty key", _HINT)
        return RunFilter("config", path, "", op, value)
    key, stat = name, "last"
    head, _, tail = name.rpartition(".")
    if head and tail in METRIC_STATS:
        key, stat = head, tail
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise InvalidRequest("where", f"{expr!r} compares a metric with {raw.strip()!r}, not a number", _HINT)
    return RunFilter("metric", (key,), stat, op, float(value))


def _literal(text: str) -> Any:
    """A number, true/false/null, a quoted string, or else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _compare(actual: Any, op: str, expected: Any) -> bool:
    numeric = (int, float)
    if isinstance(actual, numeric) and not isinstance(actual, bool) and isinstance(expected, numeric) and not isinstance(expected, bool):
        return _OPS[op](actual, expected)
    if op in ("=", "!="):
        # True == 1 in Python, but a flag is not a count: equal only if both or neither are booleans
        same = (isinstance(actual, bool) == isinstance(expected, bool) and actual == expected) or (isinstance(expected, str) and not isinstance(actual, str)
                                      and json.dumps(actual) == expected)
        return same if op == "=" else not same
    if isinstance(actual, str) and isinstance(expected, str):
        return _OPS[op](actual, expected)
    return False
