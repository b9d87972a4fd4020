"""What users wrote reaches another user's terminal only as visible text."""

from __future__ import annotations

from corral.cli.format import job_view, queue_table
from corral.cli.terminal import escape, escaped


def test_escape_sequences_c1_controls_and_bidi_overrides_become_visible_escapes():
    assert escape("\x1b]0;owned\x07") == "\\x1b]0;owned\\x07"
    assert escape("a\x9b2Jb\x7f") == "a\\x9b2Jb\\x7f"
    assert escape("evil\u202egnp.sh") == "evil\\u202egnp.sh"
    assert escape("x\u2066y\u2069") == "x\\u2066y\\u2069"
    assert escape("line\nnext\ttab") == "line\\nnext\\ttab"


def test_printable_text_is_unchanged():
    for text in ("train.py --lr 0.1", "日本語 😀 café", ""):
        assert escape(text) is text


def test_the_decorator_escapes_nested_values_and_keys():
    @escaped
    def show(data, *, extra):
        return data, extra

    assert show({"\x1bk": ["\u202e", ("\x00",)]}, extra="\x07") == ({"\\x1bk": ["\\u202e", ("\\x00",)]}, "\\x07")


JOB = {
    "id": 7, "ref": "7", "name": "job\x1b[31m", "user": "mallory", "state": "PENDING", "reason": "Dependency\x1b[2J",
    "exit_code": None, "signal": None, "command": ["sh", "-c", "echo \x1b]0;owned\x07 \u202egnp.sh"],
    "script_args": [], "workdir": "/tmp", "gpus": 0, "gpu_type": None, "gpu_ids": [], "gpu_mem_mb": None, "cpus": 1,
    "mem_mb": 0, "time_limit_s": None, "checkpoint_interval_s": None, "nice": 0, "partition": "default",
    "preemptible": False, "restarts": 0, "qos": "normal", "node": None, "submit_time": None, "start_time": None,
    "end_time": None, "stdout_path": "/tmp/7.out", "stderr_path": "/tmp/7.err", "labels": {"k": "v\x1b[0m"},
}


def test_show_and_queue_print_no_control_character_a_user_wrote():
    for text in (job_view(JOB), queue_table([JOB])):
        assert not any(ch in text for ch in "\x1b\x07\u202e")
    assert "echo \\x1b]0;owned\\x07 \\u202egnp.sh" in job_view(JOB)
