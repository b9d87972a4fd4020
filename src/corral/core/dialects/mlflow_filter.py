"""MLflow's search syntax, read and applied: `metrics.acc > 0.9 and params.lr = '0.1'`, `metrics.acc DESC`.

What `mlflow.search_runs(filter_string=..., order_by=[...])` sends. Pure: a filter is parsed into
clauses joined by AND (MLflow has no OR), each applied to a run's view (`RunView`: its attributes,
latest metrics, params and tags); an `order_by` into keys a sort uses. Errors are `InvalidRequest`s
on the field MLflow names (`filter`, `order_by`), which the MLflow routes answer as
INVALID_PARAMETER_VALUE, as MLflow's own server does.

The forms, as MLflow's `SearchUtils` takes them:
- `metrics.KEY OP NUMBER`, OP one of `= != < <= > >=`;
- `params.KEY OP 'TEXT'` and `tags.KEY OP 'TEXT'`, OP one of `= != LIKE ILIKE IN NOT IN`, and
  `IS NULL` / `IS NOT NULL`;
- `attributes.NAME OP VALUE` for `status`, `run_name`, `run_id`, `user_id`, `artifact_uri`,
  `lifecycle_stage` (text) and `start_time`, `end_time` (milliseconds); `run_id IN ('a', 'b')`.
A key may be quoted with backticks or double quotes (`metrics.\\`f1 score\\``, `tags."mlflow.runName"`);
entities have MLflow's aliases (`metric`, `param`, `parameter`, `tag`, `attribute`, `attr`, `run`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.errors import InvalidRequest

ENTITIES = {
    "metric": "metrics", "metrics": "metrics", "param": "params", "params": "params", "parameter": "params",
    "parameters": "params", "tag": "tags", "tags": "tags", "attribute": "attributes", "attributes": "attributes",
    "attr": "attributes", "run": "attributes",
}
NUMERIC_ATTRIBUTES = ("start_time", "end_time")
TEXT_ATTRIBUTES = ("status", "run_name", "run_id", "user_id", "artifact_uri", "lifecycle_stage")
_ATTRIBUTE_ALIASES = {"run_uuid": "run_id", "runName": "run_name", "created": "start_time", "Created": "start_time"}
_COMPARE = ("=", "!=", "<", "<=", ">", ">=")
_TEXT_OPS = ("=", "!=", "LIKE", "ILIKE", "IN", "NOT IN", "IS NULL", "IS NOT NULL")
_HINT = ("write ENTITY.KEY OP VALUE joined by AND, e.g. metrics.acc > 0.9 and params.lr = '0.1' "
         "(entities: metrics, params, tags, attributes)")
_TOKEN = re.compile(r"""
    \s*(?:
      (?P<ident>[A-Za-z_][\w]*)(?P<dot>\.)?
    | `(?P<btick>[^`]*)`
    | "(?P<dquote>[^"]*)"
    | '(?P<squote>(?:[^']|'')*)'
    | (?P<number>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))
    | (?P<op><=|>=|!=|<>|=|<|>)
    | (?P<punct>[(),])
    )""", re.X)


@dataclass(frozen=True)
class Clause:
    entity: str  # metrics, params, tags, attributes
    key: str
    op: str  # one of _COMPARE or LIKE, ILIKE, IN, NOT IN, IS NULL, IS NOT NULL
    value: Any  # a float for numbers, a str, a tuple of str for IN, None for IS [NOT] NULL


@dataclass(frozen=True)
class OrderKey:
    entity: str
    key: str
    ascending: bool


@dataclass
class RunView:
    """What a filter and an order read of one run."""

    attributes: dict[str, Any]
    metrics: dict[str, float] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def value(self, entity: str, key: str) -> Any:
        table: Mapping[str, Any] = getattr(self, entity)
        return table.get(key)


def parse_filter(text: str | None, attributes: tuple[str, ...] | None = None) -> list[Clause]:
    """The clauses of a filter string (empty: every run). `attributes`: where the names compared are
    not a run's attributes but these, written bare or as `attributes.NAME` (search_experiments' `name`).

    Raises:
        InvalidRequest: on `filter`, saying what could not be read.
    """
    if text is None or not text.strip():
        return []
    tokens = _tokens(text, "filter")
    clauses: list[Clause] = []
    i = 0
    while True:
        clause, i = _clause(tokens, i, text, attributes)
        clauses.append(clause)
        if i == len(tokens):
            return clauses
        if not (tokens[i][0] == "ident" and tokens[i][1].upper() == "AND"):
            raise InvalidRequest("filter", f"expected AND after a comparison in {text!r}", _HINT)
        i += 1


def parse_order_by(items: list[str] | None) -> list[OrderKey]:
    """`["metrics.acc DESC", "start_time"]` as keys. A bare name is an attribute.

    Raises:
        InvalidRequest: on `order_by`.
    """
    keys = []
    for item in items or []:
        if not isinstance(item, str) or not item.strip():
            raise InvalidRequest("order_by", f"{item!r} is not an order", "e.g. metrics.acc DESC or attributes.start_time")
        tokens = _tokens(item, "order_by")
        ascending = True
        if len(tokens) > 1 and tokens[-1][0] == "ident" and tokens[-1][1].upper() in ("ASC", "DESC"):
            ascending = tokens[-1][1].upper() == "ASC"
            tokens = tokens[:-1]
        entity, key, rest = _identifier(tokens, 0, item, "order_by", bare_is_attribute=True)
        if rest != len(tokens):
            raise InvalidRequest("order_by", f"cannot read {item!r}", "e.g. metrics.acc DESC or attributes.start_time ASC")
        keys.append(OrderKey(entity, key, ascending))
    return keys


def matches(clauses: list[Clause], run: RunView) -> bool:
    return all(holds(c, run.value(c.entity, c.key)) for c in clauses)


def sort_runs(runs: list[RunView], order: list[OrderKey]) -> list[RunView]:
    """Ordered as MLflow orders: by each key in turn (runs lacking a key after those that have it,
    either way), then newest first, then by run id."""
    out = sorted(runs, key=lambda r: str(r.attributes.get("run_id", "")))
    out.sort(key=lambda r: -(r.attributes.get("start_time") or 0))
    for key in reversed(order):
        present = [r for r in out if _sortable(r.value(key.entity, key.key)) is not None]
        missing = [r for r in out if _sortable(r.value(key.entity, key.key)) is None]
        present.sort(key=lambda r: _sortable(r.value(key.entity, key.key)), reverse=not key.ascending)
        out = present + missing
    return out


def _sortable(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _tokens(text: str, field_name: str) -> list[tuple[str, str, bool]]:
    """(kind, text, followed by a dot) for each token."""
    out: list[tuple[str, str, bool]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise InvalidRequest(field_name, f"cannot read {text[pos:pos + 20].strip()!r} in {text!r}", _HINT)
        kind = match.lastgroup or ""
        if kind == "dot":
            kind = "ident"
        value = match.group(kind)
        if kind == "squote":
            value = value.replace("''", "'")
        out.append((kind, value, bool(match.group("dot"))))
        pos = match.end()
    return out


def _identifier(tokens: list[tuple[str, str, bool]], i: int, text: str, field_name: str,
                bare_is_attribute: bool = False, attributes: tuple[str, ...] | None = None) -> tuple[str, str, int]:
    if i >= len(tokens) or tokens[i][0] not in ("ident", "btick", "dquote"):
        raise InvalidRequest(field_name, f"expected ENTITY.KEY in {text!r}", _HINT)
    kind, word, dotted = tokens[i]
    if kind == "ident" and dotted:
        entity = ENTITIES.get(word)
        if entity is None:
            raise InvalidRequest(field_name, f"{word!r} is not an entity",
                                 "use metrics, params, tags or attributes (datasets are not kept)")
        if i + 1 >= len(tokens) or tokens[i + 1][0] not in ("ident", "btick", "dquote"):
            raise InvalidRequest(field_name, f"{word}. needs a key in {text!r}", _HINT)
        key, i = _dotted_key(tokens, i + 1)
    elif bare_is_attribute:
        entity, key, i = "attributes", word, i + 1
    else:
        raise InvalidRequest(field_name, f"{word!r} has no entity in {text!r}", "prefix it: metrics., params., tags. or attributes.")
    if entity == "attributes":
        key = _ATTRIBUTE_ALIASES.get(key, key) if attributes is None else key
        known = attributes or NUMERIC_ATTRIBUTES + TEXT_ATTRIBUTES
        if key not in known:
            raise InvalidRequest(field_name, f"{key!r} is not an attribute here", f"use one of {', '.join(known)}")
    elif attributes is not None:
        raise InvalidRequest(field_name, f"{entity}.{key} cannot be searched here", f"compare {', '.join(attributes)}")
    return entity, key, i


def _dotted_key(tokens: list[tuple[str, str, bool]], i: int) -> tuple[str, int]:
    """A key that may itself hold dots unquoted (`params.model.depth`)."""
    parts = []
    while True:
        kind, word, dotted = tokens[i]
        parts.append(word)
        i += 1
        if not (kind == "ident" and dotted and i < len(tokens) and tokens[i][0] == "ident"):
            return ".".join(parts), i


def _clause(tokens: list[tuple[str, str, bool]], i: int, text: str,
            attributes: tuple[str, ...] | None) -> tuple[Clause, int]:
    entity, key, i = _identifier(tokens, i, text, "filter", bare_is_attribute=attributes is not None,
                                 attributes=attributes)
    op, i = _operator(tokens, i, text)
    numeric = entity == "metrics" or (entity == "attributes" and key in NUMERIC_ATTRIBUTES)
    if op in ("IS NULL", "IS NOT NULL"):
        if entity == "metrics":
            raise InvalidRequest("filter", f"{op} is not for metrics in {text!r}", "compare metrics with = != < <= > >=")
        return Clause(entity, key, op, None), i
    if numeric:
        if op not in _COMPARE:
            raise InvalidRequest("filter", f"{op} does not compare numbers ({entity}.{key}) in {text!r}",
                                 "use = != < <= > >=")
        if i >= len(tokens) or tokens[i][0] != "number":
            raise InvalidRequest("filter", f"{entity}.{key} is compared with a number in {text!r}", "e.g. metrics.acc > 0.9")
        return Clause(entity, key, op, float(tokens[i][1])), i + 1
    if op not in _TEXT_OPS:
        raise InvalidRequest("filter", f"{op} does not compare text ({entity}.{key}) in {text!r}",
                             "use = != LIKE ILIKE IN or NOT IN with a quoted value")
    if op in ("IN", "NOT IN"):
        return _tuple(tokens, i, text, entity, key, op)
    if i >= len(tokens) or tokens[i][0] not in ("squote", "dquote"):
        raise InvalidRequest("filter", f"{entity}.{key} is compared with quoted text in {text!r}",
                             f"e.g. {entity}.{key} = 'value'")
    return Clause(entity, key, op, tokens[i][1]), i + 1


def _operator(tokens: list[tuple[str, str, bool]], i: int, text: str) -> tuple[str, int]:
    if i >= len(tokens):
        raise InvalidRequest("filter", f"{text!r} ends before its operator", _HINT)
    kind, word, _ = tokens[i]
    if kind == "op":
        return ("!=" if word == "<>" else word), i + 1
    upper = [t[1].upper() if t[0] == "ident" else "" for t in tokens[i:i + 3]]
    if upper[:1] in (["LIKE"], ["ILIKE"], ["IN"]):
        return upper[0], i + 1
    if upper[:2] == ["NOT", "IN"]:
        return "NOT IN", i + 2
    if upper[:3] == ["IS", "NOT", "NULL"]:
        return "IS NOT NULL", i + 3
    if upper[:2] == ["IS", "NULL"]:
        return "IS NULL", i + 2
    raise InvalidRequest("filter", f"{word!r} is not an operator in {text!r}", _HINT)


def _tuple(tokens: list[tuple[str, str, bool]], i: int, text: str, entity: str, key: str, op: str) -> tuple[Clause, int]:
    if i >= len(tokens) or tokens[i][:2] != ("punct", "("):
        raise InvalidRequest("filter", f"{op} takes a list in {text!r}", f"e.g. {entity}.{key} {op} ('a', 'b')")
    values: list[str] = []
    i += 1
    while True:
        if i >= len(tokens) or tokens[i][0] not in ("squote", "dquote"):
            raise InvalidRequest("filter", f"{op}'s list holds quoted text in {text!r}", f"e.g. {entity}.{key} {op} ('a', 'b')")
        values.append(tokens[i][1])
        i += 1
        if i < len(tokens) and tokens[i][:2] == ("punct", ","):
            i += 1
            continue
        if i < len(tokens) and tokens[i][:2] == ("punct", ")"):
            return Clause(entity, key, op, tuple(values)), i + 1
        raise InvalidRequest("filter", f"{op}'s list is not closed in {text!r}", f"e.g. {entity}.{key} {op} ('a', 'b')")


def _like(pattern: str, flags: int = 0) -> re.Pattern[str]:
    parts = [(".*" if ch == "%" else "." if ch == "_" else re.escape(ch)) for ch in pattern]
    return re.compile("".join(parts), flags | re.S)


_NUMBER_OPS: dict[str, Callable[[float, float], bool]] = {
    "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def holds(clause: Clause, actual: Any) -> bool:
    """Whether `actual` (None: the run lacks the key) satisfies the clause."""
    op, wanted = clause.op, clause.value
    if op == "IS NULL":
        return actual is None
    if op == "IS NOT NULL":
        return actual is not None
    if actual is None:
        return False  # as in SQL: a run without the key matches no comparison, != included
    if isinstance(wanted, float):
        return _NUMBER_OPS[op](float(actual), wanted)
    text = str(actual)
    if op == "=":
        return text == wanted
    if op == "!=":
        return text != wanted
    if op == "LIKE":
        return _like(wanted).fullmatch(text) is not None
    if op == "ILIKE":
        return _like(wanted, re.I).fullmatch(text) is not None
    if op == "IN":
        return text in wanted
    return text not in wanted  # NOT IN: the only text operator left
