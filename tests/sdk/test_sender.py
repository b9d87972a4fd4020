"""When a run's server goes away: the sender tries again within seconds, then less and less often."""

from __future__ import annotations

import time

import pytest

import corral
from corral.sdk.backoff import retry_delay
from tests.helpers import wait_for
from tests.sdk.conftest import spooled_files

pytestmark = pytest.mark.usefixtures("sdk_env")


def test_tries_wait_1_2_4_seconds_and_so_on_up_to_the_longest_wait():
    assert [retry_delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 30, 30, 30]
    assert [retry_delay(n, longest=3) for n in range(1, 5)] == [1, 2, 3, 3]
    assert retry_delay(1, longest=0.1) == 0.1  # tests and impatient users: never longer than asked
    assert retry_delay(10_000) == 30


def test_a_spooling_run_tries_the_server_again_within_seconds_then_less_and_less_often(fake, sdk_env):
    run = corral.init(project="p", client=fake, flush_interval_s=0.05)  # the default longest wait, 30 s
    run.log({"loss": 0.0}, step=0)
    run.flush()
    live_calls = fake.count("log_metrics")
    fake.down = True
    began = time.monotonic()  # before the failure: every try comes at least its waits after this
    run.log({"loss": 1.0}, step=1)
    run.flush()
    assert spooled_files(sdk_env)

    def tries() -> int:
        return fake.count("log_metrics") - live_calls - 1  # less the send that failed

    wait_for(lambda: tries() >= 1, timeout=10)  # seconds after the failure, not the old 30
    wait_for(lambda: tries() >= 3, timeout=60)
    assert time.monotonic() - began >= 1 + 2 + 4 - 0.01  # backing off, not hammering a server that is down

    fake.down = False
    wait_for(lambda: not [f for f in spooled_files(sdk_env) if "/batches/" in f], timeout=60)
    run.finish()
    assert fake.steps(run.id, "loss") == [0, 1]
