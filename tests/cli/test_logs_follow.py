"""`corral logs -f` follows a job to its end and says how it ended: a job killed for its time limit or its
memory is not a finished one (its exit status says so, as `corral wait`'s does); `--both` follows stdout
and stderr together. Run as a real process, as a user runs it, against a live server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import wait_for


@pytest.fixture
def corral(server_factory):
    server = server_factory(gpus=0)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, *args], capture_output=True,
                              text=True, timeout=120)

    run.server = server
    return run


def submit(corral, *args: str) -> str:
    result = corral("submit", "--parsable", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_following_a_job_killed_for_its_time_limit_or_memory_says_how_it_ended_and_fails(corral, short_tmp):
    began = os.path.join(short_tmp, "began")
    timed_out = submit(corral, "-t", "0:02", "--", "sh", "-c", f"echo one; touch {began}; echo two; sleep 60")
    wait_for(lambda: os.path.exists(began), timeout=60)  # followed while it runs and writes
    followed = corral("logs", "-f", timed_out)
    assert followed.stdout == "one\ntwo\n"
    assert followed.stderr == f"job {timed_out} TIMEOUT (exit code 143): it reached its time limit of 0:00:02\n"
    assert followed.returncode == 143
    # without -f, an ended job's log is printed, and that is all
    printed = corral("logs", timed_out)
    assert (printed.stdout, printed.stderr, printed.returncode) == ("one\ntwo\n", "", 0)

    hungry = submit(corral, "--mem", "64M", "--", "python3", "-c",
                    "print('allocating', flush=True); x = bytearray(400 << 20); import time; time.sleep(30)")
    followed = corral("logs", "-f", hungry)
    assert followed.stdout == "allocating\n"
    assert followed.stderr.splitlines()[-1] == (
        f"job {hungry} OUT_OF_MEMORY (exit code 137): it went over its memory limit of 64 MB")
    assert followed.returncode == 137

    failed = submit(corral, "--", "sh", "-c", "echo trying; exit 3")
    followed = corral("logs", "-f", failed)
    assert (followed.stdout, followed.stderr, followed.returncode) == ("trying\n", f"job {failed} FAILED (exit code 3)\n", 3)

    completed = submit(corral, "--", "sh", "-c", "echo done")
    followed = corral("logs", "-f", completed)
    assert (followed.stdout, followed.stderr, followed.returncode) == ("done\n", "", 0)


def test_following_both_streams_puts_each_where_it_belongs(corral, short_tmp):
    both = submit(corral, "-o", f"{short_tmp}/out", "-e", f"{short_tmp}/err", "--", "sh", "-c",
                  "for i in 1 2 3; do echo out $i; echo err $i >&2; sleep 0.2; done; exit 4")
    followed = corral("logs", "-f", "--both", both)
    assert followed.stdout == "out 1\nout 2\nout 3\n"
    assert followed.stderr == f"err 1\nerr 2\nerr 3\njob {both} FAILED (exit code 4)\n"
    assert followed.returncode == 4
    tail = corral("logs", "-a", "-n", "1", both)  # the last line of each
    assert (tail.stdout, tail.stderr, tail.returncode) == ("out 3\n", "err 3\n", 0)
    # one file for both: shown once, in the order written
    one = submit(corral, "-o", f"{short_tmp}/one", "--", "sh", "-c", "echo a; echo b >&2; echo c")
    followed = corral("logs", "-f", "-a", one)
    assert (followed.stdout, followed.stderr, followed.returncode) == ("a\nb\nc\n", "", 0)
    refused = corral("logs", "--both", "--stderr", one)
    assert refused.returncode == 2 and "give --both or --stderr" in refused.stderr
    assert "--both" in corral("logs", "--help").stdout
