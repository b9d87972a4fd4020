"""When the job service reaps ended jobs and runs scheduling passes (`SchedulingLoop`).

Neither blocks the API for long: outcomes are read off the event loop and applied in one batch,
and a pass is followed by a pause proportional to its own work (time spent waiting on another
program excluded), capped at PASS_GAP_MAX_S. A change wakes the loop at once; an idle queue
is looked at again every IDLE_PASS_INTERVAL_S.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("corral.server")

POLL_INTERVAL_S = 0.05
IDLE_PASS_INTERVAL_S = 5.0
PASS_GAP_FACTOR = 4.0  # after a pass, wait this many times its work before the next: passes take at most a fifth
PASS_GAP_MAX_S = 0.5  # ... but never longer than this: resources that free up are used again within a second


class SchedulingLoop:
    def __init__(self, *, reap: Callable[[], Awaitable[None]], schedule_pass: Callable[[], None],
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._reap = reap
        self._schedule_pass = schedule_pass
        self.monotonic = monotonic
        self.dirty = True
        """Something changed since the last pass."""
        self.waited_s = 0.0
        """Of the running pass, the time spent waiting on another program (sbatch), not thinking."""
        self._wake: asyncio.Event | None = None
        self._next_pass_at = 0.0

    def wake(self) -> None:
        """A change: pass again as soon as the gap allows."""
        self.dirty = True
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Reap and pass until cancelled."""
        self._wake = asyncio.Event()
        last_full_pass = 0.0
        while True:
            try:
                # On Python 3.11 wait_for drops a cancel that comes as the event is set: the server's shutdown
                # cancels again until the loop is gone (`corral.api.app.stop_task`). Its extra turns of the event
                # loop are kept on purpose: a submit's answer is sent before the pass that the insert woke.
                await asyncio.wait_for(self._wake.wait(), POLL_INTERVAL_S)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._reap()
                now = self.monotonic()
                if now - last_full_pass >= IDLE_PASS_INTERVAL_S:
                    self.dirty = True
                if self.dirty and now >= self._next_pass_at:
                    last_full_pass = now
                    self.waited_s = 0.0
                    self._schedule_pass()
                    work = self.monotonic() - now - self.waited_s
                    self._next_pass_at = self.monotonic() + min(PASS_GAP_MAX_S, PASS_GAP_FACTOR * work)
            except Exception:  # noqa: BLE001 - the loop must outlive any one bad pass
                log.exception("scheduler loop iteration failed")
                await asyncio.sleep(POLL_INTERVAL_S)
