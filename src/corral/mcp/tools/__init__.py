"""The tools an agent is given: each checks its input, makes its calls to the corral server with the
agent's credential (over HTTP the token of the request; over stdio whoever started `corral mcp`),
and returns a bounded, structured answer.

Independent of the MCP SDK: `corral.mcp.server` registers these methods as tools. Failures are
`corral.errors` types whose `field` is the tool's own argument name (`gpu_memory`, `workloadId`),
so the agent learns which argument to change.

`CorralTools` gathers them from one module per concept: `gpu_jobs` (create, forecast, view, stop),
`workloads` (the seed's workload shape: submit, get, logs, metrics, alerts), `cluster` (GPUs, draining,
the queue), `runs` (tracked runs and their metrics) and `advice` (sizing, diagnosis, efficiency), each
on `calls.ToolCalls`, which lends every call its client.
"""

from __future__ import annotations

from corral.mcp.tools.advice import AdviceTools
from corral.mcp.tools.cluster import ClusterTools
from corral.mcp.tools.gpu_jobs import GpuJobTools
from corral.mcp.tools.runs import RunTools
from corral.mcp.tools.workloads import WorkloadTools


class CorralTools(GpuJobTools, WorkloadTools, ClusterTools, RunTools, AdviceTools):
    """The tools, calling corral through `clients` with each call's own credential.

    Args:
        clients: lends a `corral.client.Client` for a token (None: the credential `corral mcp` started with).
        cwd: the directory relative working directories start from (where `corral mcp` runs).
        tokens_required: every call must come with an agent's token (`AGENT_TOKEN`): over HTTP, where
            falling back to the credential of whoever started `corral mcp` would lend it to anyone.
    """
