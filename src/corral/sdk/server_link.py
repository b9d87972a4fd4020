"""A sender's client for the server: made on first use, dropped after a failure so the next try makes a fresh one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Connect = Callable[[], Any]
"""Returns a client (corral.client.Client or anything with its run methods); may raise."""


class ServerLink:
    def __init__(self, connect: Connect | None) -> None:
        self._connect = connect
        self._client: Any = None

    @property
    def offline(self) -> bool:
        """An offline run never reaches for the server: everything goes to its spool."""
        return self._connect is None

    def client(self) -> Any:
        if self._client is None:
            if self._connect is None:
                raise RuntimeError("offline")
            self._client = self._connect()
        return self._client

    def drop(self) -> None:
        # a fresh client finds the server again (a restarted server may listen on a new port)
        client, self._client = self._client, None
        if client is not None and hasattr(client, "close"):
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass
