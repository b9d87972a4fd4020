"""When a spooling run next tries the server: 1 s after a failure, then 2 s, 4 s ... at most the longest wait."""

from __future__ import annotations

import time
from collections.abc import Callable

FIRST_RETRY_S = 1.0  # a restarted server is back within seconds: so is its runs' data
RETRY_INTERVAL_S = 30.0  # the longest wait between two tries


def retry_delay(failures: int, longest: float = RETRY_INTERVAL_S) -> float:
    """Seconds to wait after `failures` failed tries in a row: 1, 2, 4 ... and at most `longest`.

    The first try comes soon, since a restarted server is back within seconds; doubling keeps
    every run on the box from knocking each second on a server that stays down. (Their flush
    timers differ, which spreads their tries.)
    """
    return min(longest, FIRST_RETRY_S * 2.0 ** min(max(failures, 1) - 1, 16))


class Backoff:
    def __init__(self, longest: float = RETRY_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._longest = longest
        self._clock = clock
        self._failures = 0  # tries in a row that did not reach the server
        self._next_try = 0.0

    def failed(self) -> None:
        self._failures += 1
        self._next_try = self._clock() + retry_delay(self._failures, self._longest)

    def succeeded(self) -> None:
        self._failures = 0

    def due(self) -> bool:
        return self._clock() >= self._next_try
