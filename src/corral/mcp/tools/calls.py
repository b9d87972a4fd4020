"""What every tool shares: `ToolCalls`, which lends each call a client made with that call's own
credential, and the limits and argument types tools of several concepts take."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, StrictInt, StrictStr

from corral.core.jobspec.states import TERMINAL_STATES
from corral.errors import Unauthenticated
from corral.mcp.clients import ClientPool
from corral.mcp.credentials import AGENT_TOKEN, NO_TOKEN

if TYPE_CHECKING:
    from corral.client import Client

TERMINAL = frozenset(state.value for state in TERMINAL_STATES)
MAX_GPUS = 1024

JobId = Annotated[StrictInt | StrictStr, Field(description=(
    "The job's id as create_gpu_job or workload_submit returned it: 12, or \"12_3\" for task 3 of array 12."))]


class ToolCalls:
    """Calls to corral through `clients`, each with its own call's credential (see `CorralTools`)."""

    def __init__(self, clients: ClientPool, cwd: str | None = None, *, tokens_required: bool = False) -> None:
        self._clients = clients
        self._cwd = cwd or os.getcwd()
        self._tokens_required = tokens_required

    @contextmanager
    def _client(self) -> Iterator[Client]:
        token = AGENT_TOKEN.get()
        if token is None and self._tokens_required:
            raise Unauthenticated(NO_TOKEN)
        with self._clients.client(token) as client:
            yield client
