"""HTCondor's job event log as corral writes it, read back by HTCondor's own reader (htcondor2.JobEventLog)."""

from __future__ import annotations

import fcntl
import os
import time

import htcondor2 as htcondor

from corral.executor import condor_log


def read(path) -> list[dict]:
    return [dict(e.items()) | {"type": int(e.type)} for e in htcondor.JobEventLog(str(path)).events(0)]


def test_every_event_corral_writes_reads_back_as_htcondor_means_it(tmp_path):
    log = tmp_path / "job.log"
    when = 1_795_504_323.0
    condor_log.append_submitted(str(log), 12, [0, 1], when)
    condor_log.append(str(log), condor_log.executing(12, 0, when + 2))
    condor_log.append(str(log), condor_log.ended(12, 0, when + 62, "COMPLETED", 0, None, None, 61.5))
    condor_log.append(str(log), condor_log.ended(12, 1, when + 63, "FAILED", None, 9, None))
    condor_log.append(str(log), condor_log.ended(12, 1, when + 64, "PREEMPTED", None, 15, None))
    condor_log.append(str(log), condor_log.ended(12, 1, when + 65, "TIMEOUT", None, 9, "reached 1:00"))
    events = read(log)
    assert [(e["type"], e["Cluster"], e["Proc"]) for e in events] == [
        (0, 12, 0), (0, 12, 1), (1, 12, 0), (5, 12, 0), (5, 12, 1), (4, 12, 1), (9, 12, 1)]
    assert events[3]["TerminatedNormally"] is True and events[3]["ReturnValue"] == 0
    assert events[3]["RunRemoteUsage"].startswith("Usr 0 00:01:01")
    assert events[4]["TerminatedNormally"] is False and events[4]["TerminatedBySignal"] == 9
    assert "time limit" in events[6]["Reason"]
    assert events[0]["EventTime"] == time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(when))


def test_a_job_that_starts_before_its_submit_event_is_written_still_has_one_first(tmp_path):
    log = tmp_path / "job.log"
    condor_log.append(str(log), condor_log.executing(3, 0, 10.0), submitted_at=(3, 0, 5.0))
    condor_log.append_submitted(str(log), 3, [0], 6.0)  # the CLI, late: nothing written twice
    assert [e["type"] for e in read(log)] == [0, 1]


def test_a_lock_held_forever_delays_an_event_by_seconds_only(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("")
    holder = os.open(log, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        began = time.monotonic()
        condor_log.append(str(log), condor_log.executing(3, 0, 10.0))
        assert time.monotonic() - began < condor_log.LOCK_WAIT_S + 1
    finally:
        os.close(holder)
    assert [e["type"] for e in read(log)] == [1]
