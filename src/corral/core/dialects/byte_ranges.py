"""HTTP byte ranges (RFC 9110 §14): the one range a download asks for, checked against the size."""

from __future__ import annotations

from dataclasses import dataclass


class RangeNotSatisfiable(Exception):
    """The range starts at or past the end: answer 416 with the size."""


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive, as Content-Range writes it

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.end}/{size}"


def parse_range(header: str | None, size: int) -> ByteRange | None:
    """The range `header` asks for in a file of `size` bytes; None for the whole file.

    One range is served (`bytes=0-99`, `bytes=100-`, `bytes=-100`); a header that is not a byte
    range, or asks for several, is ignored and the whole file sent, as the RFC allows.

    Raises:
        RangeNotSatisfiable: a well-formed range wholly past the end.
    """
    if not header:
        return None
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash or not (first.isdigit() or first == "") or not (last.isdigit() or last == "") or first == last == "":
        return None
    if not (first.isascii() and last.isascii()):
        return None
    if first == "":  # the last N bytes
        count = int(last)
        if count == 0 or size == 0:
            raise RangeNotSatisfiable(header)
        return ByteRange(max(0, size - count), size - 1)
    start = int(first)
    end = size - 1 if last == "" else min(int(last), size - 1)
    if last != "" and int(last) < start:
        return None  # invalid: ignored
    if start >= size:
        raise RangeNotSatisfiable(header)
    return ByteRange(start, end)
