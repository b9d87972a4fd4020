"""Asking for MIG slices by profile, as Slurm's gres types name them: `--gres=gpu:1g.10gb:1`, `-G 3g.40gb:2`."""

from __future__ import annotations

import pytest

from corral.core.scheduling.resources import Gpu, Node, check_satisfiable

from corral.core.jobspec.request import Request
from corral.core.jobspec.spec_resources import parse_gpus
from corral.errors import InvalidRequest, Unsatisfiable

NODE = Node(name="n1", cpus=16, mem_mb=64000, gpus=(
    Gpu(index=1, type="A100", mem_mb=81920, uuid="GPU-b", capability=8.0),
    Gpu(index=2, type="3g.40gb", mem_mb=40960, uuid="MIG-a", minor=0, capability=8.0, parent=0),
    Gpu(index=3, type="1g.10gb", mem_mb=10240, uuid="MIG-b", minor=0, capability=8.0, parent=0),
    Gpu(index=4, type="1g.10gb", mem_mb=10240, uuid="MIG-c", minor=0, capability=8.0, parent=0),
))


@pytest.mark.parametrize("fields, wanted", [
    ({"gres": "gpu:1g.10gb:1"}, ("1g.10gb", 1)),
    ({"gres": "gpu:1g.10gb"}, ("1g.10gb", 1)),
    ({"gpus": "3g.40gb:2"}, ("3g.40gb", 2)),
    ({"gpus": "1g.10gb"}, ("1g.10gb", 1)),
    ({"gpus": 1, "gpu_type": "1g.10gb"}, ("1g.10gb", 1)),
])
def test_a_profile_is_a_gpu_type(fields, wanted):
    assert parse_gpus(fields) == wanted


@pytest.mark.parametrize("text", ["2.5", "-1", "1g 10gb"])
def test_a_bad_count_is_still_refused(text):
    with pytest.raises(InvalidRequest) as caught:
        parse_gpus({"gpus": text})
    assert caught.value.field in ("gpus", "gpu_type")


def test_slices_of_a_profile_are_matched_and_two_of_the_only_one_are_refused_naming_the_profiles_here():
    check_satisfiable(Request(gpus=2, gpu_type="1g.10gb"), [NODE])
    check_satisfiable(Request(gpus=1, gpu_type="3G.40GB"), [NODE])  # types compare as Slurm's: case apart
    with pytest.raises(Unsatisfiable) as caught:
        check_satisfiable(Request(gpus=2, gpu_type="3g.40gb"), [NODE])
    assert str(caught.value) == (
        "gpus: requested 2 GPUs of 3g.40gb; the most any node has is 1 (GPUs here: 1g.10gb (MIG slice, 10G, "
        "capability 8.0), 3g.40gb (MIG slice, 40G, capability 8.0), A100 (80G, capability 8.0))")


def test_draining_a_gpu_in_mig_mode_drains_its_slices():
    from corral.core.scheduling.drains import gpus_named

    assert gpus_named([NODE], "n1", [0]) == (NODE, (2, 3, 4))  # GPU 0, as NVML and an XID name it
    assert gpus_named([NODE], "n1", [3, 1]) == (NODE, (3, 1))
    with pytest.raises(InvalidRequest) as caught:
        gpus_named([NODE], "n1", [7])
    assert caught.value.hint == "its GPUs are 1, 2, 3, 4"
