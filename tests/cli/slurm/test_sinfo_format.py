"""`sinfo` against the real Slurm 22.05.8's output (tests/cli/slurm/golden/), from the same node and partitions."""

from __future__ import annotations

from typing import Any

import pytest

from corral.cli.slurm.sinfo_format import parse_format, sinfo
from corral.cli.slurm.values import parse_iso
from tests.cli.slurm.goldens import golden

pytestmark = pytest.mark.usefixtures("testbed_clock")

PARTS = [{"name": "debug", "default": True}, {"name": "gpu"}]
WHEN = parse_iso("2026-11-24T23:35:55Z") or 0.0  # the -l golden files' date line


def node(name: str = "vm", alloc: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "arch": "X86_64", "cpus": 2, "cpus_alloc": alloc, "mem_mb": 21695,
            "mem_alloc_mb": 1024 * alloc, "gpus": [{"index": i, "type": None} for i in range(4)], **extra}


def test_default_is_slurms() -> None:
    assert sinfo([node()], PARTS, now=WHEN) == golden("sinfo.txt")


def test_no_header() -> None:
    assert sinfo([node()], PARTS, now=WHEN, no_header=True) == golden("sinfo_h.txt")


def test_node_long_is_slurms() -> None:
    assert sinfo([node()], PARTS, now=WHEN, node_oriented=True, long=True) == golden("sinfo_N_l.txt")


def test_node_oriented_is_slurms() -> None:
    assert sinfo([node(alloc=2)], PARTS, now=WHEN, node_oriented=True) == golden("sinfo_N.txt")


def test_long_is_slurms() -> None:
    # taken a moment after the others, when both CPUs were busy
    ours = sinfo([node(alloc=2)], PARTS, now=parse_iso("2026-11-24T23:36:38Z") or 0.0, long=True)
    assert ours == golden("sinfo_l.txt")


def test_summarize_is_slurms() -> None:
    assert sinfo([node()], PARTS, now=WHEN, summarize=True) == golden("sinfo_s.txt")


def test_format_codes_are_slurms() -> None:
    fmt = "%P %a %l %D %t %T %N %c %m %G %C %f %E %R"
    assert sinfo([node()], PARTS, now=WHEN, fmt=fmt) == golden("sinfo_o.txt")


def test_format_widths_and_prefix() -> None:
    text = sinfo([node()], PARTS, now=WHEN, fmt="%20P %5a %.10l %N")
    assert text.split("\n")[1] == "debug*               up      infinite vm"
    assert parse_format("X%.5D|%N") == ("X", [("D", 5, True, "|"), ("N", 0, False, "")])


def test_rows_group_nodes_by_state_and_compress_names() -> None:
    nodes = [node("n1", 0), node("n2", 0), node("n3", 2), node("n4", 1), node("n5", 0, state="drain", reason="fan"),
             node("n6", 0, state="down")]
    lines = sinfo(nodes, [{"name": "debug", "default": True, "max_time_s": 3600}], now=WHEN).split("\n")
    assert lines[1:-1] == [  # Slurm's order: its state numbers, the drain flag highest, descending
        "debug*       up    1:00:00      1  drain n5",
        "debug*       up    1:00:00      1    mix n4",
        "debug*       up    1:00:00      1  alloc n3",
        "debug*       up    1:00:00      2   idle n[1-2]",
        "debug*       up    1:00:00      1   down n6",
    ]
    summary = sinfo(nodes, [{"name": "debug"}], now=WHEN, summarize=True).split("\n")[1]
    assert summary.split()[3] == "2/2/2/6"
    cpus = sinfo(nodes, [{"name": "debug"}], now=WHEN, fmt="%C").split("\n")[1]
    assert cpus == "3/5/4/12"


def test_long_partition_names_widen_the_column_and_values_are_cut() -> None:
    parts = [{"name": "averyverylongname", "default": True}]
    lines = sinfo([node()], parts, now=WHEN).split("\n")
    assert lines[0].startswith("PARTITION          AVAIL")
    assert lines[1].startswith("averyverylongname*    up")
    cut = sinfo([node()], parts, now=WHEN, fmt="%.5P|%5R|").split("\n")[1]
    assert cut == "aver*|avery|"  # Slurm keeps the default's `*` in the last column it has
