"""drain_gpus and resume_gpus: an admin's agent takes GPUs out of scheduling (a GPU that misbehaves, a node
under maintenance) and gives them back, through the API's drain and resume (admins only: anyone else is
refused, saying so). The answer is the node's GPUs as they are then: which are drained, why, by whom, and
what NVML last said of each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from corral.errors import InvalidRequest

if TYPE_CHECKING:
    from corral.client import Client


class DrainResult(TypedDict):
    node: str
    gpus: list[dict[str, Any]]
    """Each GPU of the node: index, drained (its reason, by, at) or null, state (DRAINING, DRAINED) or null,
    the job on it, and its last health event."""
    message: str


def drain(client: Client, node: str | None, gpus: Sequence[int] | None, reason: str) -> DrainResult:
    name = _node_named(client, node)
    drained = client.drain(name, reason, list(gpus) if gpus is not None else None)
    what = "node " + name if gpus is None else f"GPU {', '.join(map(str, gpus))} of node {name}"
    return _result(drained, name, f"{what} drained: no new job is placed there; jobs already on it run to their "
                                  "end. resume_gpus gives it back.")


def resume(client: Client, node: str | None, gpus: Sequence[int] | None) -> DrainResult:
    name = _node_named(client, node)
    resumed = client.resume(name, list(gpus) if gpus is not None else None)
    what = "node " + name if gpus is None else f"GPU {', '.join(map(str, gpus))} of node {name}"
    return _result(resumed, name, f"{what} resumed: jobs are placed there again.")


def _node_named(client: Client, node: str | None) -> str:
    """The node named, or the server's only one."""
    if node is not None:
        return node
    names = [n["name"] for n in client.nodes()]
    if len(names) != 1:
        raise InvalidRequest("node", f"this server has {len(names)} nodes ({', '.join(names) or 'none'})",
                             "name the node the GPUs are on")
    return str(names[0])


def _result(nodes: Sequence[Mapping[str, Any]], name: str, message: str) -> DrainResult:
    node: Mapping[str, Any] = next((n for n in nodes if n.get("name") == name), {"gpus": []})
    gpus = []
    for gpu in node.get("gpus", []):
        events = (gpu.get("health") or {}).get("events") or []
        gpus.append({"index": gpu["index"], "drained": gpu.get("drained"), "state": gpu.get("drain_state"),
                     "job_id": gpu.get("job_ref") or gpu.get("job_id"),
                     "last_health_event": events[-1] if events else None})
    return {"node": name, "gpus": gpus, "message": message}
