"""Drained GPUs and nodes in the pure policy: never given to a job, a job only they could run waits with
ReqNodeNotAvail and blocks nobody, a job already on one keeps it to its end."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.scheduling.drains import WHOLE_NODE
from corral.core.scheduling.policy import PendingJob, schedule
from corral.core.scheduling.priority import PriorityFactors
from corral.core.scheduling.resources import Allocation, Gpu, Node
from corral.core.jobspec.request import Request
from corral.core.jobspec.states import PendingReason

NOW = 1000.0
NODE = Node("gpu01", cpus=32, mem_mb=256 * 1024, gpus=tuple(Gpu(i, "A100", 80 * 1024) for i in range(4)))
OTHER = Node("gpu02", cpus=32, mem_mb=256 * 1024, gpus=tuple(Gpu(i, "A100", 80 * 1024) for i in range(4)))


def job(job_id: int, **request) -> PendingJob:
    return PendingJob(job_id, Request(**request), time_limit_s=3600)


def test_single_gpu_jobs_never_get_a_drained_gpu_and_the_one_left_over_waits_for_resources():
    decisions = schedule([NODE], [], [job(i, gpus=1) for i in range(1, 5)], NOW, drained={"gpu01": frozenset({2})})
    assert sorted(g for a in decisions.starts for g in a.gpu_ids) == [0, 1, 3]
    assert decisions.reasons == {4: PendingReason.RESOURCES}


def test_a_job_only_drained_gpus_could_run_waits_with_req_node_not_avail_and_blocks_nobody():
    pending = [job(1, gpus=4), job(2, exclusive=True), job(3, gpus=1)]
    decisions = schedule([NODE], [], pending, NOW, drained={"gpu01": frozenset({0})})
    assert decisions.reasons == {1: PendingReason.NODE_NOT_AVAIL, 2: PendingReason.NODE_NOT_AVAIL}
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(3, (1,))]
    assert not decisions.estimates  # no reservation on a GPU that will not come back by itself


def test_a_drained_node_takes_no_job_at_all_not_even_a_cpu_only_one():
    drained = {"gpu01": frozenset({WHOLE_NODE})}
    alone = schedule([NODE], [], [job(1, gpus=0, cpus=1), job(2, gpus=1)], NOW, drained=drained)
    assert not alone.starts and set(alone.reasons.values()) == {PendingReason.NODE_NOT_AVAIL}
    beside = schedule([NODE, OTHER], [], [job(1, gpus=0, cpus=1), job(2, gpus=1)], NOW, drained=drained)
    assert {a.node for a in beside.starts} == {"gpu02"}


def test_a_running_job_keeps_its_drained_gpu_and_it_is_not_reserved_for_anyone_when_it_ends():
    running = [Allocation(9, "gpu01", (0, 1, 2, 3), 4, 0, end_time=NOW + 600)]
    decisions = schedule([NODE], running, [job(1, gpus=4), job(2, gpus=3)], NOW, drained={"gpu01": frozenset({3})})
    assert decisions.reasons[1] is PendingReason.NODE_NOT_AVAIL
    assert decisions.estimates == {2: NOW + 600} and decisions.reserved[2] == ("gpu01", (0, 1, 2))


def test_preemption_counts_a_drained_gpu_as_taken():
    running = [Allocation(9, "gpu01", (0,), 1, 0, preemptible=True, priority=1), Allocation(8, "gpu01", (1,), 1, 0)]
    factors = {1: PriorityFactors(100, 0.0, 0.0, 0.0, 0.0, 0.0, 0)}
    decisions = schedule([NODE], running, [job(1, gpus=2)], NOW, priorities=factors, drained={"gpu01": frozenset({3})})
    assert decisions.preempt == [9] and decisions.preempt_for == 1  # GPU 2 is free, GPU 3 drained: 9 must go


@settings(max_examples=200, deadline=None)
@given(drained=st.sets(st.integers(0, 3)), wants=st.lists(st.integers(0, 4), min_size=1, max_size=8))
def test_no_start_ever_holds_a_drained_gpu(drained, wants):
    pending = [job(i + 1, gpus=n) for i, n in enumerate(wants)]
    decisions = schedule([NODE], [], pending, NOW, drained={"gpu01": frozenset(drained)})
    for allocation in decisions.starts:
        assert not set(allocation.gpu_ids) & drained
    for job_id, (_, gpus) in decisions.reserved.items():
        assert not set(gpus) & drained, job_id
