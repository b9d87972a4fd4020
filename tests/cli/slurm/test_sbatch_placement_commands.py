"""sbatch's --begin, --exclusive, --constraint, --nodelist, --cpus-per-gpu and --mail-type typed as a Slurm user types
them, read back through corral's squeue (reason BeginTime) and the job JSON."""

from __future__ import annotations

import socket
import time


def test_a_job_submitted_with_begin_waits_in_squeue_with_reason_begin_time(server_factory, slurm_shell):
    server = server_factory()
    shell = slurm_shell(server.home)
    out = shell('sbatch --parsable --begin=now+1hour --wrap "true"')
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    shown = shell(f'sleep 1; squeue -h -j {job_id} -o "%i %t %r"')
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [job_id, "PD", "BeginTime"]
    begins = time.strftime("%Y-%m-%dT%H:%M", time.localtime(time.time() + 3600))
    start = shell(f'squeue -h -j {job_id} -o "%S"').stdout.strip()
    assert start[:16] in (begins, time.strftime("%Y-%m-%dT%H:%M", time.localtime(time.time() + 3540))), start


def test_sbatch_passes_placement_and_mail_options_to_the_server(server_factory, slurm_shell):
    server = server_factory()
    shell = slurm_shell(server.home)
    host = socket.gethostname()
    out = shell(f'sbatch --parsable -H --exclusive -w {host} --gpus=2 --cpus-per-gpu=1 --mail-type=END,FAIL '
                '--mail-user=me@lab.test --wrap "true"')
    assert out.returncode == 0, out.stderr
    job = server.client().get(int(out.stdout.strip()))
    assert (job["exclusive"], job["nodelist"], job["gpus"], job["cpus"]) == (True, [host], 2, 2)
    assert (job["mail_type"], job["mail_user"], job["held"]) == (["END", "FAIL"], "me@lab.test", True)
    refused = shell('sbatch -C nosuch --wrap "true"')
    assert refused.returncode == 1 and refused.stderr.startswith("sbatch: error: ")
    assert "nosuch" in refused.stderr


def test_an_exclusive_job_is_given_and_shown_every_cpu_all_memory_and_every_gpu(server_factory, slurm_shell, tmp_path):
    """One truth, as Slurm's NumCPUs shows the node's: what it runs with, and what every view says it holds."""
    import json
    import os

    from click.testing import CliRunner

    from corral.cli.main import cli
    from tests.helpers import wait_for

    server = server_factory(extra=["--cpus", "8", "--mem", "16G"])  # 4 GPUs, 8 CPUs, 16 GB to schedule
    shell = slurm_shell(server.home)
    out = shell("sbatch --parsable --exclusive -o %j.out --wrap 'echo cpus=$SLURM_CPUS_ON_NODE "
                "per_node=$SLURM_JOB_CPUS_PER_NODE mem=$SLURM_MEM_PER_NODE omp=$OMP_NUM_THREADS "
                "gpus=$CUDA_VISIBLE_DEVICES; sleep 30'", cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    client = server.client()
    log = tmp_path / f"{job_id}.out"
    wait_for(lambda: log.exists() and log.read_text().strip(), timeout=30)
    assert log.read_text().split() == ["cpus=8", "per_node=8", "mem=16384", "omp=8", "gpus=0,1,2,3"]
    with open(os.path.join(server.home, "jobs", job_id, "launch.json")) as f:
        assert json.load(f)["mem_limit_mb"] == 16384  # its memory limit is the node's

    job = client.get(job_id)
    assert (job["cpus"], job["mem_mb"], job["gpus"], job["gpu_ids"]) == (8, 16384, 4, [0, 1, 2, 3])
    shown = CliRunner().invoke(cli, ["--home", server.home, "show", job_id]).output
    fields = {key.strip(): value for key, _, value in (line.partition(": ") for line in shown.splitlines())}
    assert (fields["CPUs"], fields["Mem"], fields["GPUs"]) == ("8", "16G", "4 (0,1,2,3)")
    record = shell(f"scontrol show job {job_id}").stdout
    assert " NumCPUs=8 " in record and "TRES=cpu=8,mem=16G,node=1,billing=8\n" in record
    assert "MinMemoryNode=16G " in record and "TresPerNode=gres:gpu:4\n" in record
    assert shell(f"squeue -h -j {job_id} -o '%C %m %b'").stdout.split() == ["8", "16G", "gres:gpu:4"]
    [node] = client.nodes()
    assert (node["cpus_alloc"], node["mem_alloc_mb"]) == (8, 16384)
    shell(f"scancel {job_id}")
