"""GET /api/v1/steps?jobs=...: many jobs' srun steps in one answer (what sacct lists)."""

from __future__ import annotations

import pytest

from corral.errors import InvalidRequest


def test_many_jobs_steps_come_in_one_answer_and_bad_ids_are_named(server_factory, slurm_shell):
    server = server_factory(gpus=1)
    shell = slurm_shell(server.home)
    out = shell("for i in 1 2; do sbatch --parsable -n 2 --wrap 'srun true; srun -n 1 true'; done; sbatch --parsable --wrap true")
    first, second, plain = (int(line) for line in out.stdout.split())
    client = server.client()
    for job in (first, second, plain):
        assert client.wait(job, timeout=60)["state"] == "COMPLETED"
    answer = client._request("GET", f"/api/v1/steps?jobs={first},{second},{plain},99999")
    assert sorted(answer["steps"]) == [str(first), str(second)]  # a job without steps is left out
    assert [(s["step_id"], s["ntasks"], s["state"]) for s in answer["steps"][str(first)]] == [
        (0, 2, "COMPLETED"), (1, 1, "COMPLETED")]
    for query, wrong in (("jobs=", "names no job"), ("jobs=1,x", "'x' is not a job id"), ("jobs=0", "'0'")):
        with pytest.raises(InvalidRequest, match=wrong) as caught:
            client._request("GET", f"/api/v1/steps?{query}")
        assert caught.value.field == "jobs"
