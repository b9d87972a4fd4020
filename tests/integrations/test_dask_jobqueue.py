"""dask-jobqueue's SLURMCluster, unchanged, on a corral server with no Slurm: it submits its workers
with sbatch (a script of #SBATCH lines), they join the scheduler from inside corral jobs, compute, and
end when the cluster closes (scancel)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import needs

pytestmark = needs("dask_jobqueue", "distributed")


@pytest.fixture
def cluster(server_factory, tmp_path, monkeypatch):
    import dask_jobqueue

    server = server_factory()
    slurm_path = subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, "slurm-path"],
                                capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setenv("PATH", f"{slurm_path}:{os.environ['PATH']}")
    monkeypatch.setenv("CORRAL_HOME", server.home)
    for name in [k for k in os.environ if k.startswith(("SLURM_", "SBATCH_"))]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    cluster = dask_jobqueue.SLURMCluster(cores=1, processes=1, memory="1GB", walltime="00:05:00",
                                         log_directory=str(tmp_path / "logs"), scheduler_options={"host": "127.0.0.1"})
    cluster.server = server  # for the test to look at corral's side
    try:
        yield cluster
    finally:
        cluster.close()


def test_workers_run_as_corral_jobs_and_end_when_the_cluster_closes(cluster, tmp_path):
    import distributed

    corral = cluster.server.client()
    cluster.scale(2)
    with distributed.Client(cluster) as client:
        client.wait_for_workers(2, timeout=120)
        job_ids = sorted(job.job_id for job in cluster.workers.values())
        where = client.run(lambda: os.environ["SLURM_JOB_ID"])  # each worker's own job
        assert sorted(where.values()) == job_ids
        assert client.submit(sum, range(101)).result(timeout=60) == 5050
        squares = client.map(lambda x: x * x, range(20))
        assert client.gather(squares) == [x * x for x in range(20)]
        for job_id in job_ids:
            record = corral.get(job_id)
            assert (record["state"], record["name"]) == ("RUNNING", "dask-worker")
            assert (record["cpus"], record["mem_mb"], record["time_limit_s"]) == (1, 954, 300)  # --mem=954M
            assert record["stdout_path"] == str(tmp_path / "logs" / f"dask-worker-{job_id}.out")
    cluster.close()
    for job_id in job_ids:
        assert corral.wait(job_id, timeout=60)["state"] == "CANCELLED"
    assert "Starting Worker" in (tmp_path / "logs" / f"dask-worker-{job_ids[0]}.err").read_text()
