"""Delivery dispatch: `DeliveryDispatcher`, a thread that sends due deliveries through their channels.

Deliveries are rows in the database, so a slow mail server never delays sampling and nothing is lost
across a restart; a failed attempt is tried again later (`channels.retry_delay_s`) or given up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from corral.monitor.views import notification
from corral.store.monitoring import MonitorStore

if TYPE_CHECKING:
    from corral.monitor.channels import SmtpSettings

log = logging.getLogger("corral.monitor")

DISPATCH_IDLE_S = 5.0


class DeliveryDispatcher:
    def __init__(self, *, engine: Any, store: MonitorStore, smtp: SmtpSettings, clock: Callable[[], float]) -> None:
        self.engine = engine
        self.store = store
        self.smtp = smtp
        self.clock = clock
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="corral-alerts", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """New deliveries are due now."""
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def join(self) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout=15)

    def _loop(self) -> None:
        while not self._closed:
            try:
                with self.engine.begin() as conn:
                    due = self.store.due_deliveries(conn, self.clock())
                for item in due:
                    if self._closed:
                        return
                    self.deliver(item)
                with self.engine.begin() as conn:
                    next_due = self.store.next_due(conn)
            except Exception:  # noqa: BLE001 - a database hiccup: try again shortly
                log.exception("alert dispatch failed")
                next_due = None
            wait = DISPATCH_IDLE_S if next_due is None else min(DISPATCH_IDLE_S, max(0.0, next_due - self.clock()))
            if self._wake.wait(wait):
                self._wake.clear()

    def deliver(self, item: Mapping[str, Any]) -> None:
        """One attempt at one delivery, and its outcome recorded: sent, retried later, or given up."""
        from corral.monitor.channels import Channel, DeliveryError, deliver, retry_delay_s

        attempts = item["attempts"] + 1
        error = None
        try:
            if item["channel_type"] is None:
                raise DeliveryError(f"channel {item['channel']!r} no longer exists")
            channel = Channel(item["channel"], item["channel_type"], item["channel_config"])
            deliver(channel, notification(item["firing"], item["event"]), self.smtp)
        except DeliveryError as exc:
            error = exc.message
        except Exception as exc:  # noqa: BLE001 - one bad row must not hold up the ones behind it
            error = f"{type(exc).__name__}: {exc}"
        with self.engine.begin() as conn:
            if error is None:
                self.store.delivered(conn, item["delivery_id"], attempts, self.clock())
                return
            delay = retry_delay_s(attempts) if item["channel_type"] is not None else None
            retry_at = None if delay is None else self.clock() + delay
            self.store.delivery_failed(conn, item["delivery_id"], attempts, error, retry_at)
        log.warning("alert delivery %d to %s failed (attempt %d%s): %s", item["delivery_id"], item["channel"],
                    attempts, "" if retry_at else ", giving up", error)
