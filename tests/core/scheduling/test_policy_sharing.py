"""Sharing a GPU in the pure policy: sharing jobs pack onto one GPU within its memory, whole-GPU jobs never
land on a shared GPU, a sharing job that does not fit goes to another GPU or waits, and a reservation made for
it holds only its share."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.scheduling.backfill import NodeProfile
from corral.core.scheduling.forecast import forecast
from corral.core.scheduling.policy import PendingJob, schedule
from corral.core.scheduling.reservations import Reservation, book
from corral.core.scheduling.schedconfig import SchedulerConfig
from corral.core.scheduling.sharing import BudgetWatch, SharingSettings, outside_holds, shareable_beside
from corral.core.scheduling.topology import build_topology
from corral.core.scheduling.resources import Allocation, Gpu, Node
from corral.core.jobspec.request import Request
from corral.core.jobspec.states import PendingReason

NOW = 1000.0
GB = 1024
NODE = Node("gpu01", cpus=32, mem_mb=256 * GB, gpus=tuple(Gpu(i, "A100", 80 * GB) for i in range(2)))


def job(job_id: int, share_gb: int = 0, gpus: int = 1, limit: int = 3600) -> PendingJob:
    return PendingJob(job_id, Request(gpus=gpus, gpu_share_mb=share_gb * GB), time_limit_s=limit)


def test_two_sharing_jobs_pack_onto_one_gpu_within_its_memory():
    decisions = schedule([NODE], [], [job(1, 40), job(2, 30)], NOW)
    assert [(a.job_id, a.gpu_ids, a.gpu_share_mb) for a in decisions.starts] == [(1, (0,), 40 * GB), (2, (0,), 30 * GB)]


def test_a_whole_gpu_job_never_lands_on_a_shared_gpu():
    decisions = schedule([NODE], [], [job(1, 10), job(2), job(3)], NOW)
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(1, (0,)), (2, (1,))]
    assert decisions.reasons == {3: PendingReason.RESOURCES}
    assert decisions.reserved[3] == ("gpu01", (0,))  # GPU 0 is its once the sharing job ends
    assert decisions.estimates[3] == NOW + 3600


def test_a_sharing_job_that_does_not_fit_beside_the_others_takes_another_gpu():
    decisions = schedule([NODE], [], [job(1, 50), job(2, 40)], NOW)
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(1, (0,)), (2, (1,))]


def test_a_sharing_job_waits_when_no_gpu_has_its_memory_free_and_its_reservation_holds_only_its_share():
    running = [Allocation(8, "gpu01", (0,), 1, 0, end_time=NOW + 600, gpu_share_mb=60 * GB),
               Allocation(9, "gpu01", (1,), 1, 0, end_time=NOW + 1200)]
    decisions = schedule([NODE], running, [job(1, 30), job(2, 10, limit=600)], NOW)
    assert decisions.estimates[1] == NOW + 600 and decisions.reserved[1] == ("gpu01", (0,))
    # 20 GB are left on GPU 0 beside the 60 GB job, and a 10 GB job that ends in time starts there now
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(2, (0,))]


def test_sharing_jobs_prefer_the_fullest_shared_gpu_so_whole_gpus_stay_free():
    three = Node("gpu01", cpus=32, mem_mb=256 * GB, gpus=tuple(Gpu(i, "A100", 80 * GB) for i in range(3)))
    running = [Allocation(8, "gpu01", (1,), 1, 0, gpu_share_mb=20 * GB),
               Allocation(9, "gpu01", (2,), 1, 0, gpu_share_mb=50 * GB)]
    decisions = schedule([three], running, [job(1, 20), job(2, 4)], NOW)
    assert decisions.starts[0].gpu_ids == (2,)  # 80 - 50 - 20 leaves least: the best fit
    assert decisions.starts[1].gpu_ids == (2,)


def test_a_sharing_job_bigger_than_any_gpu_never_starts():
    assert NodeProfile.build(NODE, [], NOW).earliest(Request(gpus=1, gpu_share_mb=90 * GB), 60) is None


def test_a_drained_gpu_takes_no_new_share():
    running = [Allocation(8, "gpu01", (0,), 1, 0, gpu_share_mb=10 * GB)]
    decisions = schedule([NODE], running, [job(1, 10)], NOW, drained={"gpu01": frozenset({0})})
    assert [a.gpu_ids for a in decisions.starts] == [(1,)]


@settings(max_examples=200, deadline=None)
@given(wants=st.lists(st.tuples(st.integers(0, 1), st.integers(1, 80)), min_size=1, max_size=10),
       running=st.lists(st.tuples(st.integers(0, 1), st.integers(1, 40)), max_size=2))
def test_no_gpu_holds_more_shares_than_its_memory_and_none_mixes_whole_and_shared_jobs(wants, running):
    held = [Allocation(100 + i, "gpu01", (g,), 1, 0, end_time=NOW + 100 * (i + 1), gpu_share_mb=gb * GB)
            for i, (g, gb) in enumerate(running)]
    pending = [job(i, share_gb=gb if whole == 0 else 0) for i, (whole, gb) in enumerate(wants)]
    decisions = schedule([NODE], held, pending, NOW)
    everything = held + decisions.starts
    for g in range(2):
        on = [a for a in everything if g in a.gpu_ids]
        if any(a.gpu_share_mb == 0 for a in on):
            assert len(on) == 1, on
        else:
            assert sum(a.gpu_share_mb for a in on) <= 80 * GB


def test_a_job_over_its_budget_is_warned_once_then_stopped_after_the_grace_and_forgiven_if_it_drops_back():
    watch = BudgetWatch(SharingSettings(over_budget="stop", grace_s=30))
    budgets = {7: (20 * GB, "--gpu-mem")}
    first, _ = watch.check(budgets, {7: 24.1 * GB}, NOW)
    assert [(v.first, v.stop, v.stop_at) for v in first] == [(True, False, NOW + 30)]
    assert first[0].reason() == "GPU memory 24.1 GB over its budget of 20 GB (--gpu-mem)"
    again, _ = watch.check(budgets, {7: 24 * GB}, NOW + 10)
    assert [(v.first, v.stop) for v in again] == [(False, False)]
    assert watch.check(budgets, {7: 19 * GB}, NOW + 20) == ([], [7])  # back within: the grace starts over
    watch.check(budgets, {7: 21 * GB}, NOW + 25)
    late, _ = watch.check(budgets, {7: 21 * GB}, NOW + 55)
    assert [v.stop for v in late] == [True]


def test_warn_only_never_stops_and_a_job_nvml_lists_no_process_of_is_within():
    watch = BudgetWatch(SharingSettings(over_budget="warn", grace_s=0))
    verdicts, _ = watch.check({7: (GB, "--gres=shard:1"), 8: (GB, "--gpu-mem")}, {7: 5 * GB}, NOW)
    assert [(v.job_id, v.stop, v.stop_at) for v in verdicts] == [(7, False, None)]
    assert verdicts[0].reason() == "GPU memory 5 GB over its budget of 1 GB (--gres=shard:1)"


def test_beside_a_process_outside_corral_sharing_jobs_fit_its_free_memory_and_whole_gpu_jobs_block_nobody():
    one = Node("gpu01", cpus=32, mem_mb=256 * GB, gpus=(Gpu(0, "A100", 80 * GB),))
    held = {"gpu01": {0: 60 * GB}}
    pending = [job(1), job(2, 10), job(3, 15)]
    decisions = schedule([one], outside_holds(held), pending, NOW, shareable=shareable_beside(held))
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(2, (0,))]
    assert decisions.reasons == {1: PendingReason.NODE_NOT_AVAIL, 3: PendingReason.RESOURCES}


def test_a_gpu_shareable_beside_a_process_is_drained_to_whole_gpu_jobs_and_forecasts_only():
    two = Node("gpu01", cpus=32, mem_mb=256 * GB, gpus=(Gpu(0, "A100", 80 * GB), Gpu(1, "A100", 80 * GB)))
    held = {"gpu01": {1: 60 * GB}}  # a notebook on GPU 1, the only free one beside a job on GPU 0
    running = [Allocation(9, "gpu01", (0,), 1, 0, end_time=NOW + 3600), *outside_holds(held)]
    shareable = shareable_beside(held)
    assert shareable == {"gpu01": frozenset({1})}
    # GPU 1 is drained to whole-GPU jobs: one that needs it waits (ReqNodeNotAvail) blocking nobody, one that
    # does not waits for GPU 0; a sharing job starts on GPU 1 within what the notebook leaves
    decisions = schedule([two], running, [job(1, gpus=2), job(2, 10), job(3)], NOW, shareable=shareable)
    assert [(a.job_id, a.gpu_ids, a.gpu_share_mb) for a in decisions.starts] == [(2, (1,), 10 * GB)]
    assert decisions.reasons == {1: PendingReason.NODE_NOT_AVAIL, 3: PendingReason.RESOURCES}
    assert decisions.reserved == {3: ("gpu01", (0,))} and decisions.estimates == {3: NOW + 3600}
    # a forecast sees it as the pass does
    def ahead(pending: PendingJob):
        return forecast(pending, nodes=[two], running=running, queue=[], usage={}, now=NOW, config=SchedulerConfig(),
                        shareable=shareable)
    assert ahead(job(7, gpus=2)).code == PendingReason.NODE_NOT_AVAIL.value
    assert (ahead(job(7)).start, ahead(job(7)).gpu_ids) == (NOW + 3600, (0,))
    assert (ahead(job(7, 20)).start, ahead(job(7, 20)).gpu_ids) == (NOW, (1,))
    assert ahead(job(7, 21)).start != NOW  # 60 + 21 GB is more than GPU 1 has


def test_a_drained_gpu_takes_no_share_even_where_it_is_shareable_beside_a_process():
    # GPU 1, held by a job for an hour, lets the job pass the up-front check: the timeline must keep it off GPU 0
    held = {"gpu01": {0: 20 * GB}}
    running = [Allocation(9, "gpu01", (1,), 1, 0, end_time=NOW + 3600), *outside_holds(held)]
    decisions = schedule([NODE], running, [job(1, 10)], NOW, drained={"gpu01": frozenset({0})},
                         shareable=shareable_beside(held))
    assert decisions.starts == [] and decisions.reasons == {1: PendingReason.RESOURCES}
    assert decisions.reserved == {1: ("gpu01", (1,))} and decisions.estimates == {1: NOW + 3600}


def test_across_nodes_a_sharing_job_joins_a_shared_gpu_before_taking_a_whole_one_on_a_lower_node():
    other = Node("gpu02", cpus=32, mem_mb=256 * GB, gpus=tuple(Gpu(i, "A100", 80 * GB) for i in range(2)))
    running = [Allocation(8, "gpu02", (1,), 1, 0, gpu_share_mb=40 * GB)]
    decisions = schedule([NODE, other], running, [job(1, 20), job(2, 30)], NOW)
    assert [(a.node, a.gpu_ids) for a in decisions.starts] == [("gpu02", (1,)), ("gpu01", (0,))]


def test_a_reserved_gpu_takes_no_sharing_job_from_outside_the_reservation_even_beside_an_outside_process():
    one = Node("gpu01", cpus=32, mem_mb=256 * GB, gpus=(Gpu(0, "A100", 80 * GB), Gpu(1, "A100", 80 * GB)))
    held = {"gpu01": {0: 20 * GB}}  # a notebook on GPU 0, which sharing jobs may use beside it ("share")
    kept = book([Reservation("demo", "gpu01", (0,), 1, GB, ("ada",), (), NOW, NOW + 7200, "root", NOW)], {})
    decisions = schedule([one], outside_holds(held), [job(1, 10)], NOW, shareable=shareable_beside(held),
                         reservations=kept)
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(1, (1,))]


def test_a_sharing_job_with_a_gpu_feature_constraint_shares_only_gpus_that_have_it():
    fast = Node("gpu01", cpus=32, mem_mb=256 * GB, gpus=tuple(Gpu(i, "A100", 80 * GB) for i in range(2)),
                topology=build_topology(range(2), gpu_features={"fast": [1]}))
    pending = [PendingJob(1, Request(gpus=1, gpu_share_mb=10 * GB, features="fast"), time_limit_s=3600)]
    decisions = schedule([fast], [], pending, NOW)
    assert [(a.job_id, a.gpu_ids) for a in decisions.starts] == [(1, (1,))]
