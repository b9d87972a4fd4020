"""The tail of a job's log as diagnosis reads it: each line cleaned of colour codes and torchrun's
rank prefix, found by pattern, and cited as `stream:line: text`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from corral.monitor.diagnosis.findings import QUOTE_CHARS

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")  # torchrun's prefix on each rank's lines


@dataclass(frozen=True)
class LogLine:
    stream: str
    number: int
    text: str
    """Without colour codes and without torchrun's `[rankN]:` prefix."""
    raw: str

    def cite(self) -> str:
        return f"{self.stream}:{self.number}: {clip(self.raw.strip())}"


def read_lines(log_lines: Iterable[tuple[str, int, str]]) -> list[LogLine]:
    out = []
    for stream, number, text in log_lines:
        # a progress bar rewrites its line with \r: each version is a line of its own
        for piece in text.split("\r"):
            clean = _ANSI.sub("", piece).rstrip("\n")
            if clean.strip():
                out.append(LogLine(stream, number, _RANK_PREFIX.sub("", clean), clean))
    return out


def matching(lines: Sequence[LogLine], pattern: re.Pattern[str]) -> list[LogLine]:
    return [line for line in lines if pattern.search(line.text)]


def cited(matches: Sequence[LogLine], which: int = 0) -> list[str]:
    """The chosen matching line, cited, and how many more there were."""
    out = [matches[which].cite()]
    if len(matches) > 1:
        out.append(f"({len(matches) - 1} more line{'s' if len(matches) > 2 else ''} like it)")
    return out


def clip(text: str) -> str:
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 3] + "..."
