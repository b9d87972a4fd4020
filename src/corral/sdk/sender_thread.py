"""A sender's thread, and how the training thread asks it to flush or to stop and learns that it has.

The thread works in rounds: it waits (for the flush interval, a flush or close request, or a long
queue), takes a ticket, does its work, and marks the ticket served; `flush` waits for a ticket
taken after it asked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sized

WAKE_ITEMS = 3 * 20_000  # a queue of 20,000 records is sent before the interval is up
WAKE_CHECK_S = 0.05    # how often the thread looks at the queue's length while it waits


class SenderThread:
    def __init__(self, target: Callable[[], None], flush_interval_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.flush_interval_s = flush_interval_s
        self._clock = clock
        self._cond = threading.Condition()
        self._requested = 0
        self._served = 0
        self._closing = False
        self._thread = threading.Thread(target=target, name="corral-sender", daemon=True)

    # -- called from the training thread ----------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until a round that began after this call is done; False on timeout."""
        with self._cond:
            self._requested += 1
            ticket = self._requested
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._served >= ticket or not self._thread.is_alive(), timeout)

    def close(self, timeout: float | None) -> bool:
        """Ask for a last round, wait for the thread to end; False if `timeout` ran out."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- called from the thread itself ------------------------------------------------------------

    def wait(self, queue: Sized) -> None:
        deadline = self._clock() + self.flush_interval_s
        with self._cond:
            while not (self._requested > self._served or self._closing):
                left = deadline - self._clock()
                if left <= 0 or len(queue) >= WAKE_ITEMS:
                    return
                self._cond.wait(min(left, WAKE_CHECK_S))

    def begin_round(self) -> tuple[int, bool]:
        """The ticket this round serves, and whether it is the last (a close was asked)."""
        with self._cond:
            return self._requested, self._closing

    def end_round(self, ticket: int) -> None:
        with self._cond:
            self._served = ticket
            self._cond.notify_all()
