"""check_satisfiable: a request no node could ever run is refused at submit, saying why."""

from __future__ import annotations

import pytest

from corral.core.scheduling.resources import Gpu, Node, check_satisfiable, gpu_matches

from corral.core.jobspec.request import Request
from corral.errors import InvalidRequest, Unsatisfiable


def gpus(n: int, type_: str = "A100", mem_mb: int = 80 * 1024) -> tuple[Gpu, ...]:
    return tuple(Gpu(i, type_, mem_mb) for i in range(n))


DGX = Node("dgx", cpus=128, mem_mb=1024 * 1024, gpus=gpus(8))
SMALL = Node("small", cpus=16, mem_mb=64 * 1024, gpus=(Gpu(0, "V100", 16 * 1024), Gpu(1, "A100", 40 * 1024)))
CPU_ONLY = Node("cpu", cpus=256, mem_mb=2048 * 1024)


def refusal(request: Request, nodes) -> Unsatisfiable:
    with pytest.raises(Unsatisfiable) as err:
        check_satisfiable(request, nodes)
    return err.value


@pytest.mark.parametrize(
    "request_",
    [
        Request(),
        Request(gpus=8, cpus=128, mem_mb=1024 * 1024),  # exactly a whole node
        Request(gpus=1, gpu_type="V100"),
        Request(gpus=1, gpu_type="v100"),  # types compare case-insensitively
        Request(gpus=2, gpu_mem_mb=40 * 1024),
        Request(gpus=1, gpu_type="A100", gpu_mem_mb=80 * 1024),
        Request(cpus=200, mem_mb=1500 * 1024),  # only the CPU node fits, and it does
    ],
)
def test_check_satisfiable_accepts_a_request_some_node_fits(request_):
    check_satisfiable(request_, [DGX, SMALL, CPU_ONLY])


def test_too_many_gpus_says_how_many_the_largest_node_has():
    err = refusal(Request(gpus=9), [DGX, SMALL])
    assert err.field == "gpus"
    assert err.message == "gpus: requested 9 GPUs; the largest node has 8"


def test_unknown_gpu_type_lists_the_types_there_are():
    err = refusal(Request(gpus=1, gpu_type="H100"), [DGX, SMALL])
    assert err.field == "gpus"
    assert "H100" in err.message
    assert "A100 (80G)" in err.message
    assert "A100 (40G)" in err.message
    assert "V100 (16G)" in err.message


def test_too_many_gpus_of_a_type_says_the_most_any_node_has():
    err = refusal(Request(gpus=2, gpu_type="V100"), [DGX, SMALL])
    assert "requested 2 GPUs of V100; the most any node has is 1" in err.message


def test_gpu_memory_too_small_everywhere_is_refused():
    err = refusal(Request(gpus=1, gpu_mem_mb=100 * 1024), [DGX, SMALL])
    assert err.field == "gpus"
    assert "at least 100G" in err.message
    assert "the most any node has is 0" in err.message


def test_type_and_memory_must_hold_on_the_same_gpu():
    # SMALL has an A100 (40G) and a V100 (16G): no 40G V100
    err = refusal(Request(gpus=1, gpu_type="V100", gpu_mem_mb=40 * 1024), [SMALL])
    assert "V100 with at least 40G" in err.message


def test_gpus_on_a_machine_without_gpus_are_refused():
    err = refusal(Request(gpus=1), [CPU_ONLY])
    assert err.message == "gpus: requested 1 GPU; the largest node has 0"


def test_too_many_cpus_says_how_many_the_largest_node_has():
    err = refusal(Request(cpus=129), [DGX, SMALL])
    assert err.field == "cpus"
    assert err.message == "cpus: requested 129 CPUs; the largest node has 128"


def test_too_much_memory_says_how_much_the_largest_node_has():
    err = refusal(Request(mem_mb=2 * 1024 * 1024), [DGX, SMALL])
    assert err.field == "mem"
    assert err.message == "mem: requested 2T of memory; the largest node has 1T"


def test_resources_split_across_nodes_are_refused():
    # 8 GPUs on the DGX and 200 CPUs on the CPU node, but no node has both
    err = refusal(Request(gpus=8, cpus=200), [DGX, CPU_ONLY])
    assert "no single node" in err.message


def test_no_nodes_at_all_is_refused():
    err = refusal(Request(), [])
    assert "no nodes" in err.message


def test_unsatisfiable_is_an_invalid_request():
    # the API and CLI report it like any other bad field
    err = refusal(Request(gpus=9), [DGX])
    assert isinstance(err, InvalidRequest)
    assert err.to_dict()["code"] == "unsatisfiable"


@pytest.mark.parametrize(
    ("gpu", "request_", "matches"),
    [
        (Gpu(0, "A100", 80 * 1024), Request(gpus=1), True),
        (Gpu(0, "A100", 80 * 1024), Request(gpus=1, gpu_type="a100"), True),
        (Gpu(0, "A100", 80 * 1024), Request(gpus=1, gpu_type="H100"), False),
        (Gpu(0, "A100", 80 * 1024), Request(gpus=1, gpu_mem_mb=80 * 1024), True),
        (Gpu(0, "A100", 40 * 1024), Request(gpus=1, gpu_mem_mb=80 * 1024), False),
    ],
)
def test_gpu_matches_checks_type_and_memory(gpu, request_, matches):
    assert gpu_matches(gpu, request_) is matches
