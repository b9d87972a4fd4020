"""The start-time forecast: the scheduler's own pass with the job in its place, and its what-ifs."""

from __future__ import annotations

import pytest

from corral.core.scheduling.forecast import RESERVED, RUNNING, WAITING, forecast
from corral.core.scheduling.pending import PendingJob
from corral.core.scheduling.resources import Allocation, Gpu, Node, check_satisfiable
from corral.core.jobspec.request import Request
from corral.core.scheduling.schedconfig import Partition, Qos, SchedulerConfig
from corral.errors import Unsatisfiable

NOW = 10_000.0
HOUR = 3600
NODE = Node("gpu01", cpus=32, mem_mb=256 * 1024, gpus=tuple(Gpu(i, "A100", 80 * 1024) for i in range(4)))


def hypothetical(gpus: int = 1, time_limit_s: int | None = HOUR, **fields) -> PendingJob:
    return PendingJob(100, Request(gpus=gpus), "carol", time_limit_s=time_limit_s, submit_time=NOW, **fields)


def holding(job_id: int, gpu_ids: tuple[int, ...], end: float | None, user: str = "alice") -> Allocation:
    return Allocation(job_id, "gpu01", gpu_ids, 1, 0, user, None, end)


def waiting(job_id: int, gpus: int, time_limit_s: int | None, user: str = "bob") -> PendingJob:
    return PendingJob(job_id, Request(gpus=gpus), user, time_limit_s=time_limit_s, submit_time=NOW - 600)


def plan(job: PendingJob, running=(), queue=(), config: SchedulerConfig | None = None, **kwargs):
    return forecast(job, nodes=[NODE], running=list(running), queue=list(queue), usage={}, now=NOW,
                    config=config or SchedulerConfig(), **kwargs)


def test_on_an_idle_machine_it_starts_now_on_the_first_gpus():
    result = plan(hypothetical(gpus=2))
    assert (result.start, result.node, result.gpu_ids, result.code) == (NOW, "gpu01", (0, 1), "None")
    assert result.blockers == () and result.alternatives == ()


def test_on_a_full_machine_it_starts_when_the_running_job_reaches_its_time_limit():
    result = plan(hypothetical(), running=[holding(7, (0, 1, 2, 3), NOW + HOUR)])
    assert result.start == NOW + HOUR and result.gpu_ids == (0,) and result.code == "Resources"
    assert [(b.job_id, b.user, b.kind, b.end) for b in result.blockers] == [(7, "alice", RUNNING, NOW + HOUR)]
    assert "running job 7 (alice)" in result.reason
    assert result.alternatives == ()  # nothing shorter or smaller could start before then


def test_where_cpus_decide_the_start_it_names_cpus_and_the_job_holding_them_not_the_gpus_holder():
    """Its GPUs free up at +1h, but a job holding CPUs until +1h05 is what it waits for."""
    node = Node("gpu01", cpus=4, mem_mb=64 * 1024, gpus=tuple(Gpu(i, "A100", 80 * 1024) for i in range(4)))
    running = [Allocation(7, "gpu01", (0, 1, 2, 3), 2, 0, "alice", None, NOW + HOUR),
               Allocation(8, "gpu01", (), 2, 0, "bob", None, NOW + HOUR + 300)]
    job = PendingJob(100, Request(gpus=1, cpus=3), "carol", time_limit_s=HOUR, submit_time=NOW)
    result = forecast(job, nodes=[node], running=running, queue=[], usage={}, now=NOW, config=SchedulerConfig())
    assert result.start == NOW + HOUR + 300 and result.waits_for == ("cpus",)
    assert result.reason == ("the CPUs it needs are held by running job 8 (bob) until then; 1 more job holds them "
                             "before")
    assert [(b.job_id, b.cpus, b.end) for b in result.blockers] == [(7, 2, NOW + HOUR), (8, 2, NOW + HOUR + 300)]
    # where its GPUs are what it waits for, it says so
    gpus_last = [Allocation(7, "gpu01", (0, 1, 2, 3), 1, 0, "alice", None, NOW + HOUR + 300),
                 Allocation(8, "gpu01", (), 2, 0, "bob", None, NOW + HOUR)]
    result = forecast(job, nodes=[node], running=gpus_last, queue=[], usage={}, now=NOW, config=SchedulerConfig())
    assert result.waits_for == ("gpus",) and result.reason.startswith("its GPUs are held by running job 7 (alice)")
    # memory
    big = PendingJob(100, Request(gpus=0, cpus=1, mem_mb=48 * 1024), "carol", time_limit_s=HOUR, submit_time=NOW)
    memory = [Allocation(9, "gpu01", (), 1, 32 * 1024, "dave", None, NOW + HOUR)]
    result = forecast(big, nodes=[node], running=memory, queue=[], usage={}, now=NOW, config=SchedulerConfig())
    assert result.start == NOW + HOUR and result.waits_for == ("memory",)
    assert result.reason == "the memory it needs is held by running job 9 (dave) until then"
    # an exclusive job waits for the whole node: everything on it
    whole = PendingJob(100, Request(gpus=0, exclusive=True), "carol", time_limit_s=HOUR, submit_time=NOW)
    result = forecast(whole, nodes=[node], running=running, queue=[], usage={}, now=NOW, config=SchedulerConfig())
    assert result.start == NOW + HOUR + 300 and result.waits_for == ("gpus", "cpus", "memory")
    assert result.reason == ("the whole node it needs (--exclusive) is held by running job 8 (bob) until then; 1 more "
                             "job holds it before")


def test_a_higher_priority_pending_job_ahead_goes_first():
    running = [holding(7, (0, 1, 2, 3), NOW + HOUR)]
    result = plan(hypothetical(), running=running, queue=[waiting(8, 4, 2 * HOUR)])
    assert result.start == NOW + 3 * HOUR and result.ahead == 1 and result.code == "Priority"
    kinds = [(b.job_id, b.kind) for b in result.blockers]
    assert kinds == [(7, RUNNING), (8, RESERVED)]
    reserved = result.blockers[1]
    assert (reserved.start, reserved.end, reserved.user) == (NOW + HOUR, NOW + 3 * HOUR, "bob")


def test_a_shorter_time_limit_that_backfills_now_is_offered():
    # two GPUs free until job 8's reservation of all four at +2h: 2 GPUs for 4h would delay it
    running = [holding(7, (0, 1), NOW + 2 * HOUR)]
    result = plan(hypothetical(gpus=2, time_limit_s=4 * HOUR), running=running, queue=[waiting(8, 4, HOUR)])
    assert result.start == NOW + 3 * HOUR
    [shorter] = result.alternatives
    assert (shorter.change, shorter.time_limit_s, shorter.start, shorter.gpu_ids) == ("time", 2 * HOUR, NOW, (2, 3))


def test_fewer_gpus_are_offered_when_they_start_sooner():
    result = plan(hypothetical(gpus=4), running=[holding(7, (0, 1), NOW + HOUR)])
    assert result.start == NOW + HOUR
    assert [(a.change, a.gpus, a.start) for a in result.alternatives] == [("gpus", 2, NOW)]


def test_an_unsatisfiable_job_never_starts_and_the_most_gpus_that_fit_are_offered():
    job = hypothetical(gpus=8)
    with pytest.raises(Unsatisfiable) as refused:
        check_satisfiable(job.request, [NODE])
    result = plan(job, unsatisfiable=refused.value)
    assert result.start is None and result.code == "Unsatisfiable" and "largest node has 4" in result.reason
    assert [(a.change, a.gpus, a.start) for a in result.alternatives] == [("gpus", 4, NOW)]


def test_behind_jobs_without_a_time_limit_it_never_starts():
    result = plan(hypothetical(), running=[holding(7, (0, 1, 2, 3), None)])
    assert result.start is None and "without a time limit" in result.reason
    assert [(b.job_id, b.end) for b in result.blockers] == [(7, None)]


def test_behind_a_job_that_gets_no_reservation_nothing_starts():
    running = [holding(7, (0, 1, 2), None)]
    result = plan(hypothetical(), running=running, queue=[waiting(8, 2, HOUR)])
    assert result.start is None and result.code == "Priority"
    assert [(b.job_id, b.kind) for b in result.blockers] == [(8, WAITING)]


def test_a_time_limit_past_the_partitions_is_offered_the_partitions_longest():
    config = SchedulerConfig(partitions={"default": Partition("default", max_time_s=2 * HOUR)})
    result = plan(hypothetical(time_limit_s=3 * HOUR), config=config)
    assert result.start is None and result.code == "PartitionTimeLimit"
    assert [(a.change, a.time_limit_s, a.start) for a in result.alternatives] == [("time", 2 * HOUR, NOW)]


def test_a_qos_limit_names_the_users_own_running_jobs():
    config = SchedulerConfig(qos={"normal": Qos("normal", max_gpus_per_user=2)})
    running = [holding(7, (0, 1), NOW + HOUR, user="carol")]
    result = plan(hypothetical(), running=running, config=config)
    assert result.start is None and result.code == "QOSMaxGRESPerUser"
    assert [b.job_id for b in result.blockers] == [7]


def test_past_the_backfill_depth_it_is_forecast_anyway_and_says_so():
    config = SchedulerConfig(backfill_depth=1)
    running = [holding(7, (0, 1, 2, 3), NOW + HOUR)]
    result = plan(hypothetical(), running=running, queue=[waiting(8, 4, HOUR)], config=config)
    assert result.start == NOW + 2 * HOUR and result.notes and "backfill_depth" in result.notes[0]


def test_lower_priority_jobs_do_not_change_its_start():
    later = PendingJob(9, Request(gpus=4), "dave", time_limit_s=HOUR, submit_time=NOW + 1)
    assert plan(hypothetical(), queue=[later]).start == NOW


def test_a_what_if_is_the_same_pass_as_the_forecast_itself():
    """What-ifs ask only the pass's last step over what the jobs ahead leave: for the job unchanged, the
    answer is the full pass's, on random machines and queues."""
    import random

    from corral.core.scheduling.forecast import _Planner

    rng = random.Random(7)
    nodes = [Node(f"n{i}", cpus=16, mem_mb=64 * 1024, gpus=tuple(Gpu(g, "A100", 80 * 1024) for g in range(4)))
             for i in range(3)]
    for _ in range(200):
        running = [Allocation(i, f"n{rng.randrange(3)}", (g,), 1, 0, "alice", None,
                              rng.choice([None, NOW + rng.randrange(60, 4 * HOUR)])) for i, g in enumerate(range(4))]
        queue = [PendingJob(10 + i, Request(gpus=rng.randint(0, 4), cpus=rng.randint(1, 8)), "bob",
                            time_limit_s=rng.choice([None, rng.randrange(60, 4 * HOUR)]), submit_time=NOW - 10 - i)
                 for i in range(rng.randrange(8))]
        job = PendingJob(100, Request(gpus=rng.randint(0, 4), cpus=rng.randint(1, 8)), "carol",
                         time_limit_s=rng.randrange(60, 4 * HOUR), submit_time=NOW)
        planner = _Planner(nodes, running, queue, {}, NOW, SchedulerConfig())
        base = planner.run(job)
        if base.decisions.preempt_for is not None:
            continue
        assert planner.start_of(job) == base.placed(job.job_id)
