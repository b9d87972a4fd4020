"""The machine's inventory: NVML names, declared GPUs, CPUs and memory."""

from __future__ import annotations

import json

import pytest

from corral.errors import InvalidRequest
from corral.core.scheduling.resources import DeclaredInventory
from corral.executor.gpus import build_node, detected_facts, gpus_from_raw, machine_memory_mb, short_gpu_type


@pytest.mark.parametrize("nvml_name, short", [
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100-PCIE-40GB", "A100"),
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ("Tesla V100-SXM2-32GB", "V100"),
    ("NVIDIA L40S", "L40S"),
])
def test_nvml_names_become_the_short_types_people_ask_for(nvml_name, short):
    assert short_gpu_type(nvml_name) == short


def test_declared_gpus_replace_detection():
    node = build_node(DeclaredInventory(gpus=4, gpu_type="A100", gpu_mem="80G", cpus=16, mem="256G"))
    assert [g.index for g in node.gpus] == [0, 1, 2, 3]
    assert {(g.type, g.mem_mb) for g in node.gpus} == {("A100", 80 * 1024)}
    assert (node.cpus, node.mem_mb) == (16, 256 * 1024)


def test_cpus_and_memory_are_counted_from_the_machine():
    node = build_node(DeclaredInventory(gpus=0))
    assert node.cpus >= 1
    assert node.mem_mb == machine_memory_mb() > 0


@pytest.mark.parametrize("declared, field", [
    (DeclaredInventory(gpus=-1), "gpus"),
    (DeclaredInventory(gpu_type="A100"), "gpu_type"),
    (DeclaredInventory(gpus=2, gpu_mem="lots"), "gpu_mem"),
    (DeclaredInventory(gpus=1, cpus=0), "cpus"),
])
def test_nonsense_declarations_are_refused_by_name(declared, field):
    with pytest.raises(InvalidRequest) as info:
        build_node(declared)
    assert info.value.field == field


@pytest.mark.parametrize("gpu_type, capability", [
    ("A100", 8.0), ("a100-80g", 8.0), ("H100", 9.0), ("h200", 9.0), ("V100", 7.0), ("T4", 7.5), ("A10", 8.6),
    ("L40S", 8.9), ("RTX-3090", 8.6), ("RTX 4090", 8.9), ("rtx-a6000", 8.6), ("B200", 10.0), ("GPU", None),
])
def test_declared_gpus_get_the_compute_capability_of_their_type(gpu_type, capability):
    node = build_node(DeclaredInventory(gpus=1, gpu_type=gpu_type))
    assert node.gpus[0].capability == capability


def test_declared_gpus_may_mix_types_in_index_order():
    node = build_node(DeclaredInventory(gpus=4, gpu_type="T4:2,A100:2"))
    assert [(g.type, g.capability) for g in node.gpus] == [("T4", 7.5), ("T4", 7.5), ("A100", 8.0), ("A100", 8.0)]
    with pytest.raises(InvalidRequest, match="lists 3 GPUs, but 4 are declared"):
        build_node(DeclaredInventory(gpus=4, gpu_type="T4:2,A100"))


def test_the_node_names_its_arch_as_htcondor_does():
    from corral.executor.gpus import condor_arch

    assert (condor_arch("x86_64"), condor_arch("aarch64"), condor_arch("arm64")) == ("X86_64", "aarch64", "aarch64")


def test_a_replayed_first_frame_is_the_machines_gpus(tmp_path):
    # What `python -m corral.monitor.nvml --record` writes first: NVML's facts beside the first readings.
    frame = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{i}", "minor": 7 - i, "capability": [9, 0],
              "memory": {"total": 85520809984, "used": 0, "free": 85520809984}, "processes": []} for i in range(2)]
    replay = tmp_path / "frames.jsonl"
    replay.write_text(json.dumps(frame) + "\n" + json.dumps([{"index": 0}, {"index": 1}]) + "\n")
    gpus = gpus_from_raw(detected_facts({"CORRAL_GPU_REPLAY": str(replay)}))
    assert [(g.index, g.type, g.mem_mb, g.uuid, g.minor, g.capability, g.device_name) for g in gpus] == [
        (0, "H100", 81559, "GPU-0", 7, 9.0, "NVIDIA H100 80GB HBM3"),
        (1, "H100", 81559, "GPU-1", 6, 9.0, "NVIDIA H100 80GB HBM3"),
    ]


def test_a_frame_recorded_without_facts_still_gives_the_gpus(tmp_path):
    replay = tmp_path / "frames.jsonl"
    replay.write_text(json.dumps([{"index": 0, "memory": {"total": 1024 ** 3}}]) + "\n")
    (gpu,) = gpus_from_raw(detected_facts({"CORRAL_GPU_REPLAY": str(replay)}))
    assert (gpu.type, gpu.mem_mb, gpu.capability) == ("GPU", 1024, None)


@pytest.mark.parametrize("text", ["", "not json\n", '{"index": 0}\n', '[{"index": "0"}]\n'])
def test_an_unreadable_replay_names_the_variable(tmp_path, text):
    replay = tmp_path / "frames.jsonl"
    replay.write_text(text)
    with pytest.raises(InvalidRequest) as caught:
        gpus_from_raw(detected_facts({"CORRAL_GPU_REPLAY": str(replay)}))
    assert caught.value.field == "CORRAL_GPU_REPLAY"


def test_gpu_types_are_the_nodes_features_and_a_mig_slice_counts_as_the_gpu_it_is_cut_from():
    from corral.core.scheduling.resources import DeclaredInventory, Gpu
    from corral.executor.gpus import type_features

    whole = Gpu(0, "A100", 81920, device_name="NVIDIA A100-SXM4-80GB")
    cut = Gpu(1, "3g.40gb", 40192, device_name="NVIDIA A100-SXM4-80GB MIG 3g.40gb", parent=1)
    assert type_features([whole, cut], DeclaredInventory(features=("ib",))) == (("ib", "a100"), {})
    # the admin's own spelling of it stays theirs, not named twice
    assert type_features([whole, cut], DeclaredInventory(features=("A100",))) == (("A100",), {})
    # several types: each is its GPUs' feature, so that a constraint picks them
    t4 = Gpu(2, "T4", 16384)
    assert type_features([whole, t4], DeclaredInventory()) == ((), {"a100": frozenset({0}), "t4": frozenset({2})})
    assert type_features([Gpu(0, "GPU", 0)], DeclaredInventory()) == ((), {})  # an unknown type names nothing
