"""The tools about the cluster: its GPUs, draining and resuming them (admins only), and the queue."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlencode

from pydantic import Field, StrictInt

from corral.mcp import bounds, draining
from corral.mcp.lookups import get_json
from corral.mcp.results import GpuList, QueueView
from corral.mcp.tools.calls import ToolCalls
from corral.mcp.views import gpu_list, queue_view


class ClusterTools(ToolCalls):
    """drain_gpus, resume_gpus, list_gpus and queue."""

    def drain_gpus(
        self,
        reason: Annotated[str, Field(min_length=1, max_length=1000, description=(
            "Why, as people will read it in corral nodes and scontrol show node, e.g. \"XID 79\", \"fan failure\"."))],
        gpus: Annotated[list[StrictInt] | None, Field(max_length=64, description=(
            "GPU indexes on the node (see list_gpus); leave out to drain the whole node."))] = None,
        node: Annotated[str | None, Field(max_length=200, description=(
            "The node; leave out on a server with one node."))] = None,
    ) -> draining.DrainResult:
        """Take GPUs (or a node) out of scheduling, admins only; jobs on them run to their end."""
        with self._client() as client:
            return draining.drain(client, node, gpus, reason)

    def resume_gpus(
        self,
        gpus: Annotated[list[StrictInt] | None, Field(max_length=64, description=(
            "GPU indexes to give back; leave out to resume the node and all its GPUs."))] = None,
        node: Annotated[str | None, Field(max_length=200, description=(
            "The node; leave out on a server with one node."))] = None,
    ) -> draining.DrainResult:
        """Give drained GPUs (or a node) back to scheduling, admins only."""
        with self._client() as client:
            return draining.resume(client, node, gpus)

    def list_gpus(self) -> GpuList:
        """Every GPU now: free, or held by which job and user; totals per type."""
        with self._client() as client:
            return gpu_list(get_json(client, "/api/v1/cluster"))

    def queue(
        self,
        state: Annotated[Literal["PENDING", "RUNNING"] | None, Field(description="Only these.")] = None,
        user: Annotated[str | None, Field(max_length=64, description="Only this user's jobs.")] = None,
        limit: Annotated[StrictInt, Field(ge=1, le=bounds.MAX_LIST, description=(
            "At most this many jobs (fewer when their names are long: an answer stays short)."))] = 50,
    ) -> QueueView:
        """Running jobs, then pending ones in priority order with their reasons and estimated starts."""
        query = [("limit", str(limit))] + [(k, v) for k, v in (("state", state), ("user", user)) if v is not None]
        with self._client() as client:
            page = get_json(client, f"/api/v1/queue?{urlencode(query)}")
        return queue_view(page, limit)
