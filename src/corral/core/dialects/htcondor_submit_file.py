"""An HTCondor submit file read into its statements: commands as of the queue statement, and the queue.

`read_submit_file(text, max_tasks=...)` gives a `SubmitFile` (values, how each key is spelled, the job count, the
queue's items); `resolve_queue` lists a `queue ... from FILE` or `queue ... matching GLOB`'s items
inline, with the I/O the caller passes in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from corral.core.dialects.htcondor_macros import MACRO, Items, Macros
from corral.core.units.units import is_number
from corral.errors import InvalidRequest

_MAX_ITEM_VARIABLES = 64

_KEY = r"[+]?[A-Za-z_][A-Za-z0-9_.]*"
_ASSIGNMENT = re.compile(rf"^({_KEY})\s*=(.*)$", re.DOTALL)
_MULTILINE = re.compile(rf"^({_KEY})\s*@=\s*(\S*)\s*$")
_QUEUE = re.compile(r"^queue(?![A-Za-z0-9_.])\s*(.*)$", re.IGNORECASE | re.DOTALL)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STATEMENTS = ("include", "if", "elif", "else", "endif", "error", "warning")


@dataclass
class SubmitFile:
    values: dict[str, str]
    """Lower-case key -> raw value, as of the queue statement; `+x` for custom attributes."""
    spelled: dict[str, str]
    """Lower-case key -> the key as the file writes it, for messages."""
    count: int
    referenced: set[str]
    """Names that some $(...) in the file refers to."""
    warnings: list[str] = field(default_factory=list)
    items: Items | None = None
    """The values of `queue ... in/from` variables, task by task; None for `queue [N]`."""


def read_submit_file(text: str, *, max_tasks: int) -> SubmitFile:
    if "\0" in text:
        raise InvalidRequest("submit file", "contains a NUL byte")
    if re.search("[\ue000-\ue1ff]", text):
        raise InvalidRequest("submit file", "contains private-use characters U+E000 to U+E1FF")
    values: dict[str, str] = {}
    spelled: dict[str, str] = {}
    count: int | None = None
    items: Items | None = None
    referenced: set[str] = set()
    warnings: list[str] = []
    for lineno, line, _end in _statements(text):
        referenced.update(_macro_names(line))
        assignment = _ASSIGNMENT.match(line)
        if assignment:
            written, value = assignment.group(1), assignment.group(2).strip()
            key = _canonical(written)
            if count is not None:
                warnings.append(f"line {lineno}: {written} comes after the queue statement, so no job has it; ignored")
                continue
            values[key] = _append_to_earlier(key, value, values.get(key))
            spelled[key] = written
            continue
        queue = _QUEUE.match(line)
        if queue:
            if count is not None:
                raise InvalidRequest(
                    "queue", f"line {lineno}: a second queue statement; corral takes one job or one array per file",
                    "split the file, one queue statement in each",
                )
            count, items = _queue(queue.group(1), Macros(values, array=True), lineno, max_tasks)
            referenced.update(items.names if items else ())
            continue
        word = line.split(None, 1)[0].lower()
        if word in _STATEMENTS:
            raise InvalidRequest(
                word, f"line {lineno}: the {word} statement is not supported",
                "write out what it means",
            )
        raise InvalidRequest(f"line {lineno}", f"cannot read {line!r}", "write key = value, or queue [N]")
    if count is None:
        raise InvalidRequest(
            "queue", "the file has no queue statement, so it asks for no job",
            "end it with queue or queue N",
        )
    if "executable" not in values:
        raise InvalidRequest("executable", "is missing", "say which program to run: executable = /path/to/program")
    return SubmitFile(values, spelled, count, referenced, warnings, items)


def _statements(text: str) -> Iterator[tuple[int, str, int]]:
    """(line number, statement, index of the line after it): continuations joined, comments and blank
    lines skipped; `queue ... (` takes the lines up to one that is `)`.

    As in HTCondor, a comment line never continues, and one inside a continued line is left out.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        while line.endswith("\\"):
            line = line[:-1]
            while i < len(lines) and lines[i].lstrip().startswith("#"):
                i += 1
            if i < len(lines):
                line += lines[i].strip()
                i += 1
        multiline = _MULTILINE.match(line)
        if multiline:
            key, tag = multiline.group(1), multiline.group(2)
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != f"@{tag}":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise InvalidRequest(
                    key, f"line {lineno}: the value begun with @={tag} never ends",
                    f"end it with @{tag}",
                )
            i += 1
            line = f"{key} = " + "\n".join(body)
        elif _QUEUE.match(line) and line.endswith("(") and re.search(r"\b(in|from|matching)\b", line, re.I):
            body = []
            while i < len(lines) and lines[i].strip() != ")":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise InvalidRequest("queue", f"line {lineno}: the list begun with ( never ends", "end it with a line )")
            i += 1
            line = line + "\n" + "\n".join(body) + "\n)"
        yield lineno, line, i


def _macro_names(text: str) -> Iterator[str]:
    for match in MACRO.finditer(text):
        if not match.group(1) and not match.group(2):
            yield match.group(3).partition(":")[0].strip().lower()


def _canonical(key: str) -> str:
    key = key.lower()
    return "+" + key[3:] if key.startswith("my.") else key


def _append_to_earlier(key: str, value: str, earlier: str | None) -> str:
    """`args = $(args) --more` refers to the earlier value, as in HTCondor's configuration language."""
    if earlier is None or key.startswith("+"):
        return value
    own = re.compile(r"\$\(\s*" + re.escape(key) + r"\s*\)", re.IGNORECASE)
    return own.sub(lambda _: earlier, value)


_QUEUE_FORM = re.compile(r"^(.*?)(?<![A-Za-z0-9_])(in|from|matching)(?![A-Za-z0-9_])(.*)$", re.IGNORECASE | re.DOTALL)
_SLICE = re.compile(r"^\[\s*(-?\d*)\s*(?::\s*(-?\d*)\s*(?::\s*(-?\d*)\s*)?)?\]")


def _queue(text: str, macros: Macros, lineno: int, max_tasks: int) -> tuple[int, Items | None]:
    """The number of jobs a queue statement makes, and the values of its variables for each."""
    expanded = macros.expand_text(text, "queue").strip()
    form = _QUEUE_FORM.match(expanded)
    head, rest = (form.group(1).strip(), form.group(3).strip()) if form else (expanded, "")
    words = [w for w in re.split(r"[\s,]+", head) if w]
    count = 1
    if words and is_number(words[0]):
        count = int(words.pop(0))
        if count < 1:
            raise InvalidRequest("queue", f"line {lineno}: queue {count} asks for no job", "write queue N with N >= 1")
    if form is None:
        if words:
            raise InvalidRequest("queue", f"line {lineno}: cannot read queue {expanded!r}",
                                 "write queue, queue N, or queue [N] VAR in/from/matching ...")
        _check_size(count, lineno, max_tasks)
        return count, None
    kind = form.group(2).lower()
    names = [w.lower() for w in words] or ["item"]
    for name in names:
        if not ENV_NAME.match(name):
            raise InvalidRequest("queue", f"line {lineno}: {name!r} is not a variable name", "use letters, digits and _")
    if len(names) > _MAX_ITEM_VARIABLES:
        raise InvalidRequest("queue", f"line {lineno}: more than {_MAX_ITEM_VARIABLES} variables")
    if kind == "matching":
        raise InvalidRequest(
            "queue", f"line {lineno}: queue ... matching lists files, which the corral CLI does for you",
            "submit the file with corral submit --condor, from the directory it names files in",
        )
    rest, chosen = _slice(rest, lineno)
    if kind == "in":
        inner = _in_parentheses(rest, lineno) if rest.startswith("(") else rest
        rows = [[item] for item in re.split(r"[\s,]+", inner) if item]
        if len(names) > 1:
            raise InvalidRequest("queue", f"line {lineno}: queue ... in takes one variable",
                                 "use queue A, B from (...) for several")
    else:
        if not rest.startswith("("):
            raise InvalidRequest(
                "queue", f"line {lineno}: queue ... from {rest!r} reads a file, which the corral CLI does for you",
                "submit the file with corral submit --condor, or list the items: queue VAR from ( ... )",
            )
        rows = [_split_row(line, len(names)) for line in _in_parentheses(rest, lineno).split("\n")
                if line.strip() and not line.strip().startswith("#")]
    rows = rows[chosen] if chosen is not None else rows
    if not rows:
        raise InvalidRequest("queue", f"line {lineno}: the list of items is empty, so no job is queued",
                             "give at least one item")
    total = count * len(rows)
    _check_size(total, lineno, max_tasks)
    table = [
        [*row, str(step), str(index), str(index)]
        for index, row in enumerate(rows) for step in range(count)
    ]
    return total, Items([*names, "step", "itemindex", "row"], table)


def _check_size(count: int, lineno: int, max_tasks: int) -> None:
    if count > max_tasks:
        raise InvalidRequest("queue", f"line {lineno}: {count} jobs is more than the {max_tasks} an array holds")


def _slice(rest: str, lineno: int) -> tuple[str, slice | None]:
    match = _SLICE.match(rest)
    if match is None:
        return rest, None
    parts = [int(p) if p else None for p in match.groups()]
    if parts[2] == 0:
        raise InvalidRequest("queue", f"line {lineno}: a slice step of 0", "write [start:stop:step] with step >= 1")
    if ":" not in match.group(0):
        raise InvalidRequest("queue", f"line {lineno}: {match.group(0)} is not a slice", "write [start:stop:step]")
    return rest[match.end():].strip(), slice(*parts)


def _in_parentheses(rest: str, lineno: int) -> str:
    if not (rest.startswith("(") and rest.endswith(")")):
        raise InvalidRequest("queue", f"line {lineno}: the list {rest!r} is not in parentheses", "write ( ... )")
    return rest[1:-1]


def _split_row(line: str, names: int) -> list[str]:
    """A `from` row: split at commas and spaces, the last variable taking the rest of the line."""
    values: list[str] = []
    rest = line.strip()
    while len(values) < names - 1:
        match = re.match(r"([^\s,]*)[\s,]*(.*)$", rest, re.DOTALL)
        assert match is not None
        values.append(match.group(1))
        rest = match.group(2)
    values.append(rest.strip())
    return values


def resolve_queue(
    text: str, read_file: Callable[[str], str], list_matching: Callable[[list[str], str | None], list[str]],
) -> str:
    """The submit file with `queue ... from FILE` and `queue ... matching PATTERNS` made `from ( ... )`.

    The CLI calls it with its own I/O, as the submitting user, before sending the file to the server.
    `list_matching(patterns, "files" | "dirs" | None)` lists what the globs match, sorted.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    for lineno, line, end in _statements(text):
        queue = _QUEUE.match(line)
        if not queue:
            continue
        form = _QUEUE_FORM.match(queue.group(1).strip())
        if form is None or form.group(2).lower() == "in":
            return text
        rest = form.group(3).strip()
        slice_text = ""
        if form.group(2).lower() == "matching":
            kind = None
            first = rest.split(None, 1)
            if first and first[0].lower() in ("files", "dirs"):
                kind = first[0].lower()
                rest = first[1] if len(first) > 1 else ""
            match = _SLICE.match(rest)
            if match:
                slice_text, rest = match.group(0) + " ", rest[match.end():].strip()
            patterns = [p for p in re.split(r"[\s,]+", rest[1:-1] if rest.startswith("(") else rest) if p]
            items = list_matching(patterns, kind)
        else:
            match = _SLICE.match(rest)
            if match:
                slice_text, rest = match.group(0) + " ", rest[match.end():].strip()
            if rest.startswith("(") or not rest:
                return text
            items = read_file(rest).replace("\r\n", "\n").split("\n")
        for item in items:
            if item.strip() in (")",) or "\0" in item:
                raise InvalidRequest("queue", f"line {lineno}: cannot pass the item {item!r}", "rename it")
        statement = f"queue {form.group(1).strip()} from {slice_text}(\n" + "\n".join(items) + "\n)"
        return "\n".join([*lines[:lineno - 1], statement, *lines[end:]])
    return text
