"""The SDK reads its job, rank and code version from the environment a job gets."""

from __future__ import annotations

import subprocess

from corral.sdk.context import detect_job, detect_rank, git_commit, resume_key


def test_a_corral_job_is_linked_and_names_the_resume_key():
    job = detect_job({"CORRAL_JOB_ID": "12", "SLURM_JOB_ID": "12", "CORRAL_NODE": "gpu01",
                      "CORRAL_CHECKPOINT_DIR": "/ckpt/12", "CORRAL_RESTART_COUNT": "2", "CORRAL_TIME_LIMIT_S": "7200",
                      "CORRAL_JOB_END_TIME": "1700007200"})
    assert (job.job, job.corral_job_id, job.node, job.checkpoint_dir) == ("12", 12, "gpu01", "/ckpt/12")
    assert (job.time_limit_s, job.end_time) == (7200.0, 1700007200.0)
    assert resume_key(job.job, "mnist", "lr-0.1", 0, program="train.py") == "job:12:train.py:mnist:lr-0.1:0"


def test_two_programs_of_one_job_get_runs_of_their_own():
    train, evaluate = (resume_key("12", "mnist", None, 0, program=p) for p in ("train.py", "eval.py"))
    assert train != evaluate
    assert resume_key("12", "mnist", None, 0) == resume_key("12", "mnist", None, 0)  # a requeue: the same


def test_a_slurm_job_is_named_but_not_linked():
    assert detect_job({"SLURM_JOB_ID": "345"}).job == "slurm-345"
    array_task = detect_job({"SLURM_JOB_ID": "350", "SLURM_ARRAY_JOB_ID": "345", "SLURM_ARRAY_TASK_ID": "7"})
    assert (array_task.job, array_task.corral_job_id) == ("slurm-345_7", None)


def test_outside_a_job_there_is_no_resume_key():
    job = detect_job({})
    assert job.job is None and resume_key(job.job, "p", None, 0) is None and job.rank == 0


def test_rank_prefers_torchrun_over_slurm():
    assert detect_rank({"RANK": "3", "SLURM_PROCID": "0", "LOCAL_RANK": "1"}) == 3
    assert detect_rank({"SLURM_PROCID": "2", "LOCAL_RANK": "1"}) == 2
    assert detect_rank({"LOCAL_RANK": "1"}) == 1
    assert detect_rank({"RANK": "junk"}) == 0


def test_per_rank_resume_keys_differ():
    assert resume_key("12", "p", None, 1, rank=2, program="t.py") == "job:12:t.py:p::1:rank:2"


def test_git_commit_of_the_working_directory(tmp_path):
    assert git_commit(str(tmp_path)) is None  # not a repository
    run = lambda *args: subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "f").write_text("x")
    run("add", "f")
    run("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_commit(str(tmp_path)) == head and len(head) == 40
