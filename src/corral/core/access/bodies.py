"""Checks on a request body before any model sees it: hostile JSON is refused at the door with a 422.

JSON that is valid can still break what reads it: `[` x 200,000 makes `json.loads` raise
RecursionError, a config nested 900 deep breaks every recursive walk after it, a lone UTF-16
surrogate (`"\\ud800"`) cannot be written as UTF-8 (the database, the log, the response all
fail on it later, for every reader), NUL cannot be stored in PostgreSQL text, and an integer of
5,000 digits overflows every column and even Python's `int()`. `decode_json` refuses all of them,
naming the path of the value at fault (`config.a.a`, `command[1]`):

- nesting: a scan of the raw bytes (C-speed, brackets inside strings ignored) before `json.loads`,
  so the parser never recurses deeper than `MAX_DEPTH`;
- strings (keys too): no lone surrogate, no NUL;
- integers: at most `MAX_INT_DIGITS` digits (a 64-bit column holds 18 digits safely).

`check_text` is the field-level rule for names and labels that people read in a terminal: no
control characters (C0, DEL, C1) and no bidirectional overrides or isolates, which make a name
display as something it is not.

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from corral.errors import InvalidRequest

MAX_DEPTH = 64
MAX_INT_DIGITS = 18
_LOCATE_TOKENS = 1_000_000  # how far the path of a too-deep value is looked for before naming just "body"

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]', re.DOTALL)
_OPEN_CLOSE = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_BAD_IN_STRING = re.compile("[\x00\ud800-\udfff]")
# Where bytes are allowed: U+DC80-U+DCFF is how Python (os.environ, surrogateescape) holds a byte that is
# not UTF-8, and the job gets that byte back; any other lone surrogate has no meaning anywhere.
_BAD_IN_BYTES = re.compile("[\x00\ud800-\udc7f\udd00-\udfff]")
# C0 controls, DEL, C1 controls; LRM, RLM, ALM; line and paragraph separators; bidi embeddings,
# overrides and isolates (U+202A-202E, U+2066-2069); lone surrogates.
_NOT_PRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


class _LongInteger(str):
    """An integer literal with too many digits, kept as text until the walk names where it was."""


def decode_json(raw: bytes | str, *, bytes_in: Collection[str] = ()) -> Any:
    """Parse a request body, refusing what would break the code after it.

    `bytes_in`: top-level fields whose strings may carry bytes that are not UTF-8 (a submitter's
    environment: never shown, handed to the job as the bytes it was).

    Raises:
        InvalidRequest: naming the path of the value at fault (or `body` for JSON that is not valid).
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    check_depth(data)
    long_integers: list[str] = []

    def integer(text: str) -> int | _LongInteger:
        if len(text) - text.startswith("-") > MAX_INT_DIGITS:
            long_integers.append(text)
            return _LongInteger(text)
        return int(text)

    try:
        # decoded here, as UTF-8 (RFC 8259): json.loads would take UTF-16 and UTF-32 bytes too, and the
        # checks on the bytes above and below would not see what they hold
        value = json.loads(data.decode("utf-8", "surrogatepass"), parse_int=integer)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise InvalidRequest("body", f"is not valid JSON ({exc})", 'send a JSON object such as {"command": ["true"]}') from None
    # the walk only where it can find something: an escape (\ud800, \u0000), a surrogate's UTF-8
    # bytes (json.loads reads bytes with surrogatepass), or a long integer
    if long_integers or b"\\u" in data or b"\xed" in data:
        check_values(value, bytes_in=bytes_in)
    return value


def check_depth(raw: bytes | str, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON nested deeper than `limit`, without parsing it.

    Raises:
        InvalidRequest: naming the path where it got too deep.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") <= limit:
        return  # the common case: too few brackets to be deep
    # outside strings only: without escaped quotes, every other piece between quotes is outside
    outside = b"".join(data.split(b'"')[::2]) if b'\\"' not in data else _STRING.sub(b"", data)
    brackets = outside.translate(_OPEN_CLOSE, _NOT_BRACKET)
    for _ in range(limit):
        brackets = brackets.replace(b"[]", b"")  # each round removes the innermost level
        if not brackets:
            return
    path = _deep_path(data, limit)
    if path is not None:
        field = re.split(r"[.\[]", path, maxsplit=1)[0] or "body"
        raise InvalidRequest(field, f"is nested more than {limit} levels deep, at {_shorten(path, 80)}",
                             f"send at most {limit} levels of lists and objects")
    # unbalanced brackets and never deeper than the limit: not JSON, json.loads says where


def _deep_path(data: bytes, limit: int) -> str | None:
    """The path of the first container deeper than `limit`; "body" when the scan gives up; None if never."""
    stack: list[list[Any]] = []  # [kind, key or index]
    last_string: bytes | None = None
    for count, match in enumerate(_TOKEN.finditer(data)):
        if count > _LOCATE_TOKENS:
            return "body"
        token = match.group()
        if token in (b"[", b"{"):
            if stack and stack[-1][0] == "{" and last_string is not None:
                stack[-1][1] = _key_text(last_string)
            stack.append([token.decode(), 0 if token == b"[" else None])
            if len(stack) > limit:
                return _path(stack[:-1])
            last_string = None
        elif token in (b"]", b"}"):
            if stack:
                stack.pop()
            last_string = None
        elif token == b",":
            if stack and stack[-1][0] == "[":
                stack[-1][1] += 1
            last_string = None
        elif stack and stack[-1][0] == "{" and last_string is None:
            last_string = token  # a key (the value after it would be the second string)
    return None


def _key_text(token: bytes) -> str:
    try:
        return str(json.loads(token))
    except ValueError:
        return token.decode("utf-8", "replace")[1:-1]


def _path(stack: list[list[Any]]) -> str:
    text = ""
    for kind, key in stack:
        if kind == "[":
            text += f"[{key}]"
        else:
            text += f".{key}" if text else str(key)
    return text or "body"


def _shorten(path: str, limit: int = 120) -> str:
    return path if len(path) <= limit else f"{path[:limit // 2]}...{path[-(limit // 2 - 10):]}"


def check_values(value: Any, *, bytes_in: Collection[str] = ()) -> None:
    """Refuse lone surrogates and NUL in strings (and keys) and integers of too many digits.

    Raises:
        InvalidRequest: naming the path of the value.
    """
    todo: list[tuple[str, Any, re.Pattern[str]]] = [("", value, _BAD_IN_STRING)]
    while todo:
        path, item, bad = todo.pop()
        if isinstance(item, _LongInteger):
            raise InvalidRequest(_shorten(path or "body"), f"{item[:20]}... has {len(item.lstrip('-'))} digits",
                                 f"numbers here have at most {MAX_INT_DIGITS} digits")
        if isinstance(item, str):
            _check_string(item, path or "body", bad)
        elif isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{path}.{key}" if path else str(key)
                _check_string(key, path or "body", bad)
                todo.append((child_path, child, _BAD_IN_BYTES if not path and key in bytes_in else bad))
        elif isinstance(item, list):
            todo.extend((f"{path}[{i}]", child, bad) for i, child in enumerate(item))


def _check_string(text: str, path: str, refused: re.Pattern[str] = _BAD_IN_STRING) -> None:
    bad = refused.search(text)
    if bad is None:
        return
    path = _shorten(path)
    if bad.group() == "\x00":
        raise InvalidRequest(path, "contains a NUL character", "send text without \\u0000")
    raise InvalidRequest(path, f"contains a lone UTF-16 surrogate (U+{ord(bad.group()):04X}) at character {bad.start()}",
                         "send valid Unicode: a surrogate must come in a high-low pair")


def first_unprintable(text: str, allowed: str = "") -> int | None:
    """Where `text` has a control character, bidi override or lone surrogate not in `allowed`; None: nowhere."""
    for bad in _NOT_PRINTABLE.finditer(text):
        if bad.group() not in allowed:
            return bad.start()
    return None


def check_text(value: str, field: str) -> str:
    """A name or label that a terminal shows as it is: no control characters, no bidi overrides.

    Raises:
        InvalidRequest: naming the field and the character.
    """
    bad = _NOT_PRINTABLE.search(value)
    if bad is not None:
        raise InvalidRequest(field, f"contains the unprintable character U+{ord(bad.group()):04X} at {bad.start()}",
                             "use printable text: no control characters, newlines or bidirectional overrides")
    return value
