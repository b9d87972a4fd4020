"""A time limit past its partition's max_time, through Slurm's commands: refused at once, in Slurm's words
(as Slurm with EnforcePartLimits), after corral's line naming the limit; never left waiting forever."""

from __future__ import annotations

import os

import pytest

TIME_LIMIT_INVALID = "Requested time limit is invalid (missing or exceeds some limit)"
CONFIG = """
[partitions.default]
default_time = "1h"

[partitions.debug]
max_time = "30m"
"""


@pytest.fixture
def configured(server_factory, short_tmp):
    home = os.path.join(short_tmp, "configured")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(CONFIG)
    return server_factory(home=home)


def test_sbatch_srun_and_scontrol_update_refuse_a_time_past_the_partitions_limit(configured, slurm_shell, tmp_path):
    shell = slurm_shell(configured.home)
    client = configured.client()
    script = tmp_path / "long.sh"
    script.write_text("#!/bin/bash\n#SBATCH -p debug\n#SBATCH --time=1:00:00\ntrue\n")
    for command in (f"sbatch {script}", "sbatch -p debug -t 1:00:00 --wrap true",
                    "sbatch --test-only -p debug -t 60 --wrap true"):
        out = shell(command, cwd=str(tmp_path))
        assert out.returncode == 1, (command, out)
        first, last = out.stderr.splitlines()
        assert first.startswith("sbatch: error: time: --time=1:00:00 is longer than partition debug allows (its "
                                "max_time is 30:00)") and "--time=30" in first and "partition default" in first
        assert last == f"sbatch: error: Batch job submission failed: {TIME_LIMIT_INVALID}"
    srun = shell("srun -p debug -t 45 true", cwd=str(tmp_path))
    assert srun.returncode == 1
    assert srun.stderr.splitlines()[-1] == f"srun: error: Unable to allocate resources: {TIME_LIMIT_INVALID}"
    assert client.queue() == []  # nothing waits forever with PartitionTimeLimit

    job = shell("sbatch --parsable -H -p debug -t 20 --wrap true", cwd=str(tmp_path)).stdout.strip()
    update = shell(f"scontrol update JobId={job} TimeLimit=1:00:00")
    assert update.returncode == 1
    assert update.stderr.splitlines() == [
        "scontrol: error: time: --time=1:00:00 is longer than partition debug allows (its max_time is 30:00): the "
        "job would never start (ask for --time=30 (minutes) or less, or use partition default, which allows it)",
        f"{TIME_LIMIT_INVALID} for job {job}"]
    assert client.get(job)["time_limit_s"] == 1200  # unchanged
    assert shell(f"scontrol update JobId={job} TimeLimit=25").returncode == 0
    assert client.get(job)["time_limit_s"] == 1500
    shell(f"scancel {job}")
