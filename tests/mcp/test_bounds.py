"""Log excerpts stay within their line and byte budgets and say what they left out."""

from __future__ import annotations

from corral.mcp.bounds import clean_line, first_lines, last_lines


def numbered(n: int) -> bytes:
    return b"".join(f"line {i}\n".encode() for i in range(1, n + 1))


def test_last_lines_keeps_the_newest_lines_within_the_line_budget():
    excerpt = last_lines(numbered(100_000), 20, 8192, 500)
    assert excerpt.lines == [f"line {i}" for i in range(99_981, 100_001)]
    assert excerpt.omitted_lines == 0 and excerpt.cut_lines == 0


def test_last_lines_drops_the_oldest_lines_to_fit_the_byte_budget_and_cuts_long_lines():
    data = b"".join(b"%d:" % i + b"y" * 3000 + b"\n" for i in range(20))
    excerpt = last_lines(data, 20, 8192, 500)
    assert sum(len(line.encode()) + 1 for line in excerpt.lines) <= 8192
    assert excerpt.lines[-1].startswith("19:") and excerpt.omitted_lines == 20 - len(excerpt.lines) > 0
    assert excerpt.cut_lines == len(excerpt.lines)
    assert all(line.endswith("more characters]") and len(line) < 540 for line in excerpt.lines)


def test_a_progress_bar_shows_its_last_state_and_bad_bytes_do_not_raise():
    assert clean_line(b" 10%|#   \r 50%|#####  \r100%|##########\r", 500) == ("100%|##########", False)
    text, cut = clean_line(b"\xff\xfe half a char \xe2\x82", 500)
    assert "half a char" in text and not cut


def test_first_lines_continue_without_splitting_a_line_still_being_written():
    data = b"one\ntwo\nthree-partial"
    excerpt, used = first_lines(data, 100, 65536, 2000, at_end=False)
    assert excerpt.lines == ["one", "two"] and used == len(b"one\ntwo\n")
    excerpt, used = first_lines(data, 100, 65536, 2000, at_end=True)
    assert excerpt.lines == ["one", "two", "three-partial"] and used == len(data)


def test_first_lines_stop_at_the_line_limit_and_the_offset_resumes_exactly_there():
    data = numbered(5000)
    excerpt, used = first_lines(data, 1000, 65536, 2000, at_end=True)
    assert excerpt.lines[0] == "line 1" and excerpt.lines[-1] == "line 1000" and len(excerpt.lines) == 1000
    rest, _ = first_lines(data[used:], 1, 65536, 2000, at_end=True)
    assert rest.lines == ["line 1001"]


def test_first_lines_fit_the_byte_budget_and_a_line_without_end_is_still_read():
    data = b"z" * 200_000 + b"\n" + b"after\n"
    excerpt, used = first_lines(data, 1000, 65536, 2000, at_end=False)
    assert len(excerpt.lines) == 2 and excerpt.cut_lines == 1 and used == len(data)
    endless = b"=" * 50_000  # a job that writes one line and never ends it
    excerpt, used = first_lines(endless, 1000, 65536, 2000, at_end=False)
    assert len(excerpt.lines) == 1 and used == len(endless)


def test_first_lines_stop_at_the_byte_budget_and_resume_after_the_last_line_returned():
    data = b"".join(b"%04d" % i + b"w" * 1996 + b"\n" for i in range(1000))
    excerpt, used = first_lines(data, 1000, 65536, 2000, at_end=True)
    assert sum(len(line.encode()) + 1 for line in excerpt.lines) <= 65536
    assert len(excerpt.lines) == 32 and used == 32 * 2001
    rest, _ = first_lines(data[used:], 1, 65536, 2000, at_end=True)
    assert rest.lines[0].startswith("0032")
