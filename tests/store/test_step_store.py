"""A job's srun steps in the database, on SQLite and PostgreSQL: numbered from 0 per job, closed once, and
ended CANCELLED with their job."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from corral.core.jobspec.steps import StepEnd, StepStart
from corral.errors import InvalidRequest, NotFound
from corral.store import migrate
from corral.store.db import database_url, open_engine
from corral.store.jobs import JobStore
from corral.store.steps import StepStore
from tests.helpers import make_spec


JOB = {"job_ref": "1", "job_cpus": 64, "job_gpus": ()}  # room enough for every step


@pytest.fixture
def stores(db_url, tmp_path):
    engine = open_engine(database_url(db_url, str(tmp_path)))
    migrate.upgrade(engine)
    yield JobStore(engine), StepStore(engine)
    engine.dispose()


def test_steps_are_numbered_per_job_even_when_opened_at_once(stores):
    jobs, steps = stores
    first, second = jobs.insert([make_spec(), make_spec()], now=1.0)
    start = StepStart(name="python", ntasks=2, command="python train.py")
    with ThreadPoolExecutor(4) as pool:
        opened = list(pool.map(lambda _: steps.open(first.id, start, 2.0, **JOB), range(6)))
    assert sorted(step.step_id for step in opened) == [0, 1, 2, 3, 4, 5]
    assert steps.open(second.id, start, 3.0, **JOB).step_id == 0


def test_a_step_waits_for_the_gpus_and_cpus_the_jobs_other_steps_hold(stores):
    jobs, steps = stores
    (job,) = jobs.insert([make_spec()], now=1.0)
    one_gpu = StepStart(name="python", ntasks=1, command="python a.py", cpus=1, gpus=1)
    held = {"job_ref": str(job.id), "job_cpus": 2, "job_gpus": (1, 3)}
    first = steps.open(job.id, one_gpu, 2.0, **held)
    second = steps.open(job.id, one_gpu, 2.0, **held)
    assert (first.gpu_ids, second.gpu_ids) == ((1,), (3,))  # never the same GPU twice
    assert steps.open(job.id, one_gpu, 2.0, **held) is None  # both GPUs (and both CPUs) are held: it waits
    shared = steps.open(job.id, StepStart(name="nvidia-smi", ntasks=1, command="nvidia-smi", cpus=1, gpus=2,
                                          overlap=True), 2.0, **held)
    assert shared.gpu_ids == (1, 3)  # --overlap shares what the others hold
    steps.close(job.id, first.step_id, StepEnd("COMPLETED", 0, None, None, None), 3.0)
    assert steps.open(job.id, one_gpu, 4.0, **held).gpu_ids == (1,)
    with pytest.raises(InvalidRequest, match="holds 2"):
        steps.open(job.id, StepStart(name="x", ntasks=3, command="x", cpus=3), 5.0, **held)


def test_a_step_is_closed_once_and_its_job_end_cancels_the_ones_left_running(stores):
    jobs, steps = stores
    (job,) = jobs.insert([make_spec()], now=1.0)
    start = StepStart(name="bash", ntasks=1, command="bash -c 'exit 3'")
    steps.open(job.id, start, 2.0, **JOB)
    steps.open(job.id, start, 3.0, **JOB)
    closed = steps.close(job.id, 0, StepEnd("FAILED", 3, None, 12.5, 0.25), 4.0)
    assert (closed.state, closed.exit_code, closed.end_time, closed.max_rss_mb) == ("FAILED", 3, 4.0, 12.5)
    assert steps.end_running(job.id, 5.0) == 1
    again = steps.close(job.id, 1, StepEnd("COMPLETED", 0, None, None, None), 6.0)  # its srun reports late
    assert (again.state, again.signal, again.end_time) == ("CANCELLED", 9, 5.0)
    assert [(s.step_id, s.state) for s in steps.of_jobs([job.id])[job.id]] == [(0, "FAILED"), (1, "CANCELLED")]
    with pytest.raises(NotFound):
        steps.close(job.id, 7, StepEnd("COMPLETED", 0, None, None, None), 7.0)


def test_a_requeued_jobs_next_run_numbers_its_steps_from_0_again(stores):
    jobs, steps = stores
    (job,) = jobs.insert([make_spec()], now=1.0)
    start = StepStart(name="python", ntasks=1, command="python train.py", cpus=1)
    steps.open(job.id, start, 2.0, **JOB)
    steps.open(job.id, start, 3.0, **JOB)
    steps.end_running(job.id, 4.0)  # requeued: its first run's steps went with it
    again = steps.open(job.id, start, 5.0, **JOB, restart=1)
    assert (again.step_id, again.restart) == (0, 1)
    closed = steps.close(job.id, 0, StepEnd("COMPLETED", 0, None, None, None), 6.0, restart=1)
    assert (closed.restart, closed.state) == (1, "COMPLETED")
    listed = [(s.restart, s.step_id, s.state) for s in steps.of_jobs([job.id])[job.id]]
    assert listed == [(0, 0, "CANCELLED"), (0, 1, "CANCELLED"), (1, 0, "COMPLETED")]


def test_steps_recorded_before_runs_were_numbered_stay_their_jobs_first_runs(db_url, tmp_path):
    from sqlalchemy import text

    engine = open_engine(database_url(db_url, str(tmp_path)))
    try:
        migrate.upgrade(engine, "0026")
        (job,) = JobStore(engine).insert([make_spec()], now=1.0)
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO job_steps (job_id, step_id, name, ntasks, command, state, start_time, cpus, "
                              "overlap) VALUES (:job, 3, 'python', 2, 'python x.py', 'COMPLETED', 2.0, 1, false)"),
                         {"job": job.id})
        migrate.upgrade(engine)
        (step,) = StepStore(engine).of_jobs([job.id])[job.id]
        assert (step.restart, step.step_id, step.name, step.ntasks, step.state) == (0, 3, "python", 2, "COMPLETED")
    finally:
        engine.dispose()
