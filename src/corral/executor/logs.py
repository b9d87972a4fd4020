"""Windows onto a job's log files: a byte range, the last lines, the numbered tail, what came since.

Every reader of a job's stdout and stderr goes through here (`GET /jobs/{id}/log`, the event stream's
`log` events, a diagnosis's evidence, the monitor's last-activity check), and every open goes through
`files.open_log`, so that a log the job's owner does not own, or that is not a regular file, is shown
to no one the same way everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from corral.executor import files

MAX_CHUNK = 1 << 20  # bytes one range read returns at most, and what a tail of lines looks back over

TAIL_BYTES = 256 * 1024
COUNT_LINES_UP_TO = 64 << 20  # bytes of log before the tail whose lines are counted exactly
TAIL_LINES = 400

MAX_FOLLOW = 64 * 1024  # bytes one `follow` step returns at most
SKIP_BEYOND = 4 * MAX_FOLLOW  # a log further behind than this is skipped to its end


def read_range(path: str, owner_uid: int | None, offset: int, limit: int) -> tuple[bytes, int]:
    """Up to `limit` bytes (at most `MAX_CHUNK`) of a log from `offset` (past the end: nothing, from
    the end); returns them and the offset the next read starts at.

    Raises:
        FileNotFoundError: no log yet. PermissionError: not a regular file of the owner's (`files.open_log`).
    """
    limit = max(1, min(limit, MAX_CHUNK))
    with files.open_log(path, owner_uid) as f:
        size = os.fstat(f.fileno()).st_size
        offset = min(offset, size)
        f.seek(offset)
        data = f.read(limit)
    return data, offset + len(data)


def read_last_lines(path: str, owner_uid: int | None, lines: int) -> tuple[bytes, int]:
    """The last `lines` lines of a log (within its last `MAX_CHUNK` bytes) and its size.

    Raises:
        FileNotFoundError, PermissionError: as `read_range`.
    """
    with files.open_log(path, owner_uid) as f:
        size = os.fstat(f.fileno()).st_size
        start = max(0, size - MAX_CHUNK)
        f.seek(start)
        data = f.read(size - start)
    kept = data.splitlines(keepends=True)
    return (b"".join(kept[-lines:]) if lines > 0 else b""), size


def numbered_tail(stream: str, path: str, owner_uid: int | None = None) -> list[tuple[str, int, str]]:
    """The last lines of a log with their 1-based numbers (counted over the whole file); none from a
    log that cannot be read or is not a regular file of the job's owner (see `files.open_log`)."""
    try:
        with files.open_log(path, owner_uid) as f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size - TAIL_BYTES)
            before = 0
            if start <= COUNT_LINES_UP_TO:
                while f.tell() < start:
                    block = f.read(min(1 << 20, start - f.tell()))
                    if not block:
                        break
                    before += block.count(b"\n")
            f.seek(start)
            data = f.read()
            if start > COUNT_LINES_UP_TO:
                # too long to count on every diagnosis: estimated from the tail's own line length
                before = int(start * max(1, data.count(b"\n")) / max(1, len(data)))
    except OSError:
        return []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    first = before + 1
    if start > 0 and lines:  # the first line read is the end of a line cut in two
        lines, first = lines[1:], first + 1
    numbered = [(stream, first + i, line.decode("utf-8", "replace")) for i, line in enumerate(lines)]
    return numbered[-TAIL_LINES:]


@dataclass(frozen=True)
class LogText:
    """New text of a log: it starts at byte `start` and the next read starts at `offset`; `skipped`
    bytes before it were left out because the job wrote faster than a reader can follow."""

    stream: str
    start: int
    offset: int
    text: str
    skipped: int = 0


def follow(stream: str, path: str, offset: int, owner_uid: int | None = None) -> tuple[LogText | None, int]:
    """The new text of a log since `offset`, in whole lines where there are any (at most `MAX_FOLLOW`
    bytes: a log further behind is skipped to its last part, so a live view never falls behind), and
    the offset to follow from next. A log truncated below `offset` is read again from its start."""
    try:
        with files.open_log(path, owner_uid) as f:  # OSError (not the owner's, not a file): nothing shown
            size = os.fstat(f.fileno()).st_size
            if size < offset:  # truncated (a requeued job starts its log again): read from the start
                offset = 0
            if size == offset:
                return None, offset
            skipped = 0
            if size - offset > SKIP_BEYOND:
                skipped = size - MAX_FOLLOW - offset
            start = offset + skipped
            f.seek(start)
            data = f.read(min(size - start, MAX_FOLLOW))
    except OSError:
        return None, offset
    if skipped:  # begin at a whole line
        cut = data.find(b"\n") + 1
        if 0 < cut < len(data):
            data, start, skipped = data[cut:], start + cut, skipped + cut
    cut = data.rfind(b"\n") + 1
    if 0 < cut < len(data):
        data = data[:cut]  # the rest of the line comes with the next read
    else:
        data = _whole_characters(data)  # no newline at all: at least never cut a character in two
        if not data:
            return None, offset
    return LogText(stream, start, start + len(data), data.decode("utf-8", "replace"), skipped), start + len(data)


def _whole_characters(data: bytes) -> bytes:
    """`data` less a UTF-8 character cut at its end (the rest comes with the next read)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data":
            return data[:exc.start]
    return data


def size_of(path: str) -> int:
    """A log's size now (0 when there is none yet): where following it starts."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def last_write(paths: Sequence[str]) -> float | None:
    """When any of these logs was last written (None: none exists)."""
    times = []
    for path in paths:
        try:
            times.append(os.stat(path).st_mtime)
        except OSError:
            pass
    return max(times) if times else None
