"""Backends declare what they can do (`Capabilities` and typed capability objects); the job service
and the API ask those, never `hasattr`."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from corral.backends.base import ArrayDrained, Ended, Started, TaskAppeared, TaskOf, Waiting
from corral.backends.local import LaunchSettings, LocalBackend
from corral.backends.registry import backend_kind
from corral.backends.slurm.backend import SlurmBackend
from corral.backends.slurm.cluster import SlurmCluster
from corral.backends.slurm.parse import SEP, parse_squeue
from corral.backends.slurm.watcher import SlurmWatcher
from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Node
from corral.core.jobspec.states import JobState
from corral.errors import Conflict, InvalidRequest
from corral.server.service import JobService
from corral.server.settings import ServiceSettings
from corral.store import migrate
from corral.store.db import database_url, open_engine
from corral.store.jobs import JobStore
from tests.helpers import make_spec


def test_the_local_backend_places_jobs_corral_scheduled_and_samples_them(tmp_path):
    backend = LocalBackend(str(tmp_path), LaunchSettings(kill_grace_s=1.0, server_env={}, server_url=lambda: None))
    caps = backend.capabilities
    assert (caps.name, caps.schedules_itself, caps.attach, caps.efficiency_from_accounting, caps.samples_processes,
            caps.max_nodes) == ("local", False, False, False, True, 1)
    assert backend.placement is backend and backend.processes is backend
    assert backend.queue is None and backend.accounting is None and backend.foreign_jobs is None


def test_the_slurm_backend_schedules_itself_and_keeps_accounts(tmp_path):
    backend = SlurmBackend(SlurmCluster(user="nobody"), home=str(tmp_path))
    caps = backend.capabilities
    assert (caps.name, caps.schedules_itself, caps.attach, caps.efficiency_from_accounting,
            caps.samples_processes) == ("slurm", True, True, True, False)
    assert caps.max_nodes > 1
    assert backend.placement is None and backend.processes is None
    assert backend.queue is backend and backend.accounting is backend and backend.foreign_jobs is backend
    backend.close()


def test_backends_are_chosen_by_name():
    assert backend_kind("local").open.__self__.__class__.__name__ == "LocalKind"
    assert backend_kind("slurm").open.__self__.__class__.__name__ == "SlurmKind"
    with pytest.raises(InvalidRequest, match="no backend 'kubernetes'"):
        backend_kind("kubernetes")


def _local_service(home: str) -> JobService:
    engine = open_engine(database_url(None, home))
    migrate.upgrade(engine)
    backend = LocalBackend(home, LaunchSettings(kill_grace_s=1.0, server_env={}, server_url=lambda: None))
    return JobService(store=JobStore(engine), backend=backend, nodes=[Node("n1", 2, 1024)],
                      settings=ServiceSettings(home=home, user="tester", server_env={}))


def test_attach_and_accounting_are_refused_where_the_backend_lacks_them(tmp_path):
    service = _local_service(str(tmp_path))
    with pytest.raises(Conflict, match="attaching Slurm jobs needs `corral up --backend slurm`"):
        asyncio.run(service.attach("123"))
    with pytest.raises(Conflict, match="keeps no accounting"):
        service.efficiency("1")
    assert service.job_processes(1) is None  # asked of the local backend's process view: not started
    service.close()


def _row(job_id: str, raw: int, array: str, task: str, state: str, reason: str = "None", node: str = "") -> str:
    return SEP.join([job_id, str(raw), array, task, state, reason, node, "N/A", "0:00"])


class FakeCluster:
    def __init__(self) -> None:
        self.rows: list[str] = []
        self.records: list = []

    def queue(self):
        return parse_squeue("\n".join(self.rows))

    def accounting(self, ids):
        return self.records


def _watch(watcher: SlurmWatcher, submitted):
    assert watcher.watch(submitted) is None  # the read starts in the watcher's thread
    deadline = time.monotonic() + 30  # it returns as soon as the read is back: a loaded machine may take seconds
    while time.monotonic() < deadline:
        updates = watcher.watch(submitted)
        if updates is not None:
            return updates
        time.sleep(0.01)
    raise AssertionError("no read came back")


def test_the_slurm_watcher_reports_queue_rows_as_typed_updates(tmp_path):
    now = [1000.0]
    cluster = FakeCluster()
    watcher = SlurmWatcher(cluster, clock=lambda: now[0], monotonic=lambda: now[0])  # type: ignore[arg-type]
    spec = make_spec(workdir=str(tmp_path), log_dir=str(tmp_path))
    running = Job(id=1, spec=spec, state=JobState.PENDING, submit_time=990.0, backend_id="101")
    waiting = Job(id=2, spec=spec, state=JobState.PENDING, submit_time=990.0, backend_id="102")
    lagging = Job(id=3, spec=spec, state=JobState.RUNNING, submit_time=990.0, start_time=995.0, backend_id="103")
    array = Job(id=4, spec=make_spec(workdir=str(tmp_path), log_dir=str(tmp_path), array="0-1"),
                state=JobState.PENDING, submit_time=990.0, backend_id="104", array_pending=[0, 1])
    cluster.rows = [_row("101", 101, "N/A", "N/A", "RUNNING", node="vm"), _row("102", 102, "N/A", "N/A", "PENDING", "Priority"),
                    _row("104_0", 105, "104", "0", "RUNNING", node="vm"), _row("104_1", 106, "104", "1", "COMPLETING")]
    updates = _watch(watcher, {"101": running, "102": waiting, "103": lagging, "104": array})
    assert updates[0] == Started(running, "vm", None)
    assert updates[1] == Waiting(waiting, "Priority")
    task = updates[2].job
    assert isinstance(task, TaskOf) and (task.array, task.task_id, task.backend_id) == (array, 0, "104_0")
    assert isinstance(updates[3], TaskAppeared) and updates[3].task.task_id == 1  # finishing: settled from accounting
    assert len(updates) == 4  # 103 left the queue a moment ago: accounting may not have it yet
    now[0] += 60  # the watcher's clock, not the wall's: its accounting grace has passed
    cluster.rows = []
    later = _watch(watcher, {"103": lagging, "104": array})
    ended = [u for u in later if isinstance(u, Ended)]
    assert ended[0].job is lagging and ended[0].outcome.error == "Slurm has no record of how it ended"
    assert [u.job.task_id for u in ended[1:]] == [0, 1] and isinstance(later[-1], ArrayDrained)
    watcher.close()


def test_the_server_is_wired_by_what_a_backend_declares_before_it_is_opened():
    from corral.backends.registry import backend_kind

    local, slurm = backend_kind("local"), backend_kind("slurm")
    assert local.capabilities.runs_jobs_here and local.capabilities.samples_processes
    assert not slurm.capabilities.runs_jobs_here and not slurm.capabilities.samples_processes


def test_reservations_are_refused_where_the_backend_schedules_itself(tmp_path):
    from corral.core.access.identity import Caller
    from corral.core.scheduling.reservations import Wanted

    engine = open_engine(database_url(None, str(tmp_path)))
    migrate.upgrade(engine)
    backend = SlurmBackend(SlurmCluster(user="nobody"), home=str(tmp_path))
    service = JobService(store=JobStore(engine), backend=backend, nodes=[Node("n1", 2, 1024)],
                         settings=ServiceSettings(home=str(tmp_path), user="root", server_env={}))
    admin = Caller("root", "admin", "socket")
    with pytest.raises(Conflict, match=r"make reservations there \(scontrol create reservation on the cluster\)"):
        service.create_reservation(admin, Wanted("demo", gpus=1, users="root", start=time.time(),
                                                 end=time.time() + 3600))
    with pytest.raises(Conflict, match="hands its jobs to slurm"):
        service.delete_reservation(admin, "demo")
    assert service.list_reservations() == []
    service.close()
