"""`sinfo` in Slurm 22.05's columns, from corral's nodes and partitions.

- `sinfo(nodes, partitions, now=, default=, node_oriented=, long=, summarize=, fmt=, no_header=)`: the text
  `sinfo [-N] [-l] [-s] [-o FORMAT] [-h]` prints: the default `PARTITION AVAIL TIMELIMIT NODES STATE NODELIST`
  (the default partition marked `*`), `-l` (JOB_SIZE ROOT OVERSUBS GROUPS, long state names), `-N` one row
  per node and partition, `-N -l`, `-s` (`NODES(A/I/O/T)`), `-o` with its `%` codes, `-h` without the header.
  Long forms begin with the date line, as Slurm's.
- `parse_format(fmt)`: a `-o` string as (prefix, fields), each field (code, width, right-justified, suffix).
- `FIELDS`: the `%` codes understood, with their headers.

Rows are what Slurm prints: the nodes of a partition are grouped by every value the format shows (so
without a state column, a partition is one row), the node list is compressed (`node[1-3,5]`), and
rows are ordered by partition (the order given), then by state as Slurm sorts (`-t`: mixed, allocated,
idle, down); with `-N`, by node name. Widths, right justification (`%.N`) and truncation are Slurm's:
a value longer than its column is cut to the column's width.

Inputs: nodes as `GET /api/v1/nodes` answers (see `scontrol_format`), partitions as dicts of corral's
partition settings (name, max_time_s, allowed_groups; optional `default`, `nodes`).
"""

from __future__ import annotations

import time

from corral.cli.slurm.hostlist import compress_hostlist
from corral.cli.slurm.scontrol_format import gres, node_state, partition_nodes
from corral.cli.slurm.values import duration, local_time, parse_iso, percent_fields

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    Node = Mapping[str, Any]
    Partition = Mapping[str, Any]
    Field = tuple[str, int, bool, str]

DEFAULT_FORMAT = "%9P %.5a %.10l %.6D %.6t %N"
LONG_FORMAT = "%9P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
SUMMARIZE_FORMAT = "%9P %.5a %.10l %.16F %N"
NODE_FORMAT = "%N %.6D %.9P %6t"
NODE_LONG_FORMAT = "%N %.6D %.9P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"
REASONS_FORMAT = "%20E %9u %19H %N"  # -R
MIN_FIELD_SIZE = 9  # Slurm's MIN_NODE_FIELD_SIZE and MIN_PART_FIELD_SIZE

FIELDS = {
    "P": "PARTITION", "R": "PARTITION", "a": "AVAIL", "l": "TIMELIMIT", "D": "NODES", "t": "STATE",
    "T": "STATE", "N": "NODELIST", "n": "HOSTNAMES", "o": "NODE_ADDR", "c": "CPUS", "m": "MEMORY",
    "G": "GRES", "C": "CPUS(A/I/O/T)", "F": "NODES(A/I/O/T)", "A": "NODES(A/I)", "f": "AVAIL_FEATURES",
    "b": "ACTIVE_FEATURES", "E": "REASON", "z": "S:C:T", "d": "TMP_DISK", "w": "WEIGHT", "s": "JOB_SIZE",
    "r": "ROOT", "h": "OVERSUBSCRIBE", "g": "GROUPS", "e": "FREE_MEM", "O": "CPU_LOAD", "X": "SOCKETS",
    "Y": "CORES", "Z": "THREADS", "V": "CLUSTER", "u": "USER", "H": "TIMESTAMP",
}
# Counted or listed over a row's nodes; every other field's value is the same across a row
_AGGREGATES = frozenset("DNnoCFA")
_COMPACT = {"IDLE": "idle", "MIXED": "mix", "ALLOCATED": "alloc", "DRAINED": "drain", "DRAINING": "drng",
            "DOWN": "down"}
# Slurm's node-state numbers, its `-t` sort key (reversed): MIXED 5, ALLOCATED 3, IDLE 2, DOWN 1, and
# the DRAIN flag (0x200) added to the base state, so drained and draining rows come first
_STATE_RANK = {"DRAINING": 0x203, "DRAINED": 0x202, "MIXED": 5, "ALLOCATED": 3, "IDLE": 2, "DOWN": 1}


def parse_format(fmt: str) -> tuple[str, list[Field]]:
    """`%[.][width]code[suffix]` fields, as Slurm's `_parse_format` reads them; text before the first `%`
    is a prefix printed at the start of each line."""
    prefix, _, rest = fmt.partition("%")
    if "%" not in fmt:
        return fmt, []
    return prefix, percent_fields("%" + rest)


def sinfo(nodes: Sequence[Node], partitions: Sequence[Partition], *, now: float, default: str | None = None,
          node_oriented: bool = False, long: bool = False, summarize: bool = False, fmt: str | None = None,
          no_header: bool = False) -> str:
    """What `sinfo` prints for these nodes and partitions (see the module's docstring).

    `default` names the default partition (else a partition's own `default` key says).
    """
    sized = fmt is None
    if fmt is None:
        if summarize:
            fmt = SUMMARIZE_FORMAT
        elif node_oriented:
            fmt = NODE_LONG_FORMAT if long else NODE_FORMAT
        else:
            fmt = LONG_FORMAT if long else DEFAULT_FORMAT
    prefix, fields = parse_format(fmt)
    codes = {code for code, _, _, _ in fields}
    rows = _rows(nodes, partitions, default, codes, node_oriented)
    if sized:  # Slurm sizes its default formats' partition and node-list columns to fit
        part_width = max([MIN_FIELD_SIZE] + [len(r["partition"]) + r["default"] for r in rows])
        node_width = max([MIN_FIELD_SIZE] + [len(compress_hostlist(n["name"] for n in r["nodes"])) for r in rows])
        fields = [(code, part_width if code in "PR" else node_width if code == "N" and node_oriented else width,
                   right, suffix) for code, width, right, suffix in fields]
    lines = []
    if long and not no_header:
        lines.append(time.asctime(time.localtime(now)) + "\n")
    if not no_header:
        lines.append(prefix + "".join(_cell(FIELDS.get(code, "?"), width, right, True) + suffix
                                      for code, width, right, suffix in fields) + "\n")
    for row in rows:
        lines.append(prefix + "".join(_cell(_value(code, row, width), width, right, True) + suffix
                                      for code, width, right, suffix in fields) + "\n")
    return "".join(lines)


def _rows(nodes: Sequence[Node], partitions: Sequence[Partition], default: str | None, codes: set[str],
          node_oriented: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for order, partition in enumerate(partitions):
        name = partition["name"]
        is_default = bool(partition.get("default") if default is None else name == default)
        groups: dict[tuple[object, ...], dict[str, Any]] = {}
        for node in partition_nodes(partition, nodes):
            probe = {"partition": name, "default": is_default, "part": partition, "nodes": [node],
                     "state": node_state(node)}
            key = tuple(_value(code, probe, 0) for code in sorted(codes - _AGGREGATES))
            if node_oriented:
                key += (node["name"],)
            row = groups.get(key)
            if row is None:
                groups[key] = {**probe, "order": order, "states": [probe["state"]]}
            else:
                row["nodes"].append(node)
                row["states"].append(probe["state"])
        rows.extend(groups.values())
    if node_oriented:
        rows.sort(key=lambda r: _natural(r["nodes"][0]["name"]))
    else:
        rows.sort(key=lambda r: (r["order"], -_STATE_RANK.get(r["state"], 0)))
    return rows


def _value(code: str, row: Mapping[str, Any], width: int) -> str:
    node_list: list[Node] = row["nodes"]
    first = node_list[0]
    part: Partition = row["part"]
    if code == "P":
        name = str(row["partition"])
        if row["default"]:
            name = name + "*" if width == 0 or len(name) < width else name[:width - 1] + "*"
        return name
    if code == "R":
        return str(row["partition"])
    if code == "a":
        return "up"
    if code == "l":
        limit = part.get("max_time_s")
        return "infinite" if limit is None else duration(-(-int(limit) // 60) * 60)
    if code == "D":
        return str(len(node_list))
    if code in "tT":
        return _state_name(row["state"], code == "t")
    if code in "Nn":
        return compress_hostlist(n["name"] for n in node_list)
    if code == "o":
        return compress_hostlist(n["name"] for n in node_list)
    if code == "c":
        return str(first.get("cpus") or 0)
    if code == "m":
        return str(first.get("mem_mb") or 0)
    if code == "G":
        return gres(first)
    if code == "C":
        counts = [0, 0, 0, 0]
        for node in node_list:
            total, alloc = int(node.get("cpus") or 0), int(node.get("cpus_alloc") or 0)
            other = node_state(node) in ("DOWN", "DRAINED", "DRAINING")
            counts[0] += alloc
            counts[1] += 0 if other else total - alloc
            counts[2] += total - alloc if other else 0
            counts[3] += total
        return "/".join(map(str, counts))
    if code in "FA":
        counts = [0, 0, 0, 0]
        for node in node_list:
            state = node_state(node)
            counts[0 if state in ("MIXED", "ALLOCATED") else 1 if state == "IDLE" else 2] += 1
            counts[3] += 1
        return "/".join(map(str, counts if code == "F" else counts[:2]))
    if code in "fb":  # Slurm's comma-separated list; (null) without any
        return ",".join(first.get("features") or ()) or "(null)"
    if code == "E":
        return str(first.get("reason") or "none")
    if code == "u":
        return str(first.get("reason_by") or "Unknown")
    if code == "H":
        return local_time(parse_iso(first.get("reason_at")))
    if code == "z":
        return f"{first.get('cpus') or 0}:1:1"
    if code == "X":
        return str(first.get("cpus") or 0)
    if code in "YZw":
        return "1"
    if code == "d":
        return "0"
    if code == "e":
        return "N/A"
    if code == "O":
        return "N/A"
    if code == "s":
        return "1-infinite"
    if code == "r":
        return "no"
    if code == "h":
        return "NO"
    if code == "g":
        groups = part.get("allowed_groups")
        return ",".join(sorted(groups)) if groups else "all"
    if code == "V":
        return "N/A"
    return ""


def _state_name(state: str, compact: bool) -> str:
    return _COMPACT.get(state, state.lower()) if compact else state.lower()


def _cell(text: str, width: int, right: bool, cut: bool) -> str:
    """Slurm's `_print_str`: left-justified fields are cut to the width (`%.Ns`), right-justified ones
    padded (`%Ns`) and, for values, cut to the width keeping the start; both padded with spaces."""
    if width == 0:
        return text
    if right:
        text = f"{text:>{width}}"
        return text[:width] if cut else text
    return f"{text[:width]:<{width}}"


def _natural(name: str) -> tuple[str, int, str]:
    cut = len(name)
    while cut and name[cut - 1].isdigit():
        cut -= 1
    return (name[:cut], int(name[cut:]) if cut < len(name) else -1, name)

