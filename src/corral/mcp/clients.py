"""The corral clients the tools talk through: one per call, kept for reuse per credential."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from corral.errors import CorralError, ServerUnavailable

if TYPE_CHECKING:
    from corral.client import Client

IDLE_PER_TOKEN = 4
"""Idle clients kept for one credential: calls of one agent in parallel, each on a connection of its own."""
TOKENS = 64
"""Credentials whose clients are kept; the one used longest ago goes first."""


class ClientPool:
    """Clients made by `connect(token)`, lent one per call and kept idle afterwards under their token.

    A `Client` holds one HTTP connection and is not safe to share between threads, and tools may run in
    parallel: each call borrows a client of its own, made with the token of the request it serves
    (None: the credential of whoever started `corral mcp`). Returned, it keeps its connection alive
    for the next call with that token.
    """

    def __init__(self, connect: Callable[[str | None], Client], *, idle_per_token: int = IDLE_PER_TOKEN,
                 tokens: int = TOKENS) -> None:
        self._connect = connect
        self._idle: OrderedDict[str | None, list[Client]] = OrderedDict()
        self._idle_per_token = idle_per_token
        self._tokens = tokens
        self._lock = threading.Lock()

    @contextmanager
    def client(self, token: str | None) -> Iterator[Client]:
        """A client that calls corral with `token`, for the length of the block.

        Raises:
            ServerUnavailable: no corral server to make a client for (the home has none).
        """
        with self._lock:
            idle = self._idle.get(token)
            client = idle.pop() if idle else None
        if client is None:
            client = self._connect(token)
        try:
            yield client
        except CorralError as exc:
            # an answer from corral leaves the connection fit for the next call; a server that went away
            # may come back at another address, which a fresh client reads from the home
            if isinstance(exc, ServerUnavailable):
                client.close()
            else:
                self._keep(token, client)
            raise
        except BaseException:
            client.close()
            raise
        self._keep(token, client)

    def _keep(self, token: str | None, client: Client) -> None:
        evicted: list[Client] = []
        with self._lock:
            idle = self._idle.setdefault(token, [])
            self._idle.move_to_end(token)
            if len(idle) < self._idle_per_token:
                idle.append(client)
            else:
                evicted.append(client)
            while len(self._idle) > self._tokens:
                evicted.extend(self._idle.popitem(last=False)[1])
        for old in evicted:
            old.close()

    def close(self) -> None:
        """Close every idle client."""
        with self._lock:
            idle = [client for clients in self._idle.values() for client in clients]
            self._idle.clear()
        for client in idle:
            client.close()
