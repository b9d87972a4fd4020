"""What Slurm's commands ask about the machine: its nodes, partitions and priority weights, one request each."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from corral.cli.wire import Server


def nodes(service: Server) -> list[dict[str, Any]]:
    answer: list[dict[str, Any]] = service.ask("GET", "/api/v1/nodes")
    return answer


def partitions(service: Server) -> tuple[list[dict[str, Any]], str | None, dict[str, int]]:
    """(the partitions, the default one's name, the priority weights)."""
    answer = service.ask("GET", "/api/v1/partitions")
    rows = answer["partitions"]
    default = next((row["name"] for row in rows if row.get("default")), None)
    return rows, default, answer["weights"]


def node_name() -> str:
    return os.uname().nodename.split(".")[0]
