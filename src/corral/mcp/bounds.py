"""How much a tool may answer, and the trimming that keeps it there.

An agent reads every byte a tool returns; a log of a million lines or a series of a million
points must reach it as a bounded excerpt that says what was left out, never as a flood.
Budgets count bytes of the JSON the agent receives (UTF-8, as the MCP SDK writes it): a control
byte that JSON writes as `\\u0001` costs six, so log text is cleaned before it is counted.
Pure functions of the bytes and lists they are given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

VIEW_LOG_LINES = 20
"""Lines of each log that view_gpu_job shows."""
VIEW_LOG_BYTES = 8 * 1024
VIEW_LINE_CHARS = 500
LOG_MAX_LINES = 1000
"""The most lines workload_logs returns in one call."""
LOG_DEFAULT_LINES = 100
LOG_MAX_BYTES = 64 * 1024
"""The most JSON bytes of lines workload_logs returns in one call."""
LOG_LINE_CHARS = 2000
MAX_POINTS = 500
"""The most points of one series a tool returns."""
DEFAULT_POINTS = 200
RUN_METRICS_TOTAL_POINTS = 1000
"""The most points run_metrics returns over all the keys asked for."""
MAX_LIST = 200
"""The most jobs, runs or GPUs a listing returns."""
RESULT_BYTES = 32 * 1024
"""The most JSON bytes a listing (queue, runs, GPUs) or a report (diagnosis, efficiency) answers."""
TEXT_CHARS = 500
"""The longest piece of free text (evidence, a config value) passed through."""
NAME_CHARS = 80
"""The longest name, tag, label or metric key passed through."""
MAX_TAGS = 20
"""The most tags or labels shown for one run or job."""

T = TypeVar("T")

# Terminal escapes carry no text: colours and cursor moves (CSI), window titles and links (OSC),
# and the others (ESC, intermediate bytes, a final byte: character sets, keypad modes)
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]?")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
"""C0 controls but the tab, DEL and C1 controls: JSON writes some as six bytes, a terminal shows none."""
BINARY_SHARE = 0.25
"""A line with more than this share of control bytes and undecodable bytes is binary output."""


@dataclass(frozen=True)
class LogExcerpt:
    """Lines of a log, each cleaned and capped; what was left out is counted."""

    lines: list[str]
    omitted_lines: int
    """Lines of the excerpt's range left out to stay within the byte budget."""
    cut_lines: int
    """Lines shortened to the per-line limit (each ends with a marker)."""


def json_size(value: Any) -> int:
    """Bytes of `value` as JSON in UTF-8, as the agent receives it."""
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def clean_line(raw: bytes, max_chars: int) -> tuple[str, bool]:
    """A log line as a terminal shows it, at most `max_chars` characters; and whether it was cut.

    Progress bars redraw a line with carriage returns: only the text after the last one is kept.
    Terminal escapes (colours) are dropped and other control characters become `?`; a line that
    is mostly control or undecodable bytes becomes `[binary output omitted, N bytes]`.
    """
    text = raw.rstrip(b"\r").decode("utf-8", errors="replace")
    text = _ANSI.sub("", text.rsplit("\r", 1)[-1])
    odd = len(_CONTROL.findall(text)) + text.count("\ufffd")
    if odd and odd > BINARY_SHARE * len(text) and len(text) >= 4:
        return f"[binary output omitted, {len(raw)} bytes]", False
    text = _CONTROL.sub("?", text)
    if len(text) <= max_chars:
        return text, False
    return f"{text[:max_chars]} …[{len(text) - max_chars} more characters]", True


def line_cost(text: str) -> int:
    """Bytes a line adds to a JSON list of lines: the string and its separator."""
    return json_size(text) + 2


def last_lines(data: bytes, max_lines: int, max_bytes: int, max_chars: int) -> LogExcerpt:
    """The last `max_lines` lines of `data`, dropping the oldest until their JSON fits in `max_bytes`."""
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    chosen = [clean_line(piece, max_chars) for piece in (raw[-max_lines:] if max_lines > 0 else [])]
    kept: list[tuple[str, bool]] = []
    size = 0
    for text, was_cut in reversed(chosen):
        size += line_cost(text)
        if size > max_bytes:
            break
        kept.append((text, was_cut))
    kept.reverse()
    return LogExcerpt([text for text, _ in kept], len(chosen) - len(kept), sum(cut for _, cut in kept))


def first_lines(data: bytes, max_lines: int, max_bytes: int, max_chars: int, *,
                at_end: bool) -> tuple[LogExcerpt, int]:
    """The first complete lines of `data`, within the limits; and how many bytes of `data` they span.

    A last line without its newline is included only when `at_end` (nothing more will be written)
    or when it is all there is (a progress bar that never ends its line), so reading on from the
    returned offset never splits a line that is still being written.
    """
    pieces = data.split(b"\n")
    partial = pieces.pop()  # b"" when data ends with a newline
    lines: list[str] = []
    cut = 0
    consumed = 0
    size = 0
    candidates = [(p, len(p) + 1) for p in pieces]
    if partial and (at_end or not pieces):
        candidates.append((partial, len(partial)))
    for piece, span in candidates:
        if len(lines) >= max_lines:
            break
        text, was_cut = clean_line(piece, max_chars)
        size += line_cost(text)
        if size > max_bytes and lines:
            break
        lines.append(text)
        cut += was_cut
        consumed += span
    return LogExcerpt(lines, 0, cut), consumed


def capped(items: Sequence[T], limit: int) -> tuple[list[T], bool]:
    """The first `limit` items, and whether any were left out."""
    return list(items[:limit]), len(items) > limit


def fit_items(items: Sequence[T], max_bytes: int) -> tuple[list[T], bool]:
    """The leading items whose JSON list fits in `max_bytes`, and whether any were left out."""
    kept: list[T] = []
    size = 2
    for item in items:
        size += json_size(item) + 2
        if size > max_bytes:
            return kept, True
        kept.append(item)
    return kept, False


def short_text(text: str, max_chars: int = TEXT_CHARS) -> str:
    """`text`, cut to `max_chars` with a marker saying how much was left out."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]} …[{len(text) - max_chars} more characters]"
