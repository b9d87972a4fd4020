"""Backfill by time limits: reservations, estimates, and never delaying a job ahead."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.backfill import NodeProfile
from corral.core.policy import PendingJob, schedule
from corral.core.resources import Allocation, Gpu, Node, Request
from corral.core.states import PendingReason

NOW = 1000.0
NODE = Node("n1", cpus=32, mem_mb=256_000, gpus=tuple(Gpu(i, "A100", 81920) for i in range(4)))


def job(job_id: int, gpus: int, limit: int | None) -> PendingJob:
    return PendingJob(job_id, Request(gpus=gpus), time_limit_s=limit)


def holder(job_id: int, gpu_ids: tuple[int, ...], end: float | None) -> Allocation:
    return Allocation(job_id, "n1", gpu_ids, 1, 0, end_time=end)


def test_a_short_job_backfills_ahead_of_a_big_one_without_delaying_it():
    running = [holder(100, (0, 1), NOW + 100)]  # GPUs 2 and 3 are free; 0 and 1 come back at +100
    decisions = schedule([NODE], running, [job(1, 4, 600), job(2, 1, 50), job(3, 1, 500)], NOW)
    assert [a.job_id for a in decisions.starts] == [2]  # ends at +50, before the big job's start
    assert decisions.reasons == {1: PendingReason.RESOURCES, 3: PendingReason.PRIORITY}
    assert decisions.estimates[1] == NOW + 100
    assert decisions.starts[0].end_time == NOW + 50


def test_a_job_that_fits_beside_the_reservation_may_run_longer():
    running = [holder(100, (0,), NOW + 100)]  # 3 GPUs free now, all 4 at +100
    decisions = schedule([NODE], running, [job(1, 3, 600), job(2, 1, 5000)], NOW)
    # the big job needs 3 of 4 GPUs: it starts now; the 1-GPU job waits for GPU 0 (+100)
    assert [a.job_id for a in decisions.starts] == [1]
    assert decisions.estimates[2] == NOW + 100


def test_without_time_limits_nothing_overtakes_a_waiting_job():
    running = [holder(100, (0, 1), None)]  # no limit: nobody knows when these GPUs come back
    decisions = schedule([NODE], running, [job(1, 4, None), job(2, 1, 10)], NOW)
    assert decisions.starts == []
    assert decisions.reasons == {1: PendingReason.RESOURCES, 2: PendingReason.PRIORITY}
    assert decisions.estimates == {}


def test_each_waiting_job_gets_its_own_estimate_in_order():
    running = [holder(100, (0, 1, 2, 3), NOW + 60)]
    decisions = schedule([NODE], running, [job(1, 4, 100), job(2, 4, 100), job(3, 2, 30)], NOW)
    assert decisions.estimates == {1: NOW + 60, 2: NOW + 160, 3: NOW + 260}


def test_profile_reservations_split_segments():
    profile = NodeProfile.build(NODE, [holder(9, (0,), NOW + 10)], NOW)
    profile.reserve(NOW + 5, NOW + 20, 1, 0, (1,))
    assert profile.earliest(Request(gpus=4), 10) == (NOW + 20, (0, 1, 2, 3))
    assert profile.earliest(Request(gpus=2), 10)[0] == NOW


scenario = st.lists(
    st.tuples(st.integers(1, 4), st.sampled_from([10, 60, 300, 3600])), min_size=1, max_size=12
)


@settings(max_examples=150, deadline=None)
@given(
    held=st.lists(st.tuples(st.integers(1, 4), st.sampled_from([5, 50, 500])), max_size=3),
    queue=scenario,
)
def test_backfill_never_delays_the_reserved_jobs_start(held, queue):
    running, next_gpu = [], 0
    for i, (gpus, left) in enumerate(held):
        ids = tuple(range(next_gpu, min(4, next_gpu + gpus)))
        next_gpu += len(ids)
        if ids:
            running.append(holder(100 + i, ids, NOW + left))
    pending = [job(i + 1, gpus, limit) for i, (gpus, limit) in enumerate(queue)]
    first = schedule([NODE], running, pending, NOW)
    top = next((p.job_id for p in pending if p.job_id in first.estimates), None)
    if top is None:
        return
    # apply the pass: what it started now runs, and the next pass must still see top start no later
    after = schedule([NODE], running + first.starts, [p for p in pending if p.job_id not in {a.job_id for a in first.starts}], NOW)
    assert top in after.estimates
    assert after.estimates[top] <= first.estimates[top]


@settings(max_examples=150, deadline=None)
@given(queue=scenario)
def test_gpus_are_never_promised_twice_at_any_moment(queue):
    running = [holder(100, (0, 1), NOW + 30)]
    pending = [job(i + 1, gpus, limit) for i, (gpus, limit) in enumerate(queue)]
    decisions = schedule([NODE], running, pending, NOW)
    spans = [(NOW, a.end_time, set(a.gpu_ids), a.job_id) for a in decisions.starts] + [(NOW, NOW + 30, {0, 1}, 100)]
    for a in spans:
        for b in spans:
            if a[3] < b[3] and a[0] < (b[1] or 1e18) and b[0] < (a[1] or 1e18):
                assert not (a[2] & b[2])
