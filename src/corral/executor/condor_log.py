"""HTCondor's job event log ("user log"), as `log = job.log` in a submit file asks for.

The events are written in HTCondor's text format (src/condor_utils/condor_event.cpp, ISO dates), so
`condor_wait`, `htcondor.JobEventLog` and DAG tools read them: 000 submit (written by the CLI, as
the submitting user), 001 execute and 005 terminate or 009 abort (written by the job's supervisor,
as the job's owner). Never by the server as root: the path is the user's to choose.
Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from corral.executor import files

LOCK_WAIT_S = 2.0


def event(code: int, cluster: int, proc: int, when: float, lines: list[str]) -> str:
    """One event's text: the header line, its body lines, and the `...` that ends it."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))
    return "".join([f"{code:03d} ({cluster:03d}.{proc:03d}.000) {stamp} {lines[0]}\n",
                    *(line + "\n" for line in lines[1:]), "...\n"])


def host() -> str:
    """This machine as the sinful string events name hosts by."""
    return f"<127.0.0.1:0?alias={socket.gethostname()}>"


def submitted(cluster: int, proc: int, when: float) -> str:
    return event(0, cluster, proc, when, [f"Job submitted from host: {host()}"])


def executing(cluster: int, proc: int, when: float) -> str:
    return event(1, cluster, proc, when, [f"Job executing on host: {host()}"])


def terminated(cluster: int, proc: int, when: float, exit_code: int | None, sig: int | None,
               cpu_time_s: float = 0.0) -> str:
    """005 for a job that ended by itself or by a signal; the return value is what `condor_wait` reports."""
    if sig:
        first = [f"\t(0) Abnormal termination (signal {sig})", "\t(0) No core file"]
    else:
        first = [f"\t(1) Normal termination (return value {exit_code or 0})"]
    usage = _usage(cpu_time_s)
    zero = _usage(0.0)
    return event(5, cluster, proc, when, [
        "Job terminated.", *first,
        f"\t\t{usage}  -  Run Remote Usage", f"\t\t{zero}  -  Run Local Usage",
        f"\t\t{usage}  -  Total Remote Usage", f"\t\t{zero}  -  Total Local Usage",
        "\t0  -  Run Bytes Sent By Job", "\t0  -  Run Bytes Received By Job",
        "\t0  -  Total Bytes Sent By Job", "\t0  -  Total Bytes Received By Job",
    ])


def evicted(cluster: int, proc: int, when: float, cpu_time_s: float = 0.0) -> str:
    """004: stopped to make room for another job (preempted); it runs again later."""
    return event(4, cluster, proc, when, [
        "Job was evicted.", "\t(0) Job was not checkpointed.",
        f"\t\t{_usage(cpu_time_s)}  -  Run Remote Usage", f"\t\t{_usage(0.0)}  -  Run Local Usage",
        "\t0  -  Run Bytes Sent By Job", "\t0  -  Run Bytes Received By Job",
    ])


def ended(cluster: int, proc: int, when: float, state: str, exit_code: int | None, sig: int | None,
          reason: str | None, cpu_time_s: float = 0.0) -> str:
    """The event for a corral end state: 005 for an end of its own, 004 preempted, else 009 aborted."""
    if state == "PREEMPTED":
        return evicted(cluster, proc, when, cpu_time_s)
    if state in ("COMPLETED", "FAILED") and (exit_code is not None or sig):
        return terminated(cluster, proc, when, exit_code, sig, cpu_time_s)
    words = {"CANCELLED": "cancelled", "TIMEOUT": "time limit reached", "OUT_OF_MEMORY": "out of memory",
             "NODE_FAIL": "node failure", "FAILED": "failed to start"}
    return aborted(cluster, proc, when, f"corral: {words.get(state, state.lower())}" + (f": {reason}" if reason else ""))


def aborted(cluster: int, proc: int, when: float, reason: str) -> str:
    """009: removed before it ended by itself (cancelled, out of time or memory, preempted for good)."""
    return event(9, cluster, proc, when, ["Job was aborted.", f"\t{' '.join(reason.split())[:200]}"])


def append(path: str, text: str, submitted_at: tuple[int, int, float] | None = None) -> None:
    """Add events to the log, creating it: one write under the log's lock, so the events of jobs that
    share a log never interleave.

    `submitted_at` (cluster, proc, submit time): write that job's submit event first unless the log
    has it already (a job that starts before the CLI got to write it).

    Raises:
        OSError: it cannot be written (the caller reports it and carries on).
    """
    with _locked(path) as fd:
        if submitted_at is not None:
            cluster, proc, when = submitted_at
            if _header(0, cluster, proc) not in _read(fd):
                text = submitted(cluster, proc, when) + text
        os.write(fd, text.encode())


def append_submitted(path: str, cluster: int, procs: list[int], when: float) -> None:
    """The submit events of a cluster's jobs, each unless the log has it already.

    Raises:
        OSError: the log cannot be written.
    """
    with _locked(path) as fd:
        content = _read(fd)
        text = "".join(submitted(cluster, p, when) for p in procs if _header(0, cluster, p) not in content)
        if text:
            os.write(fd, text.encode())


def _header(code: int, cluster: int, proc: int) -> str:
    return f"{code:03d} ({cluster:03d}.{proc:03d}.000) "


@contextmanager
def _locked(path: str) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    try:
        if not _is_regular(fd):
            raise OSError(f"{path} is not a regular file")
        # whoever holds it forever (the job's owner can) must not keep a supervisor from recording the
        # job's end: past the wait, the event is written unlocked
        files.lock_within(fd, LOCK_WAIT_S)
        yield fd
    finally:
        os.close(fd)


def _read(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _is_regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)


def _usage(seconds: float) -> str:
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    return f"Usr {days} {rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}, Sys 0 00:00:00"
