"""The launcher: supervisors start in its threads, and a cancel during a launch is never lost."""

from __future__ import annotations

import asyncio
import threading

from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation
from corral.core.jobspec.states import JobState
from corral.server.launcher import Launcher, Stop
from tests.helpers import make_spec


class GatedBackend:
    """Records what it is asked; each start waits until the test opens its gate."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.gates: dict[int, threading.Event] = {}
        self.entered: dict[int, threading.Event] = {}

    def gate(self, job_id: int) -> threading.Event:
        self.entered.setdefault(job_id, threading.Event())
        return self.gates.setdefault(job_id, threading.Event())

    def start(self, job: Job, allocation: Allocation) -> None:
        self.gate(job.id)
        self.entered[job.id].set()
        self.gates[job.id].wait(10)
        if job.spec.name == "broken":
            raise OSError("no such file")
        self.calls.append(("start", job.id))

    def cancel(self, job: Job, by: str | None = None) -> None:
        self.calls.append(("cancel", job.id))

    def preempt(self, job: Job) -> None:
        self.calls.append(("preempt", job.id))


def _job(job_id: int, name: str = "job") -> tuple[Job, Allocation]:
    job = Job(id=job_id, spec=make_spec(name=name), state=JobState.RUNNING, submit_time=0.0)
    return job, Allocation(job_id, "node", (), 1, 0, "tester", "normal", None, False)


async def _until(predicate, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met")


def test_a_cancel_before_its_turn_skips_the_launch_and_one_during_it_follows_it():
    async def scenario() -> None:
        backend = GatedBackend()
        failed, skipped = [], []
        launcher = Launcher(backend, asyncio.get_running_loop(), threads=1,
                            on_failed=lambda job, why: failed.append((job.id, why)),
                            on_skipped=lambda job: skipped.append(job.id))
        first, second, third = _job(1), _job(2), _job(3, "broken")
        for job, allocation in (first, second, third):
            launcher.launch(job, allocation)
        await _until(lambda: 1 in backend.entered and backend.entered[1].is_set())
        assert launcher.launching(1) and launcher.launching(2)
        assert launcher.stop(first[0], Stop.CANCEL)  # its supervisor is being spawned: cancelled right after
        assert launcher.stop(second[0], Stop.CANCEL)  # still waiting for a thread: never launched
        backend.gate(1).set()
        backend.gate(3).set()
        await _until(lambda: failed)
        assert skipped == [2]
        assert backend.calls == [("start", 1), ("cancel", 1)]
        assert failed == [(3, "launch failed: no such file")]
        assert not launcher.launching(1) and not launcher.launching(2) and not launcher.launching(3)
        assert not launcher.stop(first[0], Stop.CANCEL)  # launched: the caller cancels it the usual way
        launcher.close()

    asyncio.run(scenario())


def test_the_launches_of_a_pass_run_side_by_side_off_the_loop():
    async def scenario() -> None:
        backend = GatedBackend()
        launcher = Launcher(backend, asyncio.get_running_loop(), threads=4, on_failed=lambda *a: None,
                            on_skipped=lambda job: None)
        for job_id in range(1, 5):
            launcher.launch(*_job(job_id))
        # four starts blocked at once while the loop still runs: none waits for another
        await _until(lambda: all(backend.entered.get(i) and backend.entered[i].is_set() for i in range(1, 5)))
        for job_id in range(1, 5):
            backend.gate(job_id).set()
        await _until(lambda: launcher.pending_launches() == 0)
        assert sorted(backend.calls) == [("start", i) for i in range(1, 5)]
        launcher.close()

    asyncio.run(scenario())
