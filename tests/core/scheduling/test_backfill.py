"""Backfill by time limits: reservations, estimates, and never delaying a job ahead."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.scheduling.backfill import NodeProfile, ProfileIndex
from corral.core.scheduling.policy import PendingJob, schedule
from corral.core.scheduling.resources import Allocation, Gpu, Node
from corral.core.jobspec.request import Request
from corral.core.jobspec.states import PendingReason

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


# -- the index over all nodes: the same answer as asking every node ------------------------------

MIXED = (("A100", 81920), ("A100", 40960), ("H100", 81920))


@st.composite
def machine_st(draw):
    """Nodes of 0 to 4 GPUs of mixed kinds, and running jobs on them that end at various times (or never)."""
    nodes, running = [], []
    for n in range(draw(st.integers(1, 5))):
        kinds = [draw(st.sampled_from(MIXED)) for _ in range(draw(st.integers(0, 4)))]
        node = Node(f"n{n}", cpus=draw(st.sampled_from([2, 4, 32])), mem_mb=draw(st.sampled_from([0, 64_000])),
                    gpus=tuple(Gpu(i, t, m) for i, (t, m) in enumerate(kinds)))
        nodes.append(node)
        free = list(range(len(kinds)))
        for i in range(draw(st.integers(0, 3))):
            held = tuple(g for g in free if draw(st.booleans()))
            free = [g for g in free if g not in held]
            end = draw(st.sampled_from([None, NOW, NOW + 10, NOW + 60, NOW + 60, NOW + 500]))
            running.append(Allocation(100 * n + i, node.name, held, draw(st.integers(0, 2)), 0, end_time=end))
    return nodes, running


request_st = st.builds(
    Request, gpus=st.integers(0, 5), gpu_type=st.sampled_from([None, None, "a100", "H100"]),
    gpu_mem_mb=st.sampled_from([None, None, 81920]), cpus=st.integers(1, 4), mem_mb=st.sampled_from([0, 0, 32_000]),
)


@settings(max_examples=200, deadline=None)
@given(machine=machine_st(), asks=st.lists(st.tuples(request_st, st.sampled_from([5, 60, 600, math.inf])), max_size=10))
def test_the_index_finds_what_a_scan_of_every_node_finds(machine, asks):
    nodes, running = machine
    profiles = [NodeProfile.build(n, [a for a in running if a.node == n.name], NOW) for n in nodes]
    index = ProfileIndex(profiles)
    for request, duration in asks:
        scan = [(found[0], k, found[1]) for k, p in enumerate(profiles) if (found := p.earliest(request, duration))]
        expected = min(scan, default=None)  # the earliest start; among equals, the lowest node index
        for k, profile in enumerate(profiles):
            found = profile.earliest(request, duration)
            if found is not None:  # the bound the index ranks by never promises too late
                assert profile.first_free()[request.gpus] <= found[0]
        got = index.earliest(request, duration)
        assert got == (None if expected is None else (expected[1], expected[0], expected[2]))
        if got is not None:  # reserve it, as a pass does, and ask again on what is left
            k, start, gpu_ids = got
            index.reserve(k, start, start + duration, request.cpus, request.mem_mb, gpu_ids)


def test_among_nodes_free_equally_early_the_index_picks_the_lowest_index():
    # n0's GPU comes back at +60; n1 has a GPU free now but not the CPUs until +60: both fit at +60
    n0 = Node("n0", cpus=8, mem_mb=0, gpus=(Gpu(0, "A100", 81920),))
    n1 = Node("n1", cpus=8, mem_mb=0, gpus=(Gpu(0, "A100", 81920),))
    running = [Allocation(1, "n0", (0,), 1, 0, end_time=NOW + 60), Allocation(2, "n1", (), 8, 0, end_time=NOW + 60)]
    profiles = [NodeProfile.build(n, [a for a in running if a.node == n.name], NOW) for n in (n0, n1)]
    assert ProfileIndex(profiles).earliest(Request(gpus=1, cpus=4), 100) == (0, NOW + 60, (0,))
    decisions = schedule([n0, n1], running, [PendingJob(3, Request(gpus=1, cpus=4), time_limit_s=100)], NOW)
    assert decisions.estimates == {3: NOW + 60}


def test_first_free_is_when_each_gpu_count_is_first_free():
    running = [holder(1, (0,), NOW + 10), holder(2, (1, 2), NOW + 30), holder(3, (3,), None)]
    profile = NodeProfile.build(NODE, running, NOW)
    assert profile.first_free() == [NOW, NOW + 10, NOW + 30, NOW + 30, math.inf]
    profile.reserve(NOW + 30, NOW + 50, 1, 0, (0,))  # GPU 0 is taken again for a while
    assert profile.first_free() == [NOW, NOW + 10, NOW + 30, NOW + 50, math.inf]
