"""Backends by name: `corral up --backend NAME` picks one from KINDS.

A backend is a package (or module) under `corral.backends` with a `KIND` object that finds the
nodes it runs jobs on and opens the backend (`BackendKind`); adding one is a new folder and a
line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from corral.backends.base import Backend, Capabilities
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Node
from corral.errors import InvalidRequest

KINDS: dict[str, str] = {
    "local": "corral.backends.local.backend",
    "slurm": "corral.backends.slurm.backend",
}
"""Each backend's name and the module whose `KIND` builds it."""


@dataclass(frozen=True)
class BackendSetup:
    """What the server hands a backend when it opens it."""

    home: str
    settings: Any
    """The server's options (`corral.compose.config.ServerOptions`): each backend reads its own."""
    nodes: Sequence[Node]
    """The nodes `BackendKind.nodes` found."""
    server_env: Mapping[str, str]
    server_url: Callable[[], str | None]
    job_token: Callable[[Job], str]
    """An API token of the job's owner, for a job that runs on another machine."""
    owner_lookup: Callable[[str], Any] | None = None
    """The account a user's jobs run as (a shared server); None: as the server's own user."""
    cgroup_layout: Mapping[str, Any] | None = None


class BackendKind(Protocol):
    capabilities: Capabilities
    """What the backend it opens can do, known before it is opened (the server is wired by it)."""

    def nodes(self, settings: Any) -> list[Node]:
        """The nodes jobs run on, as the backend knows them.

        Raises:
            InvalidRequest: the backend cannot be reached.
        """

    def open(self, setup: BackendSetup) -> Backend: ...


def backend_kind(name: str) -> BackendKind:
    """The backend called `name`.

    Raises:
        InvalidRequest: no backend has that name.
    """
    module = KINDS.get(name)
    if module is None:
        raise InvalidRequest("backend", f"there is no backend {name!r}", f"use one of {', '.join(KINDS)}")
    kind: BackendKind = importlib.import_module(module).KIND
    return kind
