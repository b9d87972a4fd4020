"""A job's srun steps in the database, on SQLite and PostgreSQL: numbered from 0 per job, closed once, and
ended CANCELLED with their job."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from corral.core.steps import StepEnd, StepStart
from corral.errors import NotFound
from corral.store import migrate
from corral.store.db import database_url, open_engine
from corral.store.jobs import JobStore
from corral.store.steps import StepStore
from tests.helpers import make_spec


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
        opened = list(pool.map(lambda _: steps.open(first.id, start, 2.0), range(6)))
    assert sorted(step.step_id for step in opened) == [0, 1, 2, 3, 4, 5]
    assert steps.open(second.id, start, 3.0).step_id == 0


def test_a_step_is_closed_once_and_its_job_end_cancels_the_ones_left_running(stores):
    jobs, steps = stores
    (job,) = jobs.insert([make_spec()], now=1.0)
    start = StepStart(name="bash", ntasks=1, command="bash -c 'exit 3'")
    steps.open(job.id, start, 2.0)
    steps.open(job.id, start, 3.0)
    closed = steps.close(job.id, 0, StepEnd("FAILED", 3, None, 12.5, 0.25), 4.0)
    assert (closed.state, closed.exit_code, closed.end_time, closed.max_rss_mb) == ("FAILED", 3, 4.0, 12.5)
    assert steps.end_running(job.id, 5.0) == 1
    again = steps.close(job.id, 1, StepEnd("COMPLETED", 0, None, None, None), 6.0)  # its srun reports late
    assert (again.state, again.signal, again.end_time) == ("CANCELLED", 9, 5.0)
    assert [(s.step_id, s.state) for s in steps.of_jobs([job.id])[job.id]] == [(0, "FAILED"), (1, "CANCELLED")]
    with pytest.raises(NotFound):
        steps.close(job.id, 7, StepEnd("COMPLETED", 0, None, None, None), 7.0)
