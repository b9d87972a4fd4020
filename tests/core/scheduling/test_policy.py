"""The scheduling policy: strict submit order with resource fit, as a pure function."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.scheduling.policy import Decisions, PendingJob, schedule
from corral.core.scheduling.resources import Allocation, Gpu, Node, check_satisfiable, gpu_matches
from corral.core.jobspec.request import Request
from corral.core.scheduling.schedconfig import Partition as _Partition
from corral.core.scheduling.schedconfig import Qos as _Qos
from corral.core.scheduling.schedconfig import SchedulerConfig as _Config
from corral.core.jobspec.states import PendingReason
from corral.errors import Unsatisfiable

G = 1024  # MB per GB


def a100s(n: int, mem_mb: int = 80 * G) -> tuple[Gpu, ...]:
    return tuple(Gpu(i, "A100", mem_mb) for i in range(n))


NODE = Node("gpu01", cpus=32, mem_mb=256 * G, gpus=a100s(4))


def job(job_id: int, **request) -> PendingJob:
    return PendingJob(job_id, Request(**request))


def run(nodes, running, pending) -> Decisions:
    return schedule(nodes, running, pending, now=1000.0)


def started(decisions: Decisions) -> dict[int, Allocation]:
    return {a.job_id: a for a in decisions.starts}


# -- examples ----------------------------------------------------------------------------------


def test_nothing_pending_decides_nothing():
    decisions = run([NODE], [], [])
    assert decisions.starts == [] and decisions.reasons == {}


def test_a_job_that_fits_starts_with_what_it_asked_for():
    decisions = run([NODE], [], [job(1, gpus=2, cpus=8, mem_mb=64 * G)])
    assert decisions.starts == [Allocation(1, "gpu01", (0, 1), 8, 64 * G)]
    assert decisions.reasons == {}


def test_a_cpu_only_job_holds_no_gpus():
    decisions = run([NODE], [], [job(1, cpus=4)])
    assert decisions.starts == [Allocation(1, "gpu01", (), 4, 0)]


def test_the_lowest_free_gpu_indices_are_chosen():
    running = [Allocation(10, "gpu01", (0, 2), 1, 0)]
    decisions = run([NODE], running, [job(1, gpus=2)])
    assert decisions.starts[0].gpu_ids == (1, 3)


def test_jobs_started_in_one_pass_get_distinct_gpus():
    decisions = run([NODE], [], [job(1, gpus=1), job(2, gpus=2), job(3, gpus=1)])
    assert [a.gpu_ids for a in decisions.starts] == [(0,), (1, 2), (3,)]


def test_a_blocked_head_gets_resources_and_everyone_behind_it_priority():
    running = [Allocation(10, "gpu01", (0, 1, 2), 1, 0)]
    # job 2 and 3 would fit on the free GPU, but strict order lets nothing overtake job 1
    decisions = run([NODE], running, [job(1, gpus=2), job(2, gpus=1), job(3, cpus=1)])
    assert decisions.starts == []
    assert decisions.reasons == {1: PendingReason.RESOURCES, 2: PendingReason.PRIORITY, 3: PendingReason.PRIORITY}


def test_jobs_ahead_of_the_blocked_one_still_start():
    decisions = run([NODE], [], [job(1, gpus=3), job(2, gpus=2), job(3, gpus=1)])
    assert list(started(decisions)) == [1]
    assert decisions.reasons == {2: PendingReason.RESOURCES, 3: PendingReason.PRIORITY}


def test_a_job_no_node_could_ever_fit_gets_bad_constraints_and_does_not_block():
    decisions = run([NODE], [], [job(1, gpus=5), job(2, gpus=1), job(3, cpus=64), job(4, cpus=2)])
    assert list(started(decisions)) == [2, 4]
    assert decisions.reasons == {1: PendingReason.BAD_CONSTRAINTS, 3: PendingReason.BAD_CONSTRAINTS}


def test_gpu_type_filter_picks_only_gpus_of_that_type():
    node = Node("mixed", 16, 64 * G, (Gpu(0, "V100", 16 * G), Gpu(1, "A100", 80 * G), Gpu(2, "V100", 16 * G)))
    decisions = run([node], [], [job(1, gpus=1, gpu_type="a100"), job(2, gpus=2, gpu_type="V100")])
    assert started(decisions)[1].gpu_ids == (1,)
    assert started(decisions)[2].gpu_ids == (0, 2)


def test_gpu_type_busy_blocks_even_if_other_types_are_free():
    node = Node("mixed", 16, 64 * G, (Gpu(0, "V100", 16 * G), Gpu(1, "A100", 80 * G)))
    running = [Allocation(10, "mixed", (1,), 1, 0)]
    decisions = run([node], running, [job(1, gpus=1, gpu_type="A100"), job(2, gpus=1)])
    assert decisions.starts == []
    assert decisions.reasons == {1: PendingReason.RESOURCES, 2: PendingReason.PRIORITY}


def test_gpu_memory_filter_skips_small_gpus():
    node = Node("mixed", 16, 64 * G, (Gpu(0, "A100", 40 * G), Gpu(1, "A100", 80 * G)))
    decisions = run([node], [], [job(1, gpus=1, gpu_mem_mb=80 * G)])
    assert decisions.starts[0].gpu_ids == (1,)


def test_cpus_held_by_running_jobs_are_counted():
    running = [Allocation(10, "gpu01", (), 30, 0)]
    decisions = run([NODE], running, [job(1, cpus=4)])
    assert decisions.reasons == {1: PendingReason.RESOURCES}
    assert run([NODE], running, [job(1, cpus=2)]).starts[0].cpus == 2


def test_memory_held_by_running_jobs_is_counted():
    running = [Allocation(10, "gpu01", (), 1, 200 * G)]
    decisions = run([NODE], running, [job(1, mem_mb=64 * G)])
    assert decisions.reasons == {1: PendingReason.RESOURCES}
    assert run([NODE], running, [job(1, mem_mb=56 * G)]).starts[0].mem_mb == 56 * G


def test_cpus_and_memory_of_jobs_started_in_the_same_pass_are_counted():
    decisions = run([NODE], [], [job(1, cpus=20, mem_mb=100 * G), job(2, cpus=20), job(3, mem_mb=200 * G)])
    assert list(started(decisions)) == [1]
    assert decisions.reasons == {2: PendingReason.RESOURCES, 3: PendingReason.PRIORITY}


def test_a_job_goes_to_the_next_node_when_the_first_is_full():
    other = Node("gpu02", 32, 256 * G, a100s(4))
    running = [Allocation(10, "gpu01", (0, 1, 2, 3), 1, 0)]
    decisions = run([NODE, other], running, [job(1, gpus=2)])
    assert decisions.starts == [Allocation(1, "gpu02", (0, 1), 1, 0)]


def test_a_job_never_spans_nodes():
    other = Node("gpu02", 32, 256 * G, a100s(4))
    running = [Allocation(10, "gpu01", (0, 1), 1, 0), Allocation(11, "gpu02", (0, 1), 1, 0)]
    decisions = run([NODE, other], running, [job(1, gpus=3)])
    assert decisions.starts == []
    assert decisions.reasons == {1: PendingReason.RESOURCES}


# -- properties --------------------------------------------------------------------------------

GPU_TYPES = ("A100", "H100")
GPU_MEMS = (40 * G, 80 * G)


@st.composite
def nodes_st(draw) -> list[Node]:
    nodes = []
    for n in range(draw(st.integers(1, 3))):
        gpus = tuple(
            Gpu(i, draw(st.sampled_from(GPU_TYPES)), draw(st.sampled_from(GPU_MEMS)))
            for i in range(draw(st.integers(0, 4)))
        )
        nodes.append(Node(f"n{n}", cpus=draw(st.integers(1, 32)), mem_mb=draw(st.integers(0, 16)) * 8 * G, gpus=gpus))
    return nodes


@st.composite
def running_st(draw, nodes: list[Node]) -> list[Allocation]:
    """Allocations a previous pass could have made: within capacity, no GPU held twice."""
    running = []
    job_id = 1
    for node in nodes:
        free = [g.index for g in node.gpus]
        cpus, mem = node.cpus, node.mem_mb
        for _ in range(draw(st.integers(0, 2))):
            held = tuple(i for i in free if draw(st.booleans()))
            free = [i for i in free if i not in held]
            take_cpus = draw(st.integers(0, cpus // 2))
            take_mem = draw(st.integers(0, mem // G // 2)) * G
            cpus, mem = cpus - take_cpus, mem - take_mem
            running.append(Allocation(job_id, node.name, held, take_cpus, take_mem))
            job_id += 1
    return running


# Mostly small requests, so that a pass often starts several jobs; sometimes large or impossible ones.
request_st = st.builds(
    Request,
    gpus=st.one_of(st.integers(0, 2), st.integers(0, 5)),
    gpu_type=st.sampled_from([None, None, "A100", "h100", "B200"]),
    gpu_mem_mb=st.sampled_from([None, None, 40 * G, 80 * G, 100 * G]),
    cpus=st.one_of(st.integers(1, 4), st.integers(1, 40)),
    mem_mb=st.one_of(st.just(0), st.integers(0, 18).map(lambda n: n * 8 * G)),
)


@st.composite
def scenario_st(draw):
    nodes = draw(nodes_st())
    running = draw(running_st(nodes))
    requests = draw(st.lists(request_st, max_size=8))
    pending = [PendingJob(1000 + i, r) for i, r in enumerate(requests)]
    return nodes, running, pending


def fits_free(request: Request, node: Node, holders: list[Allocation]) -> bool:
    """Whether request fits what holders leave free on node (an independent recount)."""
    mine = [a for a in holders if a.node == node.name]
    held = {i for a in mine for i in a.gpu_ids}
    free_gpus = [g for g in node.gpus if g.index not in held and gpu_matches(g, request)]
    return (
        request.cpus <= node.cpus - sum(a.cpus for a in mine)
        and request.mem_mb <= node.mem_mb - sum(a.mem_mb for a in mine)
        and len(free_gpus) >= request.gpus
    )


PROPERTY = settings(max_examples=200, deadline=None)


@PROPERTY
@given(scenario_st())
def test_property_starts_never_exceed_capacity_or_share_a_gpu(scenario):
    nodes, running, pending = scenario
    decisions = run(nodes, running, pending)
    requests = {p.job_id: p.request for p in pending}
    for alloc in decisions.starts:
        request = requests[alloc.job_id]
        assert (alloc.cpus, alloc.mem_mb, len(alloc.gpu_ids)) == (request.cpus, request.mem_mb, request.gpus)
    for node in nodes:
        holders = [a for a in [*running, *decisions.starts] if a.node == node.name]
        gpu_ids = [i for a in holders for i in a.gpu_ids]
        assert len(gpu_ids) == len(set(gpu_ids)), "a GPU was allocated twice"
        assert set(gpu_ids) <= {g.index for g in node.gpus}
        assert sum(a.cpus for a in holders) <= node.cpus
        assert sum(a.mem_mb for a in holders) <= node.mem_mb
    assert {a.node for a in decisions.starts} <= {n.name for n in nodes}


@PROPERTY
@given(scenario_st())
def test_property_every_pending_job_either_starts_or_has_a_reason(scenario):
    nodes, running, pending = scenario
    decisions = run(nodes, running, pending)
    started_ids = [a.job_id for a in decisions.starts]
    assert len(started_ids) == len(set(started_ids))
    assert set(started_ids).isdisjoint(decisions.reasons)
    assert set(started_ids) | set(decisions.reasons) == {p.job_id for p in pending}
    assert PendingReason.NONE not in decisions.reasons.values()


@PROPERTY
@given(scenario_st())
def test_property_strict_order_nothing_overtakes_a_waiting_job(scenario):
    nodes, running, pending = scenario
    decisions = run(nodes, running, pending)
    starts = started(decisions)
    waiting = (PendingReason.RESOURCES, PendingReason.PRIORITY)
    blocked_at = next((k for k, p in enumerate(pending) if decisions.reasons.get(p.job_id) in waiting), None)
    if blocked_at is None:
        return
    head = pending[blocked_at]
    assert decisions.reasons[head.job_id] == PendingReason.RESOURCES
    for later in pending[blocked_at + 1:]:
        assert later.job_id not in starts
        # behind a waiting job: Priority, unless it could never run anywhere (that is said first)
        assert decisions.reasons[later.job_id] in (PendingReason.PRIORITY, PendingReason.BAD_CONSTRAINTS)
    # the head is only held back when it truly does not fit on what is left
    holders = [*running, *decisions.starts]
    assert not any(fits_free(head.request, node, holders) for node in nodes)


@PROPERTY
@given(scenario_st())
def test_property_starts_follow_submit_order(scenario):
    nodes, running, pending = scenario
    decisions = run(nodes, running, pending)
    order = {p.job_id: k for k, p in enumerate(pending)}
    positions = [order[a.job_id] for a in decisions.starts]
    assert positions == sorted(positions)


@PROPERTY
@given(scenario_st())
def test_property_bad_constraints_exactly_when_no_node_could_ever_fit(scenario):
    nodes, running, pending = scenario
    decisions = run(nodes, running, pending)
    for p in pending:
        reason = decisions.reasons.get(p.job_id)
        if reason == PendingReason.PRIORITY:
            continue  # behind a blocked job: not looked at
        try:
            check_satisfiable(p.request, nodes)
            satisfiable = True
        except Unsatisfiable:
            satisfiable = False
        assert (reason == PendingReason.BAD_CONSTRAINTS) == (not satisfiable)


@PROPERTY
@given(scenario_st())
def test_property_started_gpus_match_the_requested_type_and_memory(scenario):
    nodes, running, pending = scenario
    decisions = run(nodes, running, pending)
    gpus = {(n.name, g.index): g for n in nodes for g in n.gpus}
    requests = {p.job_id: p.request for p in pending}
    for alloc in decisions.starts:
        request = requests[alloc.job_id]
        for index in alloc.gpu_ids:
            gpu = gpus[(alloc.node, index)]
            if request.gpu_type is not None:
                assert gpu.type.lower() == request.gpu_type.lower()
            if request.gpu_mem_mb is not None:
                assert gpu.mem_mb >= request.gpu_mem_mb


@PROPERTY
@given(scenario_st())
def test_property_an_idle_queue_head_that_fits_starts(scenario):
    """Work conservation: if the first schedulable job fits on free resources, it starts."""
    nodes, running, pending = scenario
    decisions = run(nodes, running, pending)
    head = next((p for p in pending if decisions.reasons.get(p.job_id) != PendingReason.BAD_CONSTRAINTS), None)
    if head is not None and any(fits_free(head.request, node, list(running)) for node in nodes):
        assert head.job_id in started(decisions)


# -- limits (hold, partition time limit, QoS): held-back jobs wait for their own reason and block nobody --

_LIMITS = _Config(
    partitions={"debug": _Partition("debug", max_time_s=1800), "gpu": _Partition("gpu")}, default_partition="gpu",
    qos={"normal": _Qos("normal", max_running_per_user=1, max_gpus_per_user=2)}, default_qos="normal",
)
_NODE = Node("n1", cpus=16, mem_mb=64_000, gpus=tuple(Gpu(i, "A100", 81920) for i in range(4)))


def _job(job_id, gpus=1, user="ada", **kw):
    return PendingJob(job_id, Request(gpus=gpus), user=user, qos="normal", **kw)


def test_a_held_job_waits_as_held_and_the_next_one_starts():
    decisions = schedule([_NODE], [], [_job(1, held=True), _job(2)], 0.0, _LIMITS)
    assert decisions.reasons == {1: PendingReason.HELD}
    assert [a.job_id for a in decisions.starts] == [2]


def test_a_time_limit_over_the_partition_max_waits_with_partition_time_limit():
    jobs = [_job(1, partition="debug", time_limit_s=3600), _job(2, partition="debug", time_limit_s=600)]
    decisions = schedule([_NODE], [], jobs, 0.0, _LIMITS)
    assert decisions.reasons == {1: PendingReason.PARTITION_TIME_LIMIT}
    assert [a.job_id for a in decisions.starts] == [2]


def test_qos_limits_count_running_jobs_and_gpus_per_user():
    running = [Allocation(9, "n1", (0,), 1, 0, "ada", "normal")]
    decisions = schedule([_NODE], running, [_job(1), _job(2, user="bob", gpus=3), _job(3, user="bob")], 0.0, _LIMITS)
    assert decisions.reasons[1] == PendingReason.QOS_MAX_JOBS  # ada already runs one
    assert decisions.reasons[2] == PendingReason.QOS_MAX_GPUS  # 3 GPUs > 2
    assert [a.job_id for a in decisions.starts] == [3]


def test_jobs_started_in_a_pass_count_toward_the_limits():
    decisions = schedule([_NODE], [], [_job(1), _job(2)], 0.0, _LIMITS)
    assert [a.job_id for a in decisions.starts] == [1]
    assert decisions.reasons == {2: PendingReason.QOS_MAX_JOBS}


# -- preemption: the first job waiting for resources may stop lower-priority preemptible jobs --

from corral.core.scheduling.priority import PriorityFactors  # noqa: E402


def _factors(priority: int) -> PriorityFactors:
    return PriorityFactors(priority, 0.0, 0.0, 0.0, 0.0, 0.0, 0)


def test_a_waiting_job_preempts_the_lowest_priority_preemptible_jobs_it_needs():
    running = [
        Allocation(10, "n1", (0, 1), 1, 0, preemptible=True, priority=50),
        Allocation(11, "n1", (2,), 1, 0, preemptible=True, priority=10),
        Allocation(12, "n1", (3,), 1, 0, preemptible=False, priority=0),
    ]
    decisions = schedule([_NODE], running, [_job(1, gpus=2)], 0.0, _LIMITS, {1: _factors(100)})
    assert decisions.reasons[1] == PendingReason.RESOURCES
    assert decisions.preempt == [11, 10]  # lowest priority first, until 2 GPUs are free


def test_nothing_is_preempted_for_a_job_of_lower_priority_or_when_room_is_being_made():
    running = [Allocation(10, "n1", (0, 1, 2, 3), 1, 0, preemptible=True, priority=500)]
    assert schedule([_NODE], running, [_job(1, gpus=1)], 0.0, _LIMITS, {1: _factors(100)}).preempt == []
    leaving = [Allocation(10, "n1", (0, 1, 2, 3), 1, 0, preemptible=True, priority=5, preempting=True)]
    assert schedule([_NODE], leaving, [_job(1, gpus=1)], 0.0, _LIMITS, {1: _factors(100)}).preempt == []
    fixed = [Allocation(10, "n1", (0, 1, 2, 3), 1, 0, preemptible=False, priority=5)]
    assert schedule([_NODE], fixed, [_job(1, gpus=1)], 0.0, _LIMITS, {1: _factors(100)}).preempt == []


def test_a_job_started_in_the_same_pass_is_never_a_victim():
    # the preemptible job starts first (listed first); the next job cannot fit and must not pick it
    pending = [_job(1, gpus=2, preemptible=True), _job(2, gpus=4)]
    decisions = schedule([_NODE], [], pending, 0.0, _LIMITS_OPEN, {1: _factors(1), 2: _factors(100)})
    assert [a.job_id for a in decisions.starts] == [1]
    assert decisions.preempt == []


def test_while_room_is_made_for_a_job_nothing_behind_it_takes_the_room():
    running = [Allocation(10, "n1", (0, 1), 1, 0, preemptible=True, priority=5)]
    decisions = schedule([_NODE], running, [_job(1, gpus=4, time_limit_s=60), _job(2, gpus=1, time_limit_s=10)],
                         0.0, _LIMITS_OPEN, {1: _factors(100), 2: _factors(1)})
    assert decisions.preempt == [10]
    assert decisions.starts == []  # job 2 would fit now on GPUs 2-3, but they are job 1's
    assert decisions.reasons[2] == PendingReason.PRIORITY


_LIMITS_OPEN = _Config()
