"""Slurm's src/common/print_fields.c, as sacctmgr and sshare print with it: columns of a signed width (positive:
right-justified, negative: left), each followed by a space, under a header and a line of dashes; or, parsable,
`|` after every field (`-p`) or between fields (`-P`).

A column is `(header, width, kind)`; kinds: `s` text (cut to the width, its last kept character a `+`), `u`
a whole number and `f` a double (never cut; a double too wide for its column turns to `%e`, as Slurm's
print_fields_double does). A value of None is Slurm's unset (NULL, NO_VAL, INFINITE): blank.
`parsable` is None (columns), `"|"` for `-p`, `""` for `-P`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    Column = tuple[str, int, str]


def header(columns: Sequence[Column], parsable: str | None) -> str:
    """The header line, and under it a line of dashes unless parsable (print_fields_header)."""
    if parsable is not None:
        return line([(name, width, "s") for name, width, _ in columns], [name for name, _, _ in columns], parsable)
    names = "".join(f"{name[:abs(width)]:{'>' if width > 0 else '<'}{abs(width)}} " for name, width, _ in columns)
    return names + "\n" + "".join("-" * abs(width) + " " for _, width, _ in columns) + "\n"


def line(columns: Sequence[Column], values: Sequence[Any], parsable: str | None) -> str:
    """One line of values, one per column, ending in a newline."""
    if parsable is not None:
        texts = [_plain(kind, value) for (_, _, kind), value in zip(columns, values)]
        return "|".join(texts) + ("|" if parsable else "") + "\n"
    return "".join(cell(kind, width, value) for (_, width, kind), value in zip(columns, values)) + "\n"


def cell(kind: str, width: int, value: Any) -> str:
    """A column's text and the space after it."""
    size = abs(width)
    align = ">" if width > 0 else "<"
    if value is None:
        return f"{'':{align}{size}} "
    if kind == "u" and not isinstance(value, str):  # a number column may hold a word (Share's `parent`)
        return f"{int(value):{align}{size}} "
    if kind == "f":
        return _double(float(value), width) + " "
    text = str(value)
    if kind == "s" and len(text) > size:
        text = text[:size - 1] + "+" if size else ""
    return f"{text[:size]:{align}{size}} "


def _plain(kind: str, value: Any) -> str:
    if value is None:
        return ""
    if kind == "u" and not isinstance(value, str):
        return str(int(value))
    if kind == "f":
        return "%f" % float(value)
    return str(value)


def _double(value: float, width: int) -> str:
    size = abs(width)
    text = "%*f" % (size, value)
    if len(text) <= size:
        return text if width > 0 else "%-*f" % (size, value)
    # too wide: `%e` at the column's width and precision, narrowed by what the exponent takes; as C's printf
    # reads them, a negative width left-justifies and a negative precision is the default, 6
    narrowed = size - max(0, len("%*.*e" % (size, size, value)) - size)
    text = f"{value:.{narrowed if narrowed >= 0 else 6}e}"
    return text.rjust(narrowed) if width > 0 and narrowed >= 0 else text.ljust(abs(narrowed))
