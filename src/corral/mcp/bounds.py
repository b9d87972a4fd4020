"""How much a tool may answer, and the trimming that keeps it there.

An agent reads every byte a tool returns; a log of a million lines or a series of a million
points must reach it as a bounded excerpt that says what was left out, never as a flood.
Pure functions of the bytes and lists they are given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

VIEW_LOG_LINES = 20
"""Lines of each log that view_gpu_job shows."""
VIEW_LOG_BYTES = 8 * 1024
VIEW_LINE_CHARS = 500
LOG_MAX_LINES = 1000
"""The most lines workload_logs returns in one call."""
LOG_DEFAULT_LINES = 100
LOG_MAX_BYTES = 64 * 1024
LOG_LINE_CHARS = 2000
MAX_POINTS = 500
"""The most points of one series a tool returns."""
DEFAULT_POINTS = 200
RUN_METRICS_TOTAL_POINTS = 1000
"""The most points run_metrics returns over all the keys asked for."""
MAX_LIST = 200
"""The most jobs, runs or GPUs a listing returns."""
TEXT_CHARS = 500
"""The longest piece of free text (evidence, a config value) passed through."""

T = TypeVar("T")


@dataclass(frozen=True)
class LogExcerpt:
    """Lines of a log, each cleaned and capped; what was left out is counted."""

    lines: list[str]
    omitted_lines: int
    """Lines of the excerpt's range left out to stay within the byte budget."""
    cut_lines: int
    """Lines shortened to the per-line limit (each ends with a marker)."""


def clean_line(raw: bytes, max_chars: int) -> tuple[str, bool]:
    """A log line as a terminal shows it, at most `max_chars` characters; and whether it was cut.

    Progress bars redraw a line with carriage returns: only the text after the last one is kept.
    """
    text = raw.rstrip(b"\r").decode("utf-8", errors="replace")
    text = text.rsplit("\r", 1)[-1]
    if len(text) <= max_chars:
        return text, False
    return f"{text[:max_chars]} …[{len(text) - max_chars} more characters]", True


def last_lines(data: bytes, max_lines: int, max_bytes: int, max_chars: int) -> LogExcerpt:
    """The last `max_lines` lines of `data`, dropping the oldest until they fit in `max_bytes`."""
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    chosen = [clean_line(piece, max_chars) for piece in (raw[-max_lines:] if max_lines > 0 else [])]
    kept: list[tuple[str, bool]] = []
    size = 0
    for text, was_cut in reversed(chosen):
        size += len(text.encode()) + 1
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
        size += len(text.encode()) + 1
        if size > max_bytes and lines:
            break
        lines.append(text)
        cut += was_cut
        consumed += span
    return LogExcerpt(lines, 0, cut), consumed


def capped(items: Sequence[T], limit: int) -> tuple[list[T], bool]:
    """The first `limit` items, and whether any were left out."""
    return list(items[:limit]), len(items) > limit


def short_text(text: str, max_chars: int = TEXT_CHARS) -> str:
    """`text`, cut to `max_chars` with a marker saying how much was left out."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]} …[{len(text) - max_chars} more characters]"

