"""Log excerpts and listings stay within their line and byte budgets (as JSON) and say what they left out."""

from __future__ import annotations

import json

from corral.mcp.bounds import (
    LOG_LINE_CHARS, LOG_MAX_BYTES, RESULT_BYTES, clean_line, first_lines, fit_items, last_lines,
)
from corral.mcp.views import evidence, gpu_list, number, public_id, queue_view, run_view, series_summary


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


def json_bytes(value: object) -> int:
    """Bytes of the JSON an agent receives (UTF-8, as the MCP SDK writes it)."""
    return len(json.dumps(value, ensure_ascii=False).encode())


def test_control_bytes_and_colours_stay_within_the_byte_cap_as_json():
    binary = b"\x01" * 40 + b"\n"
    coloured = b"\x1b[1;31mERROR\x1b[0m step \x1b[32m%d\x1b[0m loss \x1b]0;title\x07\x1b[2K0.5\x00\tok\n"
    data = binary * 1000 + b"".join(coloured % i for i in range(1000))
    tail = last_lines(data, 1000, LOG_MAX_BYTES, LOG_LINE_CHARS)
    assert json_bytes(tail.lines) <= LOG_MAX_BYTES
    assert tail.lines[-1] == "ERROR step 999 loss 0.5?\tok"  # colours gone, NUL shown as ?, tab kept
    head, used = first_lines(data, 1000, LOG_MAX_BYTES, LOG_LINE_CHARS, at_end=True)
    assert json_bytes(head.lines) <= LOG_MAX_BYTES and len(head.lines) == 1000 and used == 1000 * 41
    assert head.lines[0] == "[binary output omitted, 40 bytes]"
    # what the budget stands for: 1000 lines of control bytes cost about what they show, not six times it
    assert json_bytes(head.lines) < 40 * 1000


def test_escape_heavy_lines_are_budgeted_on_their_json_not_their_characters():
    data = b'"\\' * 1000 + b"\n"  # every character costs two bytes of JSON
    excerpt = last_lines(data * 100, 100, 8192, 2000)
    assert json_bytes(excerpt.lines) <= 8192 and excerpt.omitted_lines == 100 - len(excerpt.lines) > 0


def test_a_mostly_binary_line_is_named_not_shown_and_a_few_odd_bytes_are_kept():
    assert clean_line(bytes(range(256)), 500) == ("[binary output omitted, 256 bytes]", False)
    assert clean_line(b"\x00\x00\x01\x00\x10\x00\x00\x00\xff\xfeabc", 500)[0] == "[binary output omitted, 13 bytes]"
    assert clean_line(b"caf\xc3\xa9 \x07bell and \xff one bad byte", 500) == (
        "café ?bell and \ufffd one bad byte", False)
    assert clean_line(b"\x1b[38;5;208mwarning\x1b[0m: \x1b(Bdone", 500) == ("warning: done", False)


def test_listings_stay_within_the_result_budget_with_huge_runs_and_long_job_names():
    runs = [{"id": i, "uid": "u" * 64, "project": "p" * 200, "name": "n" * 200, "state": "finished", "job_id": i,
             "start_time": 1.7e9, "end_time": None, "last_step": 10, "tags": [f"{t:03d}" + "t" * 196 for t in range(300)],
             "config": {f"key{k}": "v" * 1000 for k in range(100)},
             "metrics": {f"m{k}/" + "k" * 200: {"count": 1, "last_step": 1, "last": float("nan"), "min": 1.0,
                                                "max": float("inf")} for k in range(50)}} for i in range(100)]
    view = run_view(runs[0])
    assert len(view["tags"]) == 20 and view["tags_total"] == 300 and all(len(t) < 120 for t in view["tags"])
    assert isinstance(view["config"], str) and view["config"].endswith("more characters]")
    assert len(view["config"]) < 400 and len(view["name"]) < 120 and len(view["metrics"]) == 20
    assert {m["last"] for m in view["metrics"].values()} == {"NaN"}
    assert {m["max"] for m in view["metrics"].values()} == {"Infinity"}
    shown, dropped = fit_items([run_view(r) for r in runs], RESULT_BYTES)
    assert dropped and 0 < len(shown) < 100 and json_bytes(shown) <= RESULT_BYTES

    page = {"total": 500, "running": 0, "pending": 500, "jobs": [
        {"id": i, "array_job_id": None, "array_task_id": None, "name": "x" * 10_000, "user": "u" * 300,
         "state": "PENDING", "reason": "Resources", "gpus": 1, "gpu_ids": [], "priority": 1} for i in range(200)]}
    queue = queue_view(page, 200)
    assert json_bytes(queue) <= RESULT_BYTES and queue["truncated"] and queue["total"] == 500
    assert 0 < len(queue["jobs"]) < 200 and all(len(job["name"]) < 120 for job in queue["jobs"])

    cluster = {"nodes": [{"name": "node" + "n" * 500, "gpus": [{"index": g, "job_id": None} for g in range(8)]}
                         for _ in range(25)]}
    gpus = gpu_list(cluster)
    assert json_bytes(gpus) <= RESULT_BYTES and gpus["truncated"] and gpus["total"] == 200


def test_an_array_task_is_named_by_its_ref_and_a_report_is_cut_to_the_budget():
    task = {"id": 3014, "ref": "3012_1", "array_job_id": 3012, "array_task_id": 1}
    assert public_id(task) == "3012_1" and public_id({"id": 7, "array_job_id": None}) == 7
    report = {"findings": [{"cause": "c" * 5000, "evidence": ["e" * 5000] * 50} for _ in range(50)]}
    assert json_bytes(evidence(report)) <= RESULT_BYTES


def test_non_finite_values_are_named_and_the_summary_tells_the_truth_about_the_end():
    values = [2.0, 1.5, None, 1.0, float("inf"), "NaN"]
    summary = series_summary(values)
    assert summary == {"first": 2.0, "last": "NaN", "last_finite": 1.0, "min": 1.0, "max": 2.0, "mean": 1.5,
                       "nonfinite": 2}
    assert [number(v) for v in (float("nan"), float("-inf"), "Infinity", "nan", 3)] == [
        "NaN", "-Infinity", "Infinity", "NaN", 3]
    assert series_summary([None, None])["last"] is None and series_summary([])["nonfinite"] == 0
