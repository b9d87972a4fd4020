"""submitit's SlurmExecutor, unchanged, on a corral server with no Slurm: through `corral slurm-path`'s
sbatch, sacct, scancel and srun it submits functions, maps arrays, cancels and reads back failures."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

submitit = pytest.importorskip("submitit")


def add(a: int, b: int) -> int:
    return a + b


def square_and_where(x: int) -> tuple[int, str, str]:
    return x * x, os.environ["SLURM_ARRAY_JOB_ID"], os.environ["SLURM_ARRAY_TASK_ID"]


def fail(message: str) -> None:
    raise RuntimeError(message)


class Training(submitit.helpers.Checkpointable):
    """A training loop longer than its time limit: its step is what submitit's checkpoint (at the warning
    signal) keeps, and the run after the requeue goes on from there for `more` steps."""

    def __init__(self) -> None:
        self.step = 0
        self.starts: list[int] = []  # the step each run began at

    def __call__(self, more: int) -> tuple[int, list[int], str]:
        self.starts.append(self.step)
        while len(self.starts) == 1 or self.step < self.starts[-1] + more:
            self.step += 1
            time.sleep(0.05)
        return self.step, self.starts, os.environ["SLURM_RESTART_COUNT"]


@pytest.fixture
def executor(server_factory, tmp_path, monkeypatch):
    server = server_factory(gpus=2)
    slurm_path = subprocess.run([sys.executable, "-m", "corral.cli", "--home", server.home, "slurm-path"],
                                capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setenv("PATH", f"{slurm_path}:{os.environ['PATH']}")
    monkeypatch.setenv("CORRAL_HOME", server.home)
    for name in [k for k in os.environ if k.startswith(("SLURM_", "SBATCH_"))]:
        monkeypatch.delenv(name)
    ex = submitit.SlurmExecutor(folder=str(tmp_path / "%j"), max_num_timeout=0)
    ex.update_parameters(time=5, cpus_per_task=1, mem="1GB")
    ex.server = server  # for the tests to look at corral's side
    return ex


def test_a_function_runs_as_a_corral_job_and_its_result_comes_back(executor):
    job = executor.submit(add, 2, 3)
    assert job.result() == 5
    record = executor.server.client().wait(job.job_id, timeout=30)  # the result file comes first
    assert (record["state"], record["name"]) == ("COMPLETED", "submitit")
    assert _state_seen_by_submitit(job, "COMPLETED") == "COMPLETED"


def test_map_array_of_20_runs_as_one_array_at_most_4_at_a_time(executor):
    executor.update_parameters(array_parallelism=4)
    jobs = executor.map_array(square_and_where, range(20))
    results = [job.result() for job in jobs]
    array_id = jobs[0].job_id.split("_")[0]
    assert results == [(x * x, array_id, str(x)) for x in range(20)]
    client = executor.server.client()
    assert client.get(array_id)["array"] == "0-19%4"
    deadline = time.monotonic() + 30
    while (answer := client.array_tasks(int(array_id), limit=100))["summary"]["ended"] < 20:
        assert time.monotonic() < deadline  # a result file comes a moment before its task's end is recorded
        time.sleep(0.2)
    tasks = answer["tasks"]
    spans = [(t["start_time"], t["end_time"]) for t in tasks]
    assert len(spans) == 20 and all(state == "COMPLETED" for state in (t["state"] for t in tasks))
    most = max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)
    assert most <= 4


def test_a_job_cancelled_through_submitit_ends_cancelled(executor):
    job = executor.submit(time.sleep, 300)
    client = executor.server.client()
    deadline = time.monotonic() + 60
    while client.get(job.job_id)["state"] != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    job.cancel()
    assert client.wait(job.job_id, timeout=60)["state"] == "CANCELLED"
    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()
    assert _state_seen_by_submitit(job, "CANCELLED").startswith("CANCELLED")


def test_a_function_that_raises_brings_its_traceback_back(executor):
    job = executor.submit(fail, "the loss went to NaN at step 12")
    with pytest.raises(submitit.core.utils.FailedJobError) as caught:
        job.result()
    assert "RuntimeError: the loss went to NaN at step 12" in str(caught.value)
    # the result file comes a moment before the job's end is recorded
    assert executor.server.client().wait(job.job_id, timeout=30)["state"] == "FAILED"


def test_a_checkpointable_job_warned_before_its_time_limit_requeues_itself_and_resumes(executor, tmp_path):
    # submitit's own recipe: --signal=USR2@T reaches the srun task, which checkpoints and calls `scontrol requeue`
    requeuing = submitit.SlurmExecutor(folder=str(tmp_path / "requeue" / "%j"), max_num_timeout=1)
    requeuing.update_parameters(time=1, signal_delay_s=48, cpus_per_task=1, mem="1GB")  # the warning 12 s in
    job = requeuing.submit(Training(), 20)
    step, starts, restarts = job.result()
    assert restarts == "1" and starts[0] == 0 and starts[1] > 0 and step == starts[1] + 20  # resumed, not redone
    record = executor.server.client().wait(job.job_id, timeout=30)
    assert (record["state"], record["restarts"]) == ("COMPLETED", 1)
    log, out = job.stderr() or "", job.stdout() or ""
    # the warning once, to the task alone (the batch shell lived on to be requeued); the requeue's SIGTERM
    # passes by, as submitit means it to
    assert log.count("Caught signal SIGUSR2") == 1 and out.count("Calling checkpoint method.") == 1, (log, out)
    assert f"*** JOB {job.job_id} ON " in log and " DUE TO JOB REQUEUE ***" in log, log
    assert _state_seen_by_submitit(job, "COMPLETED") == "COMPLETED"


def _state_seen_by_submitit(job, wanted: str, timeout: float = 30) -> str:
    """The state submitit reads from sacct (its forced poll), once it says `wanted` (the result file
    can come before the job's end is recorded)."""
    deadline = time.monotonic() + timeout
    while True:
        state = job.get_info(mode="force").get("State", "")
        if state.startswith(wanted) or time.monotonic() > deadline:
            return state
        time.sleep(0.5)
