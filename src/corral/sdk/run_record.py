"""Who a run is: what `corral.init` asked for, and what the server answered about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunRecord:
    project: str
    name: str | None
    uid: str
    mode: str
    rank: int
    id: int | None = None
    resumed: bool = False
    summary: dict[str, Any] = field(default_factory=dict)

    def created(self, server_run: dict[str, Any]) -> None:
        """The run reached the server (late, from the sender's thread, when `init` could not reach it)."""
        self.id = server_run.get("id")
        self.uid = server_run.get("uid") or self.uid
