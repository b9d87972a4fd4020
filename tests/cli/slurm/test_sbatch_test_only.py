"""`sbatch --test-only` on a real corral server: Slurm's line on stderr, and nothing submitted."""

from __future__ import annotations

import re
import time

from corral.core.units.iso_times import epoch_seconds
from tests.helpers import wait_for

LINE = re.compile(r"^sbatch: Job (\d+) to start at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d) using (\d+) processors on nodes "
                  r"(\S+) in partition (\S+)\n$")


def test_on_an_idle_server_it_would_start_now_and_nothing_is_submitted(server_factory, slurm_shell):
    server = server_factory()
    out = slurm_shell(server.home)('sbatch --test-only -c 2 --wrap "true"')
    assert out.returncode == 0 and out.stdout == "", out.stderr
    match = LINE.match(out.stderr)
    assert match, out.stderr
    job_id, start, cpus, _, partition = match.groups()
    assert (job_id, cpus, partition) == ("1", "2", "default")
    assert abs(time.mktime(time.strptime(start, "%Y-%m-%dT%H:%M:%S")) - time.time()) < 30
    assert server.client().queue() == []


def test_behind_a_running_job_it_would_start_at_that_jobs_time_limit(server_factory, slurm_shell):
    server = server_factory()
    shell = slurm_shell(server.home)
    running = shell('sbatch --parsable -G 4 -t 10 --wrap "sleep 300"').stdout.strip()
    client = server.client()
    job = wait_for(lambda: (j := client.get(running))["state"] == "RUNNING" and j)
    out = shell('sbatch --test-only -G 1 -t 5 --wrap "true"')
    assert out.returncode == 0, out.stderr
    match = LINE.match(out.stderr)
    assert match, out.stderr
    expected = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch_seconds(job["start_time"]) + 600))
    assert match.group(2) == expected and match.group(1) == str(int(running) + 1)
    assert [j["id"] for j in client.queue()] == [int(running)]


def test_a_job_no_node_could_run_fails_as_slurm_does(server_factory, slurm_shell):
    server = server_factory()
    out = slurm_shell(server.home)('sbatch --test-only -G 9 --wrap "true"')
    assert out.returncode == 1 and out.stderr.startswith("allocation failure: "), out.stderr
    assert "largest node has 4" in out.stderr
    bad = slurm_shell(server.home)('sbatch --test-only --time=soon --wrap "true"')
    assert bad.returncode == 1 and bad.stderr.startswith("sbatch: error: Batch job submission failed: "), bad.stderr
