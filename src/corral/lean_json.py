"""JSON through the interpreter's C scanner and string encoder (`_json`), which are what the `json`
package itself runs on, for what every CLI call reads and writes (the home's address file, one request):
the package's Python layer imports `re` and `enum` on the way, a quarter of what a command may cost
beyond the interpreter's own start."""

from __future__ import annotations

import _json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _Context:
    """What `_json.make_scanner` reads: the settings of `json.JSONDecoder()`."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__
    memo: dict[str, str] = {}


_scan = _json.make_scanner(_Context())  # type: ignore[arg-type]  # the stub names the class, the C code reads attributes
_WHITESPACE = " \t\n\r"


def loads(data: bytes | str) -> Any:
    """The value of one JSON document; ValueError when it is not one."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration as stop:
        raise ValueError(f"not JSON at character {stop.value}") from None
    if text[end:].strip(_WHITESPACE):
        raise ValueError(f"extra data after the JSON value at character {end}")
    return value


def dumps(value: Any) -> str:
    """`value` (dicts with string keys, lists, tuples, strings, numbers, booleans, None) as JSON text."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: Any, parts: list[str]) -> None:
    if isinstance(value, str):
        parts.append(_json.encode_basestring_ascii(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("JSON has no NaN or infinity")
        parts.append(float.__repr__(value))
    elif isinstance(value, dict):
        parts.append("{")
        for i, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise TypeError(f"JSON keys are strings, not {type(key).__name__}")
            parts.append(("," if i else "") + _json.encode_basestring_ascii(key) + ":")
            _write(item, parts)
        parts.append("}")
    elif isinstance(value, (list, tuple)):
        parts.append("[")
        for i, item in enumerate(value):
            if i:
                parts.append(",")
            _write(item, parts)
        parts.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")


def pretty(value: Any) -> str:
    """`json.dumps(value, indent=2)`, byte for byte (what `--json` prints), without the `json` package."""
    parts: list[str] = []
    _pretty(value, parts, "\n")
    return "".join(parts)


def _pretty(value: Any, parts: list[str], newline: str) -> None:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        parts.append("NaN" if value != value else ("Infinity" if value > 0 else "-Infinity"))  # as json.dumps
    elif isinstance(value, dict) and value:
        inner = newline + "  "
        parts.append("{")
        for i, (key, item) in enumerate(value.items()):
            parts.append(("," if i else "") + inner + _json.encode_basestring_ascii(_key(key)) + ": ")
            _pretty(item, parts, inner)
        parts.append(newline + "}")
    elif isinstance(value, (list, tuple)) and value:
        inner = newline + "  "
        parts.append("[")
        for i, item in enumerate(value):
            parts.append(("," if i else "") + inner)
            _pretty(item, parts, inner)
        parts.append(newline + "]")
    else:
        _write(value, parts)


def _key(key: object) -> str:
    """A mapping's key as json.dumps writes it: strings as they are, numbers, booleans and None as JSON text."""
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, (int, float)):
        return repr(key) if isinstance(key, int) else float.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
