"""Fair share's usage survives a restart, that of preempted runs included (they leave no ended job behind)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from corral.backends.base import Capabilities, Recovered, Recovery
from corral.core.jobspec.job import Job, Outcome
from corral.core.scheduling.resources import Gpu, Node
from corral.core.jobspec.states import JobState
from corral.server.service import JobService
from corral.server.settings import ServiceSettings
from corral.store import migrate
from corral.store.db import database_url, open_engine
from corral.store.jobs import JobStore
from tests.helpers import make_spec


class PreemptedWhileAway:
    """A backend whose running jobs were all preempted while the server was down."""

    capabilities = Capabilities("test")
    placement = queue = accounting = foreign_jobs = processes = None

    def __init__(self, at: float) -> None:
        self.at = at

    def recover(self, job: Job) -> Recovery:
        return Recovery(Recovered.ENDED, Outcome(JobState.PREEMPTED.value, None, None, self.at))

    def close(self) -> None:
        pass


def _service(home: str, engine, backend, second_gpu_mb: int = 40_000) -> JobService:
    node = Node("n1", 4, 4096, gpus=(Gpu(0, "a100", 40_000), Gpu(1, "a100", second_gpu_mb)))
    # Both servers keep their books at the backend's moment: on the wall clock, the second would decay the
    # usage by however long the machine took between them (1.3 s is 1.5e-6 of a week's half-life).
    return JobService(store=JobStore(engine), backend=backend, nodes=[node],
                      settings=ServiceSettings(home=home, user="tester", server_env={}), clock=lambda: backend.at)


def test_usage_charged_for_a_preempted_run_survives_a_restart(tmp_path):
    engine = open_engine(database_url(None, str(tmp_path)))
    migrate.upgrade(engine)
    now = time.time()
    store = JobStore(engine)
    (job,) = store.insert([replace(make_spec(workdir=str(tmp_path), log_dir=str(tmp_path), gpus=2), user="ada")], now - 7200)
    job.state, job.start_time, job.node, job.gpu_ids = JobState.RUNNING, now - 3600, "n1", (0, 1)
    store.save_state(job)

    first = _service(str(tmp_path), engine, PreemptedWhileAway(now))
    first.recover()  # preempted after an hour on two GPUs: queued again, its hour charged
    assert first.get(job.id).state is JobState.PENDING
    charged = first.usage(now)["ada"]
    assert charged > 1.9
    first.close()

    again = _service(str(tmp_path), engine, PreemptedWhileAway(now))
    again.recover()
    assert again.usage(now).get("ada") == pytest.approx(charged, rel=1e-6)
    again.close()


class EndedWhileAway(PreemptedWhileAway):
    """A backend whose running jobs all completed while the server was down."""

    def recover(self, job: Job) -> Recovery:
        return Recovery(Recovered.ENDED, Outcome(JobState.COMPLETED.value, 0, None, self.at))


@pytest.mark.parametrize("second_gpu_mb", [40_000, 80_000])  # also beside a larger GPU: its own GPU's part
def test_a_job_sharing_a_gpu_is_charged_its_part_of_the_gpu_then_and_after_a_restart(tmp_path, second_gpu_mb):
    engine = open_engine(database_url(None, str(tmp_path)))
    migrate.upgrade(engine)
    now = time.time()
    store = JobStore(engine)
    spec = replace(make_spec(workdir=str(tmp_path), log_dir=str(tmp_path), gpus=1), user="ada", gpu_share_mb=10_000)
    (job,) = store.insert([spec], now - 7200)
    job.state, job.start_time, job.node, job.gpu_ids = JobState.RUNNING, now - 3600, "n1", (0,)
    store.save_state(job)

    first = _service(str(tmp_path), engine, EndedWhileAway(now), second_gpu_mb)
    first.recover()  # an hour on 10 GB of a 40 GB GPU: a quarter of a GPU-hour, not a whole one
    assert first.get(job.id).state is JobState.COMPLETED
    assert first.usage(now)["ada"] == pytest.approx(0.25, rel=1e-3)
    first.close()

    again = _service(str(tmp_path), engine, EndedWhileAway(now), second_gpu_mb)
    again.recover()  # from the job's record
    assert again.usage(now)["ada"] == pytest.approx(0.25, rel=1e-3)
    again.close()
