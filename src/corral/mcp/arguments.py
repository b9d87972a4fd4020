"""Messages for arguments a tool cannot take: the field, what it allows, and what was given.

The SDK checks arguments against the tool's signature with pydantic; its errors are written for
Python programmers. An agent needs `gpus: must be an integer from 0 to 1024, got -1`, which is
what these functions make from the error and the tool's JSON schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

_GIVEN_CHARS = 80
_NOUNS = ("string", "integer", "number", "object", "list")


def unknown_arguments(given: Iterable[str], schema: Mapping[str, Any]) -> str | None:
    """A message naming the first argument the tool does not take, or None if all are known."""
    properties = schema.get("properties", {})
    unknown = sorted(set(given) - set(properties))
    if not unknown:
        return None
    return f"{unknown[0]}: unknown argument (this tool takes: {', '.join(properties)})"


def describe_errors(error: ValidationError, schema: Mapping[str, Any]) -> str:
    """One line per bad argument: `field: must be ..., got ...` or `field: is required (...)`."""
    messages: dict[str, str] = {}
    for item in error.errors(include_url=False):
        loc = item.get("loc") or ()
        field = str(loc[0]) if loc else "arguments"
        if field in messages:
            continue  # a union reports each branch; one line per field says it
        prop = schema.get("properties", {}).get(field, {})
        allowed = describe_schema(prop, schema.get("$defs", {}))
        if item.get("type") == "missing":
            messages[field] = f"{field}: is required ({allowed})" if allowed else f"{field}: is required"
        else:
            messages[field] = f"{field}: must be {allowed or 'valid'}, got {_given(item.get('input'))}"
    return "; ".join(messages.values())


def describe_schema(prop: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    """What a JSON schema allows, in words: `an integer from 0 to 1024`, `one of "stdout", "stderr"`."""
    if "$ref" in prop:
        return describe_schema(defs.get(str(prop["$ref"]).rsplit("/", 1)[-1], {}), defs)
    options = prop.get("anyOf") or prop.get("oneOf")
    if options:
        words = [describe_schema(option, defs) for option in options if option.get("type") != "null"]
        return " or ".join(dict.fromkeys(w for w in words if w))
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(value) for value in prop["enum"])
    kind = prop.get("type")
    if kind in ("integer", "number"):
        noun = "an integer" if kind == "integer" else "a number"
        low = prop.get("minimum", prop.get("exclusiveMinimum"))
        high = prop.get("maximum", prop.get("exclusiveMaximum"))
        if low is not None and high is not None:
            return f"{noun} from {low} to {high}"
        if low is not None:
            return f"{noun} of at least {low}"
        return f"{noun} of at most {high}" if high is not None else noun
    if kind == "string":
        limit = prop.get("maxLength")
        text = "a non-empty string" if prop.get("minLength") else "a string"
        return f"{text} of at most {limit} characters" if limit else text
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        items = describe_schema(prop.get("items", {}), defs)
        most = f"at most {prop['maxItems']} " if "maxItems" in prop else ""
        return f"a list of {most}{_plural(items)}" if items else "a list"
    if kind == "object":
        if "properties" in prop:
            return "an object with " + ", ".join(prop["properties"])
        values = prop.get("additionalProperties")
        if isinstance(values, Mapping) and values:
            return f"an object of {_plural(describe_schema(values, defs))}"
        return "an object"
    return ""


def _plural(words: str) -> str:
    """`a string` -> `strings`, `an object with a, b` -> `objects with a, b`."""
    parts = []
    for alternative in words.split(" or "):
        text = alternative.removeprefix("an ").removeprefix("a ")
        for noun in _NOUNS:
            if noun in text:
                text = text.replace(noun, f"{noun}s", 1)
                break
        parts.append(text)
    return " or ".join(parts)


def _given(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _GIVEN_CHARS else f"{text[:_GIVEN_CHARS]}…"
