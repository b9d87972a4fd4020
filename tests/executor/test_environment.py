"""One builder for a job's environment, for a local job (corral placed it) and a Slurm one (Slurm places it)."""

from __future__ import annotations

from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation
from corral.core.jobspec.states import JobState
from corral.executor.environment import job_environment

from tests.helpers import make_spec

SERVER_ENV = {"PATH": "/usr/bin", "SLURM_JOB_ID": "9", "CORRAL_JOB_ID": "8", "HOME": "/home/ada"}


def _job(**request) -> Job:
    spec = make_spec(env={"MINE": "1", "OMP_NUM_THREADS": "3"}, time_limit_s=60, **request)
    return Job(id=42, spec=spec, state=JobState.RUNNING, submit_time=0.0, start_time=1000.0)


def test_a_job_placed_by_slurm_gets_corrals_variables_and_nothing_slurm_or_the_gpus_set_themselves():
    job = _job(script="#!/bin/sh\ntrue\n", command=None)
    env = job_environment(job, None, server_env={}, checkpoint_dir="/h/checkpoints/42", server_url="http://h:1",
                          home="/h")
    assert env == {
        "MINE": "1", "OMP_NUM_THREADS": "3", "CORRAL_JOB_ID": "42", "CORRAL_JOB_NAME": job.spec.name,
        "CORRAL_CHECKPOINT_DIR": "/h/checkpoints/42", "CORRAL_TIME_LIMIT_S": "60", "CORRAL_URL": "http://h:1",
        "CORRAL_HOME_URL": "http://h:1",  # a compute node that sees the home follows its address file too
        "CORRAL_HOME": "/h", "MLFLOW_RUN_CONTEXT": '{"corral.job_id": "42"}',
    }


def test_a_local_job_gets_the_same_variables_and_those_of_its_placement():
    job = _job(script="#!/bin/sh\ntrue\n", command=None, gpus=2)
    common = job_environment(job, None, server_env={}, checkpoint_dir="/c", server_url="http://h:1", home="/h")
    local = job_environment(job, Allocation(job_id=42, node="n1", gpu_ids=(1, 3), cpus=1, mem_mb=0), server_env=SERVER_ENV,
                            checkpoint_dir="/c", server_url="http://h:1", home="/h")
    assert {k: local[k] for k in common} == common
    assert common["CORRAL_HOME_URL"] == "http://h:1"  # it runs beside the home's address file
    assert local["CUDA_VISIBLE_DEVICES"] == local["CORRAL_GPUS"] == local["SLURM_JOB_GPUS"] == "1,3"
    assert local["OMP_NUM_THREADS"] == "3" and local["CORRAL_JOB_END_TIME"] == "1060"
    assert local["SLURM_JOB_ID"] == "42" and local["PATH"] == "/usr/bin"  # the server's SLURM_JOB_ID is not passed on


def test_a_multi_task_job_tells_its_tasks_as_slurm_does_and_finds_corrals_srun_first():
    job = _job(script="#!/bin/sh\ntrue\n", command=None, cpus=3, ntasks=2, gpus_per_task=1)
    env = job_environment(job, Allocation(job_id=42, node="n1", gpu_ids=(1, 3), cpus=6, mem_mb=0),
                          server_env=SERVER_ENV, checkpoint_dir="/c", server_url=None, slurm_commands="/opt/corral-slurm")
    assert {key: env[key] for key in ("SLURM_NTASKS", "SLURM_NPROCS", "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK",
                                      "SLURM_CPUS_ON_NODE", "SLURM_GPUS_PER_TASK")} == {
        "SLURM_NTASKS": "2", "SLURM_NPROCS": "2", "SLURM_TASKS_PER_NODE": "2", "SLURM_CPUS_PER_TASK": "3",
        "SLURM_CPUS_ON_NODE": "6", "SLURM_GPUS_PER_TASK": "1"}
    assert "SLURM_NTASKS_PER_NODE" not in env  # as sbatch: only --ntasks-per-node sets it
    assert env["PATH"] == "/opt/corral-slurm:/usr/bin"
    per_node = _job(script="#!/bin/sh\ntrue\n", command=None, ntasks=2, ntasks_per_node=2)
    env = job_environment(per_node, Allocation(job_id=42, node="n1", gpu_ids=(), cpus=2, mem_mb=0), server_env={},
                          checkpoint_dir="/c", server_url=None, slurm_commands="/opt/corral-slurm")
    assert env["SLURM_NTASKS_PER_NODE"] == "2" and env["PATH"].startswith("/opt/corral-slurm:")


def test_mlflows_run_context_names_the_job_and_keeps_the_users_tags():
    def context(given: str | None) -> str | None:
        job = Job(id=7, spec=make_spec(env={"MLFLOW_RUN_CONTEXT": given} if given is not None else {}),
                  state=JobState.RUNNING, submit_time=0.0)
        return job_environment(job, None, server_env={}, checkpoint_dir="/c", server_url=None).get("MLFLOW_RUN_CONTEXT")

    assert context(None) == '{"corral.job_id": "7"}'
    assert context('{"team": "vision", "corral.job_id": "1"}') == '{"team": "vision", "corral.job_id": "7"}'
    assert context("not json") == "not json" and context("[1]") == "[1]"  # the user's, left as it is
