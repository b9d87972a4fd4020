"""Multifactor priority and classic fair share, against hand-worked examples."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.core.priority import decay, fairshare_factors, job_priority, usage_charge
from corral.core.schedconfig import Partition, PriorityWeights, Qos, SchedulerConfig


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
