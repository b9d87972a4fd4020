"""Multifactor priority and classic fair share, against hand-worked examples."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.scheduling.pending import PendingJob
from corral.core.scheduling.priority import decay, fairshare_factors, job_priority, prioritize, usage_charge
from corral.core.jobspec.request import Request
from corral.core.scheduling.schedconfig import Partition, PriorityWeights, Qos, SchedulerConfig


@pytest.mark.parametrize("usage, expected", [
    ({"ada": 0.0, "bob": 10.0}, {"ada": 1.0, "bob": 0.25}),       # U=0 -> 1; U=1, S=1/2 -> 2^-2
    ({"ada": 5.0, "bob": 5.0}, {"ada": 0.5, "bob": 0.5}),          # U = S -> 0.5 (Slurm's doc: "F=0.5")
    ({"ada": 7.5, "bob": 2.5}, {"ada": 2 ** -1.5, "bob": 2 ** -0.5}),
])
def test_classic_fairshare_is_two_to_the_minus_usage_over_shares(usage, expected):
    factors = fairshare_factors(usage, {"ada", "bob"}, {})
    for user, value in expected.items():
        assert math.isclose(factors[user], value)


def test_shares_weigh_the_fair_part():
    # ada holds 3 of 4 shares: using 75% of the machine is exactly her share
    factors = fairshare_factors({"ada": 7.5, "bob": 2.5}, {"ada", "bob"}, {"ada": 3})
    assert math.isclose(factors["ada"], 0.5) and math.isclose(factors["bob"], 0.5)


def test_a_new_user_with_no_usage_gets_the_full_factor():
    assert fairshare_factors({}, {"ada"}, {}) == {"ada": 1.0}


def test_usage_decays_by_half_each_half_life():
    assert decay(8.0, 3 * 86400, 86400) == 1.0
    assert usage_charge(gpus=2, cpus=8, seconds=3600) == 2.0  # GPU-hours; CPUs of a GPU job are not charged
    assert math.isclose(usage_charge(gpus=0, cpus=20, seconds=3600), 1.0)


def priority(config=SchedulerConfig(), **overrides):
    args = dict(wait_s=0.0, fairshare=1.0, gpus=1, cpus=1, total_gpus=8, total_cpus=64,
                partition=config.partition(None), qos=config.qos_of(None), nice=0, config=config)
    args.update(overrides)
    return job_priority(**args)


def test_the_formula_is_the_weighted_sum_minus_nice():
    config = SchedulerConfig(
        weights=PriorityWeights(age=1000, fairshare=10000, job_size=1000, partition=1000, qos=1000, max_age_s=1000),
        partitions={"gpu": Partition("gpu", priority_factor=2), "low": Partition("low", priority_factor=1)},
        default_partition="gpu", qos={"normal": Qos("normal", priority=10), "high": Qos("high", priority=20)},
        default_qos="normal",
    )
    factors = priority(config, wait_s=500, fairshare=0.25, gpus=2, nice=50,
                       partition=config.partitions["low"], qos=config.qos["high"])
    # 1000*0.5 + 10000*0.25 + 1000*(2/8) + 1000*(1/2) + 1000*(20/20) - 50
    assert factors.priority == 500 + 2500 + 250 + 500 + 1000 - 50
    assert (factors.age, factors.job_size, factors.partition, factors.qos) == (0.5, 0.25, 0.5, 1.0)


def test_age_saturates_at_max_age():
    config = SchedulerConfig(weights=PriorityWeights(max_age_s=100))
    assert priority(config, wait_s=1e9).age == 1.0


@given(st.floats(0, 1), st.floats(0, 1))
def test_a_user_who_used_less_gets_ahead_all_else_equal(u1, u2):
    factors = fairshare_factors({"ada": u1, "bob": u2}, {"ada", "bob"}, {})
    p_ada = priority(fairshare=factors["ada"]).priority
    p_bob = priority(fairshare=factors["bob"]).priority
    if u1 < u2:
        assert p_ada >= p_bob
    elif u2 < u1:
        assert p_bob >= p_ada


_TIERED = SchedulerConfig(
    weights=PriorityWeights(age=1000, fairshare=10000, job_size=500, partition=1000, qos=1000, max_age_s=3600),
    partitions={"gpu": Partition("gpu", priority_factor=2), "low": Partition("low"), "urgent": Partition("urgent", tier=2)},
    default_partition="gpu", qos={"normal": Qos("normal", priority=10), "high": Qos("high", priority=40)},
    default_qos="normal", shares={"ada": 3},
)

pending_st = st.lists(
    st.builds(
        lambda gpus, cpus, user, partition, qos, waited, nice: (gpus, cpus, user, partition, qos, waited, nice),
        st.integers(0, 8), st.integers(1, 64), st.sampled_from(["ada", "bob", "cy"]),
        st.sampled_from([None, "gpu", "low", "urgent", "gone"]), st.sampled_from([None, "normal", "high", "gone"]),
        st.sampled_from([-5.0, 0.0, 10.0, 10.0, 1800.5, 7200.0]), st.sampled_from([0, 0, 100, -100]),
    ),
    max_size=30,
)


@settings(deadline=None)
@given(pending_st, st.dictionaries(st.sampled_from(["ada", "bob", "dee"]), st.floats(0, 100)))
def test_prioritize_orders_by_tier_then_job_priority_then_submit_order(rows, usage):
    now = 10_000.0
    jobs = [PendingJob(50 - k, Request(gpus=g, cpus=c), user=u, partition=p, qos=q, submit_time=now - w, nice=n)
            for k, (g, c, u, p, q, w, n) in enumerate(rows)]
    ordered, factors = prioritize(jobs, usage=usage, config=_TIERED, now=now, total_gpus=16, total_cpus=128)
    fair = fairshare_factors(usage, {job.user for job in jobs}, _TIERED.shares)
    expected = {}
    for job in jobs:
        partition = _TIERED.partitions.get(job.partition or "", _TIERED.partition(None))
        expected[job.job_id] = job_priority(
            wait_s=now - job.submit_time, fairshare=fair.get(job.user, 1.0), gpus=job.request.gpus,
            cpus=job.request.cpus, total_gpus=16, total_cpus=128, partition=partition,
            qos=_TIERED.qos.get(job.qos or "", _TIERED.qos_of(None)), nice=job.nice, config=_TIERED,
        ), partition.tier
    assert factors == {job_id: f for job_id, (f, _) in expected.items()}
    key = {job.job_id: (-expected[job.job_id][1], -expected[job.job_id][0].priority, job.submit_time, job.job_id)
           for job in jobs}
    assert [job.job_id for job in ordered] == sorted(key, key=key.__getitem__)


def test_a_higher_tier_goes_first_whatever_the_priority_then_submit_order():
    jobs = [PendingJob(1, Request(gpus=1), user="ada", partition="gpu", submit_time=0.0),
            PendingJob(2, Request(gpus=1), user="ada", partition="urgent", submit_time=5.0, nice=5000),
            PendingJob(3, Request(gpus=1), user="ada", partition="gpu", submit_time=0.0),
            PendingJob(4, Request(gpus=1), user="ada", partition="gpu", submit_time=-50.0)]
    # an hour waited saturates the age factor: 1, 3 and 4 have the same priority
    ordered, factors = prioritize(jobs, usage={}, config=_TIERED, now=10_000.0, total_gpus=8, total_cpus=64)
    assert [job.job_id for job in ordered] == [2, 4, 1, 3]
    assert factors[2].priority < factors[1].priority == factors[3].priority == factors[4].priority
