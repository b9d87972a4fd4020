"""The MCP tools against a server with the Slurm backend, on the real testbed (scripts/slurm-testbed.sh):
the same agent session drives jobs that Slurm runs, and an `image` goes to Slurm through Pyxis."""

from __future__ import annotations

import anyio

from tests.mcp.test_session import call, over_stdio, poll, refused


def test_an_agent_drives_slurm_jobs_through_mcp(slurm, short_tmp):
    corral = slurm.client()

    async def session() -> None:
        async with over_stdio(slurm.home, cwd=short_tmp) as agent:
            job = await call(agent, "create_gpu_job", gpus=1, name="on-slurm",
                             command='echo "slurm job $SLURM_JOB_ID on GPU $CUDA_VISIBLE_DEVICES"')
            ended = await poll(agent, job["job_id"], lambda v: v["state"] not in ("PENDING", "RUNNING"), timeout=90)
            assert ended["state"] == "COMPLETED"
            assert any("slurm job" in line for line in ended["stdout_tail"]["lines"]), ended
            sleeper = await call(agent, "create_gpu_job", gpus=1, command="sleep 300", name="to-stop")
            await poll(agent, sleeper["job_id"], lambda v: v["state"] == "RUNNING", timeout=90)
            stopped = await call(agent, "stop_gpu_job", job_id=sleeper["job_id"])
            assert stopped["state"] in ("CANCELLED", "RUNNING")
            queued = await call(agent, "workload_submit", name="in-a-container", image="nvcr.io/nvidia/pytorch:24.05-py3",
                                command=["python", "-c"], args=["print('hi')"], gpus=1, maxRuntimeSeconds=120)
            script = corral.get(queued["workloadId"])["script"]
            assert "srun --container-image=nvcr.io/nvidia/pytorch:24.05-py3" in script  # Pyxis takes it to Slurm
            assert "command" in await refused(agent, "workload_submit", name="bad", command=[], gpus=1)

    anyio.run(session)
    for job in corral.queue():
        corral.cancel(job["id"])
