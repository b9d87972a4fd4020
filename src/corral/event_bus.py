"""Server-sent events: what changed, pushed to the dashboard as it happens.

Publishers on the event loop call `publish`; threads (the tracking writer, the monitor) call
`publish_threadsafe`. Each subscriber has a small queue: one that falls behind loses the oldest
events, never slows a publisher, and catches up by refetching (an event says *what* changed,
not the new state).

It sits low in the layers, using the standard library alone: the API makes the bus, and the monitor, below
the server, publishes on it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

QUEUE_SIZE = 256


@dataclass(frozen=True)
class Event:
    name: str  # jobs | runs | samples | alerts | log
    data: dict[str, Any]

    def encode(self) -> str:
        return f"event: {self.name}\ndata: {json.dumps(self.data, separators=(',', ':'))}\n\n"


class Subscriber:
    """One listener's events waiting to be sent. One that fell so far behind that events were
    dropped is told to refetch everything (`overflowed`), rather than missing one silently."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Event] = asyncio.Queue(QUEUE_SIZE)
        self.overflowed = False

    def put(self, event: Event) -> None:
        if self.queue.full():
            self.queue.get_nowait()
            self.overflowed = True
        self.queue.put_nowait(event)

    def drain(self) -> list[Event]:
        out = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        return out


class EventBus:
    def __init__(self) -> None:
        self._subscribers: set[Subscriber] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the subscribers live on (the server's)."""
        self._loop = loop

    def subscribe(self) -> Subscriber:
        subscriber = Subscriber()
        self._subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.discard(subscriber)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def publish(self, name: str, data: dict[str, Any]) -> None:
        """On the loop thread: hand the event to every subscriber."""
        event = Event(name, data)
        for subscriber in self._subscribers:
            subscriber.put(event)

    def publish_threadsafe(self, name: str, data: dict[str, Any]) -> None:
        """From any thread; dropped when no one listens or the loop is gone."""
        if self._subscribers and self._loop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self.publish, name, data)
            except RuntimeError:  # the loop closed in between
                pass
