"""How many of a thing each key holds at once (connections per user, streams per user): pure counting."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass
class ConcurrencyCap:
    """At most `limit` held at once per key (0: no limit); what one key holds never counts against another."""

    limit: int
    _held: dict[Hashable, int] = field(default_factory=dict)

    def acquire(self, key: Hashable) -> bool:
        """Take one for `key`; False (and nothing taken) when `key` already holds `limit`."""
        held = self._held.get(key, 0)
        if self.limit > 0 and held >= self.limit:
            return False
        self._held[key] = held + 1
        return True

    def release(self, key: Hashable) -> None:
        """Give back one that `acquire` gave `key`."""
        held = self._held.get(key, 0) - 1
        if held > 0:
            self._held[key] = held
        else:
            self._held.pop(key, None)

    def held(self, key: Hashable) -> int:
        return self._held.get(key, 0)
