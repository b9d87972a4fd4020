"""Log caps on a live server, for what a job writes by every way it has: its batch script, the tasks of an
array, the steps `srun` starts inside it (they inherit its output), one file or two."""

from __future__ import annotations

import os

MB = 1 << 20
FLOOD = ("yes out & yes err >&2 & dd if=/dev/zero bs=1M count=2000 status=none & "
         "dd if=/dev/zero bs=1M count=2000 status=none >&2; wait")


def sizes(*paths: str) -> int:
    return sum(os.path.getsize(path) for path in set(paths) if os.path.exists(path))


def test_array_tasks_and_srun_steps_writing_as_fast_as_they_can_are_held_to_the_cap(server_factory, short_tmp):
    home = os.path.join(short_tmp, "home")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("[server]\nmax_log_mb = 5\n")
    server = server_factory(gpus=0, home=home, extra=["--cpus", "8"])
    client = server.client()
    array = client.submit(script=f"#!/bin/sh\n#SBATCH --array=0-2\n#SBATCH --output={short_tmp}/task_%a.out\n{FLOOD}\n",
                          workdir=short_tmp)
    # the step's tasks write through srun, which writes to the job's stdout and stderr
    steps = client.submit(script=f"#!/bin/bash\n#SBATCH --output={short_tmp}/steps.out\n"
                          f"#SBATCH --error={short_tmp}/steps.err\nsrun bash -c '{FLOOD}'\n", workdir=short_tmp)
    for ref in [f"{array['id']}_{i}" for i in range(3)] + [steps["id"]]:
        ended = client.wait(ref, timeout=120)
        assert ended["state"] == "FAILED", (ref, ended)
        assert "the job's logs reached the server's limit of 5 MB (max_log_mb)" in ended["reason"], ended["reason"]
    for task in range(3):
        path = f"{short_tmp}/task_{task}.out"
        assert 4.5 * MB <= sizes(path) <= 5.5 * MB, (task, sizes(path))
        with open(path, "rb") as f:
            assert f.read().endswith(b"the job's logs reached the server's limit of 5 MB (max_log_mb); "
                                     b"the job was stopped\n")
    assert 4.5 * MB <= sizes(f"{short_tmp}/steps.out", f"{short_tmp}/steps.err") <= 5.5 * MB
