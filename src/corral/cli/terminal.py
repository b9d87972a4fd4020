"""Text that users wrote, made safe to print on someone's terminal.

A job's name, command, labels, reason, a run's name or an alert's text can be written by any user
and are read by every user (`corral queue`, `corral show`, `corral history`). Printed raw, an escape
sequence in them can move the cursor, rewrite what is on screen, set the window title or (on some
terminals) answer back as typed input; a bidirectional override (U+202E) makes `evil.sh` display as
something else. `escape` shows such characters as visible escapes (`\\x1b`, `\\u202e`), and the
`escaped` decorator applies it to every string a formatter is given, so tables keep their own
layout (newlines, padding) while nothing a user wrote reaches the terminal raw.

`--json` output is already safe (json.dumps writes them as `\\u001b`), and `corral logs` prints a
job's own log bytes as they are: that is the job's output, read by those who may manage the job.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

import click

# C0 controls (ESC included), DEL, C1 controls (CSI is U+009B); LRM, RLM, ALM; line and paragraph
# separators; bidi embeddings, overrides and isolates; lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

F = TypeVar("F", bound=Callable[..., Any])


def escape(text: str) -> str:
    """`text` with every control character and bidi override shown as an escape (`\\x1b`, `\\u202e`)."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_visible, text)


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape_values(value: Any) -> Any:
    """`value` with `escape` applied to every string in it (keys of mappings too)."""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {escape_values(k): escape_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(escape_values(v) for v in value) if isinstance(value, list) else tuple(
            escape_values(v) for v in value)
    return value


def escaped(formatter: F) -> F:
    """Decorate a formatter so that every string it is given (in mappings and lists too) is escaped."""

    @functools.wraps(formatter)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return formatter(*(escape_values(a) for a in args), **{k: escape_values(v) for k, v in kwargs.items()})

    return wrapper  # type: ignore[return-value]


def json_text(data: Any) -> str:
    """What `--json` prints: indented JSON, in which control characters are escapes already."""
    return json.dumps(data, indent=2)


def print_json(data: Any) -> None:
    click.echo(json_text(data))
