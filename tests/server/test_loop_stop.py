"""The server's shutdown stops its scheduling loop even when the cancel comes as the loop is woken (a job event
at that moment): on Python 3.11 `asyncio.wait_for` returns the wake-up and drops the cancel, and a server told to
stop amid job events waited on its loop for ever (found as a test server still alive long after `corral down`).
`stop_task` cancels again while the task runs on."""

from __future__ import annotations

import asyncio
import threading

from corral.api.app import stop_task
from corral.server.loop import SchedulingLoop


async def _nothing() -> None:
    return None


def test_a_cancel_that_comes_with_a_wake_up_still_stops_the_loop():
    async def scenario() -> bool:
        loop = SchedulingLoop(reap=_nothing, schedule_pass=lambda: None)
        task = asyncio.create_task(loop.run())
        await asyncio.sleep(0.01)  # waiting to be woken
        loop.wake()
        try:
            await asyncio.wait_for(stop_task(task), 10)  # its first cancel comes in the same turn as the wake-up
        except TimeoutError:
            return False
        return task.cancelled()

    # a thread of its own: a browser test in the same worker may have left an event loop running in this one
    stopped: list[bool] = []
    runner = threading.Thread(target=lambda: stopped.append(asyncio.run(scenario())))
    runner.start()
    runner.join(15)
    assert stopped == [True]
