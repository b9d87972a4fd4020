"""The thread that asks the backend which placed jobs ended (`PollThread`), off the event loop.

It shares the GIL with the loop, so it rests between looks in proportion to how long its last
look took: a slow backend is asked less often instead of slowing the API.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from corral.backends.base import Ended
from corral.core.jobspec.job import Job

POLL_GAP_FACTOR = 3.0  # the poll thread rests this many times as long as its last look took (it shares the GIL)


class PollThread:
    def __init__(self, poll: Callable[[list[Job]], Sequence[Ended]]) -> None:
        """`poll`: the backend's look at running jobs (`Placement.poll`)."""
        self._poll = poll
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-poll")
        self._next_poll_at = 0.0

    def due(self) -> bool:
        """Rested long enough since the last look."""
        return time.monotonic() >= self._next_poll_at

    async def poll(self, running: list[Job]) -> Sequence[Ended]:
        started = time.monotonic()
        ended = await asyncio.get_running_loop().run_in_executor(self._executor, self._poll, running)
        self._next_poll_at = time.monotonic() + POLL_GAP_FACTOR * (time.monotonic() - started)
        return ended

    def close(self) -> None:
        self._executor.shutdown(wait=True)
