"""How the machine's GPUs are linked: recorded from NVML into the raw facts, read back from a replayed frame,
or declared in config.toml ([node] nvlink, [node] gpu_features)."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from corral.compose.config import ServerOptions, load_config
from corral.core.scheduling.resources import DeclaredInventory
from corral.errors import InvalidRequest
from corral.executor.gpu_topology import add_topology
from corral.executor.gpus import build_node, detected_facts, gpus_from_raw

GIB = 1 << 30
CLIQUES = (range(4), range(4, 8))


def _ancestor(a: int, b: int) -> str:
    """An HGX-like board: a PCIe switch for each two GPUs, a socket for each four."""
    if a // 2 == b // 2:
        return "SINGLE"
    return "NODE" if a // 4 == b // 4 else "SYSTEM"


def hgx_frame(processes: dict[int, list[dict[str, int]]] | None = None) -> list[dict[str, Any]]:
    """The first frame `python -m corral.monitor.nvml --record` writes on an 8-GPU machine with two NVLink
    groups (0-3, 4-7): NVML's facts, their topology, and readings."""
    return [{"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{i}", "minor": i, "capability": [9, 0],
             "memory": {"total": 80 * GIB, "used": 0, "free": 80 * GIB}, "utilization": {"gpu": 0, "memory": 0},
             "power_mw": 70000, "temperature_c": 30, "processes": (processes or {}).get(i, []),
             "topology": {"nvlink": [j for j in range(8) if j != i and j // 4 == i // 4],
                          "common_ancestor": {str(j): _ancestor(i, j) for j in range(8) if j != i}}}
            for i in range(8)]


def write_hgx_replay(path: Path) -> Path:
    path.write_text(json.dumps(hgx_frame()) + "\n")
    return path


class FakeNvml(SimpleNamespace):
    """The pynvml calls add_topology makes, answering as NVML does on the HGX-like board above."""

    NVML_P2P_CAPS_INDEX_NVLINK = 2
    NVML_P2P_STATUS_OK = 0

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return {"SINGLE": 10, "NODE": 40, "SYSTEM": 50}[_ancestor(a, b)]

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: int) -> int:
        assert index == self.NVML_P2P_CAPS_INDEX_NVLINK
        return 0 if a // 4 == b // 4 else 4  # NVML_P2P_STATUS_NOT_SUPPORTED across the groups


def test_the_recorder_writes_each_gpus_nvlink_peers_and_common_ancestors_as_nvml_names_them():
    facts: list[dict[str, Any]] = [{"index": i} for i in range(8)]
    add_topology(FakeNvml(), facts)
    assert facts == [{"index": raw["index"], "topology": raw["topology"]} for raw in hgx_frame()]


def test_a_replayed_frame_with_topology_gives_the_node_its_nvlink_groups_and_pcie_levels(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_GPU_REPLAY", str(write_hgx_replay(tmp_path / "frames.jsonl")))
    node = build_node(DeclaredInventory())
    assert node.topology is not None
    assert [node.topology.nvlink_group(i) for i in (0, 7)] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert [node.topology.level(0, j) for j in range(1, 8)] == ["NV"] * 3 + ["SYS"] * 4
    assert node.topology.matrix([0, 1, 4])[0] == ["X", "NV", "SYS"]


def test_a_frame_without_topology_leaves_the_choice_as_before(tmp_path, monkeypatch):
    frame = [{k: v for k, v in raw.items() if k != "topology"} for raw in hgx_frame()]
    (tmp_path / "frames.jsonl").write_text(json.dumps(frame) + "\n")
    monkeypatch.setenv("CORRAL_GPU_REPLAY", str(tmp_path / "frames.jsonl"))
    assert build_node(DeclaredInventory()).topology is None
    assert len(gpus_from_raw(detected_facts())) == 8


def test_declared_nvlink_groups_and_gpu_features():
    node = build_node(DeclaredInventory(gpus=8, nvlink=("0-3", "4-7"), gpu_features=(("fast", "4-7"),),
                                        features=("ib",)))
    assert node.topology is not None
    assert node.topology.nvlink_group(5) == (4, 5, 6, 7)
    assert all(node.topology.level(a, b) == "NV" for q in CLIQUES for a, b in combinations(q, 2))
    assert node.topology.level(0, 4) == "SYS"
    assert node.topology.features_of(5) == ["nvlink", "fast"]
    assert node.topology.names == {"nvlink", "fast"}
    assert build_node(DeclaredInventory(gpus=8)).topology is None


@pytest.mark.parametrize("declared, field, words", [
    (DeclaredInventory(gpus=8, nvlink=("0-3", "3-7")), "node.nvlink", "GPU 3 is in both"),
    (DeclaredInventory(gpus=4, nvlink=("0-7",)), "node.nvlink", "GPU 4, which this node does not have"),
    (DeclaredInventory(gpus=4, nvlink=("0..3",)), "node.nvlink", "cannot read '0..3'"),
    (DeclaredInventory(gpus=4, gpu_features=(("fast", "5"),)), "node.gpu_features.fast", "GPU 5"),
    (DeclaredInventory(gpus=4, features=("fast",), gpu_features=(("fast", "0"),)), "node.gpu_features",
     "also a node feature"),
])
def test_nonsense_topology_declarations_are_refused_by_setting(declared, field, words):
    with pytest.raises(InvalidRequest) as caught:
        build_node(declared)
    assert caught.value.field == field and words in caught.value.message


def test_config_toml_declares_nvlink_groups_and_gpu_features(tmp_path):
    (tmp_path / "config.toml").write_text('[node]\ngpus = 8\nnvlink = ["0-3", "4-7"]\n'
                                          'gpu_features = {fast = "4-7", bigmem = "0,1"}\n')
    inventory = load_config(ServerOptions(home=str(tmp_path)), set()).inventory
    assert inventory.nvlink == ("0-3", "4-7")
    assert inventory.gpu_features == (("bigmem", "0,1"), ("fast", "4-7"))


@pytest.mark.parametrize("text, field", [
    ('nvlink = "0-3"', "node.nvlink"),
    ("nvlink = [0, 1]", "node.nvlink"),
    ('gpu_features = {fast = 3}', "node.gpu_features"),
    ('gpu_features = {"no spaces" = "0"}', "node.gpu_features"),
    ('gpu_features = ["fast"]', "node.gpu_features"),
])
def test_config_toml_topology_of_the_wrong_shape_is_refused_by_setting(tmp_path, text, field):
    (tmp_path / "config.toml").write_text(f"[node]\n{text}\n")
    with pytest.raises(InvalidRequest) as caught:
        load_config(ServerOptions(home=str(tmp_path)), set())
    assert caught.value.field == field
    assert "e.g." in str(caught.value) or "wrong type" in str(caught.value)
