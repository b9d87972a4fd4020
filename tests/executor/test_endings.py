"""The server's note in a job's log when its supervisor is gone: written only into a regular file of the
job's owner, never through a link, never blocking on a FIFO, never creating a file."""

from __future__ import annotations

import os

from corral.executor.endings import NODE_FAILURE, append_as_root, cancelled_line, oom_line


def test_the_lines_are_slurms():
    at = 1_795_000_000.0
    import time

    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(at))
    assert cancelled_line("12", "node1", at, " DUE TO TIME LIMIT") == (
        f"slurmstepd: error: *** JOB 12 ON node1 CANCELLED AT {when} DUE TO TIME LIMIT ***")
    assert cancelled_line("12", "node1", at, by="alice") == f"slurmstepd: error: *** JOB 12 ON node1 CANCELLED AT {when} BY alice ***"
    assert cancelled_line("12", "node1", at, NODE_FAILURE, by="alice").endswith(
        "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***")
    assert oom_line("12", 2) == ("slurmstepd: error: Detected 2 oom_kill events in StepId=12.batch. "
                                 "Some of the step tasks have been OOM Killed.")


def test_it_appends_to_the_owners_log(tmp_path):
    log = tmp_path / "job.err"
    log.write_text("last words\n")
    assert append_as_root(str(log), os.geteuid(), "the end")
    assert log.read_text() == "last words\nthe end\n"


def test_it_never_follows_a_link_nor_creates_nor_writes_someone_elses_file(tmp_path):
    victim = tmp_path / "shadow"
    victim.write_text("secret\n")
    link = tmp_path / "job.err"
    link.symlink_to(victim)
    assert not append_as_root(str(link), os.geteuid(), "the end")
    assert not append_as_root(str(tmp_path / "missing.err"), os.geteuid(), "the end")
    assert not (tmp_path / "missing.err").exists()
    assert not append_as_root(str(victim), os.geteuid() + 1, "the end")  # a file that is not the owner's
    hard = tmp_path / "hard.err"
    os.link(victim, hard)
    assert not append_as_root(str(hard), os.geteuid() + 1, "the end")
    assert victim.read_text() == "secret\n"


def test_a_fifo_in_place_of_the_log_does_not_block(tmp_path):
    fifo = tmp_path / "job.err"
    os.mkfifo(fifo)
    assert not append_as_root(str(fifo), os.geteuid(), "the end")  # refused at once, not hung
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert not append_as_root(str(fifo), os.geteuid(), "the end")  # opened, but not a regular file
        assert os.read(reader, 100) == b""
    finally:
        os.close(reader)


def test_a_name_cannot_break_the_line():
    line = cancelled_line("12", "node1", 0.0, by="eve\nslurmstepd: error: forged")
    assert "\n" not in line and line.endswith(" BY eveslurmstepd:error:forged ***")
