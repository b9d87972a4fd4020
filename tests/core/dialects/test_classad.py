"""The ClassAd evaluator for HTCondor requirements: the forms submit files use, ClassAd semantics, and a
refusal that names the part it cannot evaluate."""

from __future__ import annotations

import pytest

from corral.core.dialects import classad
from corral.core.scheduling.resources import Gpu, Node, check_satisfiable, gpu_matches, machine, node_matches
from corral.core.jobspec.request import Request
from corral.errors import InvalidRequest, Unsatisfiable

T4 = Gpu(0, "T4", 15360, capability=7.5)
A100 = Gpu(1, "A100", 81920, capability=8.0, device_name="NVIDIA A100-SXM4-80GB")
NODE = Node("gpu01", 32, 256_000, (T4, A100), arch="X86_64")


def holds(text: str, gpu: Gpu | None = A100, node: Node = NODE) -> bool:
    return classad.holds(classad.parse(text), machine(node, gpu))


@pytest.mark.parametrize(("text", "on_a100", "on_t4"), [
    ("CUDACapability >= 8.0", True, False),
    ("(TARGET.CUDACapability > 7.5)", True, False),
    ("Capability >= 7.0 && GlobalMemoryMb >= 40000", True, False),
    ("CUDAGlobalMemoryMb >= 16 * 1024", True, False),
    ('CUDADeviceName == "nvidia a100-sxm4-80gb"', True, False),  # == ignores case
    ('CUDADeviceName =?= "nvidia a100-sxm4-80gb"', False, False),  # =?= does not
    ('DeviceName == "T4"', False, True),
    ("!(CUDACapability < 8)", True, False),
    ("CUDACapability == 7.5 || CUDACapability == 8.0", True, True),
    ('OpSys == "LINUX" && Arch == "X86_64" && CUDACapability >= 7.0', True, True),
    ("CUDACapability =!= undefined", True, True),
    ("true", True, True),
])
def test_expressions_are_evaluated_per_gpu(text, on_a100, on_t4):
    assert (holds(text, A100), holds(text, T4)) == (on_a100, on_t4)


def test_an_undefined_property_makes_a_comparison_undefined_so_the_requirement_fails():
    unknown = Gpu(0, "GPU", 1000)  # a declared type the table does not know: no capability
    assert not holds("CUDACapability >= 7.0", unknown)
    assert not holds("!(CUDACapability >= 7.0)", unknown)
    assert holds("CUDACapability >= 7.0 || true", unknown)
    assert not holds("false && CUDACapability", unknown) and holds("CUDACapability is undefined", unknown)


@pytest.mark.parametrize(("text", "part"), [
    ('regexp("A100", CUDADeviceName)', 'regexp("A100", CUDADeviceName)'),
    ("(CUDACapability >= 7.0) && (HasCHTCStaging == true)", "HasCHTCStaging"),
    ("MY.RequestGpus > 1", "MY.RequestGpus"),
    ("OpSysMajorVer == 9", "OpSysMajorVer"),
    ("(CUDACapability >= 7.0", "(CUDACapability >= 7.0"),
    ("7 < CUDACapability < 9", "7 < CUDACapability <"),
    ("CUDACapability >= 7.0 ; rm", "; rm"),
])
def test_what_cannot_be_evaluated_is_refused_naming_the_sub_expression(text, part):
    with pytest.raises(InvalidRequest) as err:
        classad.parse(text)
    assert err.value.field == "requirements" and repr(part) in str(err.value)


@pytest.mark.parametrize("text", ["(" * 3000 + "true" + ")" * 3000, "!" * 3000 + "true", "-" * 3000 + "1 > 0",
                                  "true && " * 600 + "true", "1&&" * 1300 + "1", "1+" * 1900 + "1"])
def test_deep_or_long_expressions_are_refused_not_a_crash(text):
    with pytest.raises(InvalidRequest):
        classad.parse(text)
    classad.parse("(" * 20 + "CUDACapability >= 8" + ")" * 20)


def test_requirements_choose_gpus_and_nodes():
    wants_a100 = Request(gpus=1, requirements="CUDACapability >= 8.0")
    assert [gpu_matches(g, wants_a100, NODE) for g in NODE.gpus] == [False, True]
    arm = Request(requirements='Arch == "aarch64"')
    assert not node_matches(NODE, arm) and node_matches(Node("arm", 4, 1000, arch="aarch64"), arm)


def test_a_request_no_gpu_satisfies_is_refused_naming_the_part_and_the_gpus_here():
    with pytest.raises(Unsatisfiable) as err:
        check_satisfiable(Request(gpus=1, requirements='(OpSys == "LINUX") && (CUDACapability >= 9.0)'), [NODE])
    message = str(err.value)
    assert "no GPU here satisfies CUDACapability >= 9.0" in message
    assert "A100 (80G, capability 8.0)" in message and "T4" in message
    check_satisfiable(Request(gpus=1, requirements="CUDACapability >= 8.0"), [NODE])
    with pytest.raises(Unsatisfiable, match="meeting the requirements .* the most any node has is 1"):
        check_satisfiable(Request(gpus=2, requirements="CUDACapability >= 8.0"), [NODE])
