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
