"""The monitor's threads and its line to the dashboard, shared by its parts.

One worker thread owns the alert state (rules, sharing, episodes): a tick and every change to the
rules run on it, one at a time, so a rule fires once per episode. Reads run on a small pool of their
own connections, so a slow query never delays a tick.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

if TYPE_CHECKING:
    from corral.event_bus import EventBus


class MonitorThreads:
    """The worker thread (alert state, ticks) and the readers (queries) over one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-monitor")
        self.readers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="corral-monitor-read")

    async def read(self, fn: Callable[[Any], Any]) -> Any:
        """`fn(conn)` on a reader thread, on a connection of its own."""
        def run() -> Any:
            with self.engine.connect() as conn:
                return fn(conn)

        return await self.on_reader(run)

    async def on_reader(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.readers, fn)

    async def on_worker(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.worker, fn)

    def close(self) -> None:
        self.worker.shutdown(wait=True, cancel_futures=True)
        self.readers.shutdown(wait=False, cancel_futures=True)


class Announcer:
    """Tells the dashboard what changed, once the app has given it the event bus."""

    def __init__(self) -> None:
        self.events: EventBus | None = None

    def publish(self, name: str, data: dict[str, Any]) -> None:
        """On the event loop's thread."""
        if self.events is not None:
            self.events.publish(name, data)

    def publish_threadsafe(self, name: str, data: dict[str, Any]) -> None:
        """From the worker thread."""
        if self.events is not None:
            self.events.publish_threadsafe(name, data)
