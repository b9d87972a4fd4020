"""GPU topology: close GPUs for multi-GPU jobs, packed single-GPU jobs, --constraint=nvlink and GPU features."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.scheduling.policy import PendingJob, schedule
from corral.core.scheduling.resources import Allocation, Gpu, Node, check_satisfiable
from corral.core.jobspec.request import Request
from corral.core.jobspec.states import PendingReason
from corral.core.scheduling.topology import ANY_GPUS, LEVELS, SYS, Topology, build_topology, choose_gpus, parse_gpu_list
from corral.errors import InvalidRequest, Unsatisfiable

NOW = 1000.0
# Two NVLink cliques of four; within a clique pairs of GPUs share a PCIe switch; cliques on two sockets.
TWO_CLIQUES = build_topology(
    range(8), nvlink=[(a, b) for q in (range(4), range(4, 8)) for a, b in combinations(q, 2)],
    pcie={**{(a, a + 1): "PIX" for a in (0, 2, 4, 6)}, (0, 2): "PHB", (4, 6): "PHB", (0, 4): "SYS"})


def node(topology: Topology | None = TWO_CLIQUES, features: tuple[str, ...] = ()) -> Node:
    return Node("n1", cpus=64, mem_mb=512_000, gpus=tuple(Gpu(i, "H100", 81920) for i in range(8)),
                topology=topology, features=features)


def holder(job_id: int, gpus: tuple[int, ...]) -> Allocation:
    return Allocation(job_id, "n1", gpus, 1, 0, end_time=NOW + 3600)


def started(running: list[Allocation], *requests: Request, n: Node | None = None) -> list[tuple[int, ...]]:
    jobs = [PendingJob(i + 1, r, time_limit_s=600) for i, r in enumerate(requests)]
    return [a.gpu_ids for a in schedule([n or node()], running, jobs, NOW).starts]


def test_levels_read_as_nvidia_smi_names_them():
    assert TWO_CLIQUES is not None
    assert TWO_CLIQUES.level(0, 3) == "NV"
    assert TWO_CLIQUES.level(0, 4) == SYS
    assert TWO_CLIQUES.nvlink_group(5) == (4, 5, 6, 7)
    assert TWO_CLIQUES.names == {"nvlink"}


def test_a_four_gpu_job_lands_inside_one_clique_even_when_lower_gpus_of_the_other_are_free():
    # GPU 3 busy: 0-2 are the lowest free, but they span no clique of four; 4-7 is one
    assert started([holder(100, (3,))], Request(gpus=4)) == [(4, 5, 6, 7)]


def test_a_two_gpu_job_takes_the_fuller_clique_so_a_whole_one_stays_free():
    # GPU 4 busy: clique 0-3 has four free, clique 4-7 three: the pair goes to 5, 6 (best fit)
    assert started([holder(100, (4,))], Request(gpus=2), Request(gpus=4)) == [(5, 6), (0, 1, 2, 3)]


def test_single_gpu_jobs_pack_into_the_busiest_clique_and_switch():
    # 0 busy: GPU 1 shares its switch with it; the next one-GPU jobs fill clique 0-3 before touching 4-7
    assert started([holder(100, (0,))], Request(gpus=1), Request(gpus=1), Request(gpus=1)) == [(1,), (2,), (3,)]
    # 5 busy: GPU 4 (its switch partner) first, though 0-3 are lower
    assert started([holder(100, (5,))], Request(gpus=1)) == [(4,)]


def test_without_topology_gpus_are_the_lowest_free_as_before():
    assert started([holder(100, (3,))], Request(gpus=4), n=node(None)) == [(0, 1, 2, 4)]
    assert started([holder(100, (5,))], Request(gpus=1), n=node(None)) == [(0,)]


def test_constraint_nvlink_waits_for_a_whole_clique():
    running = [holder(100, (0,)), holder(101, (4,))]
    n = node()
    jobs = [PendingJob(1, Request(gpus=4, features="nvlink"), time_limit_s=600)]
    decisions = schedule([n], running, jobs, NOW)
    assert decisions.starts == []
    assert decisions.reasons[1] is PendingReason.RESOURCES
    # without the constraint, four GPUs across the cliques do
    assert started(running, Request(gpus=4)) == [(1, 2, 3, 5)]


def test_constraint_nvlink_more_than_a_clique_is_refused_naming_constraint():
    with pytest.raises(Unsatisfiable) as caught:
        check_satisfiable(Request(gpus=6, features="nvlink"), [node()])
    assert caught.value.field == "constraint"
    assert "requested 6 GPUs with --constraint=nvlink; at most 4 on any node meet it together" in caught.value.message
    assert "NVLink groups 0-3, 4-7" in caught.value.message
    decisions = schedule([node()], [], [PendingJob(1, Request(gpus=6, features="nvlink"), time_limit_s=60)], NOW)
    assert decisions.reasons[1] is PendingReason.BAD_CONSTRAINTS


def test_nvlink_stays_a_node_feature_where_no_links_are_known():
    plain = node(None, features=("nvlink",))
    assert started([holder(100, (3,))], Request(gpus=4, features="nvlink"), n=plain) == [(0, 1, 2, 4)]
    check_satisfiable(Request(gpus=8, features="nvlink"), [plain])


def test_node_features_still_combine_with_gpu_features():
    topo = build_topology(range(8), gpu_features={"fast": [4, 5, 6, 7]})
    n = node(topo, features=("ib",))
    assert started([], Request(gpus=2, features="fast&ib"), n=n) == [(4, 5)]
    assert started([], Request(gpus=2, features="ib"), n=n) == [(0, 1)]
    assert started([], Request(gpus=2, features="slow|fast"), n=n) == [(4, 5)]
    with pytest.raises(Unsatisfiable) as caught:
        check_satisfiable(Request(gpus=5, features="fast"), [n])
    assert caught.value.field == "constraint" and "GPU feature fast: 4-7" in caught.value.message
    with pytest.raises(Unsatisfiable, match="no node here has the features gpu9"):
        check_satisfiable(Request(gpus=1, features="gpu9"), [n])


def test_preemption_for_an_nvlink_job_frees_a_whole_group():
    from corral.core.scheduling.priority import PriorityFactors

    running = [Allocation(10, "n1", (0,), 1, 0, preemptible=False),
               Allocation(11, "n1", (4,), 1, 0, preemptible=True, priority=1),
               Allocation(12, "n1", (5,), 1, 0, preemptible=True, priority=2)]
    jobs = [PendingJob(1, Request(gpus=4, features="nvlink"), time_limit_s=600)]
    decisions = schedule([node()], running, jobs, NOW, priorities={1: PriorityFactors(100, 0, 0, 0, 0, 0, 0)})
    # six GPUs free once job 11 goes, but 4-7 are one group only once job 12 goes too
    assert decisions.preempt == [11, 12]


def test_an_exclusive_job_takes_every_gpu_whatever_the_links():
    assert started([], Request(gpus=1, exclusive=True, features="nvlink")) == [tuple(range(8))]


def test_gpu_lists_are_read_and_checked():
    assert parse_gpu_list("0-3, 6", "node.nvlink", range(8)) == (0, 1, 2, 3, 6)
    with pytest.raises(InvalidRequest) as caught:
        parse_gpu_list("0-9", "node.nvlink", range(8))
    assert caught.value.field == "node.nvlink" and "GPU 8" in caught.value.message
    with pytest.raises(InvalidRequest, match="cannot read '3-1'"):
        parse_gpu_list("3-1", "node.nvlink", range(8))


def _worst(topology: Topology, gpus: tuple[int, ...]) -> int:
    names = [*LEVELS, SYS]
    return max((names.index(topology.level(a, b)) for a, b in combinations(gpus, 2)), default=0)


@st.composite
def machines(draw: st.DrawFn) -> tuple[Topology, list[int], int]:
    n = draw(st.integers(2, 8))
    nvlink = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=12))
    pairs = [(a, b) for a, b in combinations(range(n), 2)]
    pcie = dict(draw(st.lists(st.tuples(st.sampled_from(pairs), st.sampled_from([*LEVELS[1:], SYS])), max_size=10)))
    topology = build_topology(range(n), nvlink=nvlink, pcie=pcie)
    free = sorted(draw(st.sets(st.integers(0, n - 1), min_size=1)))
    need = draw(st.integers(1, len(free)))
    return topology or Topology(), free, need


@settings(max_examples=300, deadline=None)
@given(machines())
def test_the_chosen_set_has_the_closest_farthest_pair_there_is(machine):
    topology, free, need = machine
    chosen = choose_gpus(topology, ANY_GPUS, free, need)
    assert chosen is not None and len(set(chosen)) == need and set(chosen) <= set(free)
    if topology.levels:
        best = min(_worst(topology, c) for c in combinations(free, need))
        assert _worst(topology, chosen) == best
        linked = choose_gpus(topology, ((None, True),), free, need)
        if need > 1:
            # nvlink: only a set all in one NVLink group, and one whenever such a set is free
            possible = any(_worst(topology, c) == 0 for c in combinations(free, need))
            assert (linked is not None) == possible
            assert linked is None or all(topology.level(a, b) == "NV" for a, b in combinations(linked, 2))
    else:
        assert chosen == tuple(free[:need])


@settings(max_examples=200, deadline=None)
@given(machines())
def test_groups_nest_so_closeness_is_a_hierarchy(machine):
    topology = machine[0]
    for lower, upper in zip(topology.levels, topology.levels[1:]):
        for a, b in combinations(range(len(lower)), 2):
            if lower[a] == lower[b] != -1:
                assert upper[a] == upper[b]


def test_a_gpu_the_links_do_not_know_is_a_group_of_its_own():
    assert TWO_CLIQUES is not None
    assert choose_gpus(TWO_CLIQUES, ANY_GPUS, [0, 1, 9, 10], 2) == (0, 1)
    assert choose_gpus(TWO_CLIQUES, ANY_GPUS, [1, 9, 10], 2) == (1, 9)  # no two share anything: the lowest
    assert choose_gpus(TWO_CLIQUES, ANY_GPUS, [4, 5, 9], 1) == (9,)  # packed: the lone GPU first, 4 and 5 stay a pair
    assert choose_gpus(TWO_CLIQUES, ((None, True),), [1, 9, 10], 2) is None


@settings(max_examples=150, deadline=None)
@given(busy=st.sets(st.integers(0, 7), max_size=6),
       asks=st.lists(st.tuples(st.integers(1, 8), st.booleans()), min_size=1, max_size=8))
def test_a_pass_never_gives_a_gpu_twice_and_nvlink_jobs_one_group(busy, asks):
    running = [holder(100 + i, (g,)) for i, g in enumerate(sorted(busy))]
    jobs = [PendingJob(i + 1, Request(gpus=n, features="nvlink" if linked else None), time_limit_s=600)
            for i, (n, linked) in enumerate(asks)]
    starts = schedule([node()], running, jobs, NOW).starts
    given_out = [g for a in starts for g in a.gpu_ids]
    assert len(given_out) == len(set(given_out)) and not set(given_out) & busy
    for a in starts:
        request = jobs[a.job_id - 1].request
        assert len(a.gpu_ids) == request.gpus
        if request.features == "nvlink":
            assert len({g // 4 for g in a.gpu_ids}) == 1
