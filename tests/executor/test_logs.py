"""One module reads windows of a job's logs (`corral.executor.logs`): range, last lines, numbered tail, follow."""

import ast
import os
from pathlib import Path

import pytest

from corral.executor import logs

SRC = Path(__file__).resolve().parents[2] / "src" / "corral"


def test_a_range_starts_at_its_offset_and_past_the_end_reads_nothing(tmp_path):
    path = tmp_path / "job.out"
    path.write_bytes(b"0123456789")
    assert logs.read_range(str(path), None, 3, 4) == (b"3456", 7)
    assert logs.read_range(str(path), None, 8, 100) == (b"89", 10)
    assert logs.read_range(str(path), None, 50, 100) == (b"", 10)  # from the end, whatever was asked
    with pytest.raises(FileNotFoundError):
        logs.read_range(str(tmp_path / "none.out"), None, 0, 10)


def test_the_last_lines_come_with_the_logs_size(tmp_path):
    path = tmp_path / "job.out"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(100)))
    data, size = logs.read_last_lines(str(path), None, 3)
    assert data == b"line 97\nline 98\nline 99\n" and size == path.stat().st_size
    assert logs.read_last_lines(str(path), None, 0) == (b"", size)


def test_the_numbered_tail_counts_lines_over_the_whole_log(tmp_path):
    path = tmp_path / "job.err"
    path.write_bytes(b"".join(b"line %06d\n" % i for i in range(100_000)))  # 1.2 MB: the tail starts mid-file
    tail = logs.numbered_tail("stderr", str(path))
    assert len(tail) == logs.TAIL_LINES
    assert tail[-1] == ("stderr", 100_000, "line 099999")
    assert all(text == f"line {number - 1:06d}" for _, number, text in tail)


def test_following_a_log_far_behind_skips_to_a_whole_line_and_catches_up(tmp_path):
    path = tmp_path / "job.out"
    path.write_bytes(b"".join(b"line %07d\n" % i for i in range(200_000)))
    text, offset = logs.follow("stdout", str(path), 0)
    assert offset == path.stat().st_size == text.offset
    assert text.skipped > 0 and text.start == text.skipped and text.text.startswith("line ")
    assert logs.follow("stdout", str(path), offset) == (None, offset)
    path.write_bytes(b"again\n")  # truncated: followed from its start
    text, offset = logs.follow("stdout", str(path), offset)
    assert (text.start, text.text, offset) == (0, "again\n", 6)


def test_a_log_not_owned_by_the_jobs_owner_is_shown_by_no_reader(tmp_path):
    path = tmp_path / "job.out"
    path.write_bytes(b"secret\n")
    someone_else = os.getuid() + 1
    with pytest.raises(PermissionError):
        logs.read_range(str(path), someone_else, 0, 10)
    with pytest.raises(PermissionError):
        logs.read_last_lines(str(path), someone_else, 5)
    assert logs.numbered_tail("stdout", str(path), someone_else) == []
    assert logs.follow("stdout", str(path), 0, someone_else) == (None, 0)
    assert logs.follow("stdout", str(path), 0, os.getuid())[0].text == "secret\n"


def test_only_the_log_module_opens_job_logs():
    """The API's log route, the event stream, diagnosis and the monitor all read through `executor.logs`; the one
    other opener is the artifact download of a registered checkpoint, which needs the same check (a regular file
    of its owner's) for a file that is not a log."""
    openers = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "open_log":
                openers.add(str(path.relative_to(SRC)))
    assert openers == {"executor/logs.py", "tracking/artifacts.py"}
