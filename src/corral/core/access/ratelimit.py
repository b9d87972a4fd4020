"""Per-caller token buckets: a burst is fine, a flood from one user is slowed, the others are not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class RateLimiter:
    """`rate` requests a second on average, `burst` at once; the clock is a parameter."""

    rate: float
    burst: float
    clock: Callable[[], float]
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (tokens, as of)

    def take(self, key: str) -> float:
        """Spend one request of `key`'s; returns 0 if allowed, else the seconds until one is."""
        now = self.clock()
        tokens, at = self._buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1, now)
        if len(self._buckets) > 10_000:
            self._forget_full(now)
        return 0.0

    def wait(self, key: str) -> float:
        """Seconds until `key` may spend one (0: now), spending nothing."""
        now = self.clock()
        tokens, at = self._buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def _forget_full(self, now: float) -> None:
        """Drop the buckets that have refilled: they hold nothing a fresh bucket would not."""
        for key, (tokens, at) in list(self._buckets.items()):
            if tokens + (now - at) * self.rate >= self.burst:
                del self._buckets[key]
