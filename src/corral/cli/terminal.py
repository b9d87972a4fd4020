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

import sys

from corral import lean_json

TYPE_CHECKING = False  # typing, re, json and click would cost each `corral queue` more than the call itself
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from corral.errors import CorralError

    F = TypeVar("F", bound=Callable[..., Any])

# C0 controls (ESC included), DEL, C1 controls (CSI is U+009B); LRM, RLM, ALM; line and paragraph
# separators; bidi embeddings, overrides and isolates; lone surrogates. None of them is printable
# (str.isprintable), so printable text is returned as it is without a look at the table.
_UNSAFE_RANGES = ((0x00, 0x1f), (0x7f, 0x9f), (0x61c, 0x61c), (0x200e, 0x200f), (0x2028, 0x202e), (0x2066, 0x2069),
                  (0xd800, 0xdfff))
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_table: dict[int, str] = {}


def escape(text: str) -> str:
    """`text` with every control character and bidi override shown as an escape (`\\x1b`, `\\u202e`)."""
    if text.isprintable():
        return text
    if not _table:
        for low, high in _UNSAFE_RANGES:
            for code in range(low, high + 1):
                _table[code] = _NAMED.get(chr(code)) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return text.translate(_table)


def escape_values(value: Any) -> Any:
    """`value` with `escape` applied to every string in it (keys of mappings too)."""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value) if isinstance(value, list) else tuple(_plain(v) for v in value)
    return value


_PLAIN_TYPES = frozenset({int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """escape_values(value), answered here for the numbers and printable strings that most values are
    (`corral queue` walks every field of every job)."""
    kind = type(value)
    if kind in _PLAIN_TYPES or (kind is str and value.isprintable()):
        return value
    return escape_values(value)


def escaped(formatter: F) -> F:
    """Decorate a formatter so that every string it is given (in mappings and lists too) is escaped."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return formatter(*(escape_values(a) for a in args), **{k: escape_values(v) for k, v in kwargs.items()})

    # what functools.wraps copies, without importing functools (and collections) on every call
    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(wrapper, name, getattr(formatter, name))
    wrapper.__wrapped__ = formatter  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def print_error(exc: CorralError) -> None:
    """`corral: error: ...` on stderr; an error with several problems (a script's directives): its first line,
    then each problem on a line of its own (escape() would show the message's newlines as \\n)."""
    problems = getattr(exc, "problems", ())
    if len(problems) > 1:
        lines = [f"corral: error: {escape(exc.message.partition(chr(10))[0])}"]
        lines += [f"  {escape(problem)}" for problem in problems]
    else:
        lines = [f"corral: error: {escape(exc.message)}"]
    flush_stdout()
    print("\n".join(lines), file=sys.stderr, flush=True)


def flush_stdout() -> None:
    """What was printed before, out before a message on stderr (as click.echo leaves it)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def json_text(data: Any) -> str:
    """What `--json` prints: indented JSON (json.dumps(data, indent=2)), in which control characters are escapes already."""
    return lean_json.pretty(data)


def print_json(data: Any) -> None:
    sys.stdout.write(json_text(data) + "\n")  # as click.echo wrote it: one write, flushed
    sys.stdout.flush()
