"""HTTP byte ranges: the one range served, the forms ignored, the ranges past the end refused."""

from __future__ import annotations

import pytest

from corral.core.dialects.byte_ranges import ByteRange, RangeNotSatisfiable, parse_range


@pytest.mark.parametrize(("header", "expected"), [
    (None, None), ("", None), ("bytes=0-99", ByteRange(0, 99)), ("bytes=100-", ByteRange(100, 999)),
    ("bytes=-10", ByteRange(990, 999)), ("bytes=-5000", ByteRange(0, 999)), ("bytes=990-5000", ByteRange(990, 999)),
    ("bytes=0-0", ByteRange(0, 0)), (" Bytes = 5-9 ".replace(" = ", "="), ByteRange(5, 9)),
    ("bytes=0-1,5-6", None), ("items=0-5", None), ("bytes=9-5", None), ("bytes=-", None), ("bytes=a-b", None),
    ("bytes=١-٢", None),  # digits, but not ASCII ones
])
def test_parse_range(header, expected):
    assert parse_range(header, 1000) == expected


@pytest.mark.parametrize("header", ["bytes=1000-", "bytes=5000-6000", "bytes=-0"])
def test_a_range_past_the_end_is_not_satisfiable(header):
    with pytest.raises(RangeNotSatisfiable):
        parse_range(header, 1000)


def test_content_range_and_length():
    assert ByteRange(10, 19).content_range(1000) == "bytes 10-19/1000" and ByteRange(10, 19).length == 10
