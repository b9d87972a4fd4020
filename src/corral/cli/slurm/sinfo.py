"""`sinfo`: partitions and nodes as Slurm's sinfo prints them (`sinfo`, `-N -l`, `-s`, `-o FORMAT`, `-h`), and
the reservations (`-T`)."""

from __future__ import annotations

import os
import sys
import time

from corral.cli.slurm import cluster
from corral.cli.slurm.argv import Option, UsageError, parse
from corral.cli.slurm.command import answered, server
from corral.cli.slurm.scontrol_format import outside_reason
from corral.cli.slurm.sinfo_format import REASONS_FORMAT, sinfo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

OPTIONS = [
    Option("Node", "N"), Option("long", "l"), Option("summarize", "s"), Option("format", "o", value=True),
    Option("noheader", "h"), Option("partition", "p", value=True), Option("nodes", "n", value=True),
    Option("all", "a"), Option("responding", "r"), Option("dead", "d"), Option("exact", "e"),
    Option("states", "t", value=True), Option("iterate", "i", value=True), Option("verbose", "v"),
    Option("version", "V"), Option("help"), Option("usage"), Option("hide"), Option("list-reasons", "R"),
    Option("reservation", "T"),
]


def main(argv: Sequence[str]) -> int:
    given, operands = parse(argv, OPTIONS)
    if operands:
        raise UsageError(f"unrecognized argument '{operands[0]}'")
    if answered(given, "Usage: sinfo [-N] [-l] [-s] [-h] [-p PARTITION] [-n NODES] [-o FORMAT]"):
        return 0
    service = server()
    if given.get("reservation"):  # -T: the reservations, not the nodes
        from corral.cli.slurm.reservation_format import sinfo_reservations

        reservations = service.ask("GET", "/api/v1/reservations")
        sys.stdout.write(sinfo_reservations(reservations, header=not given.get("noheader")))
        return 0
    nodes = cluster.nodes(service)
    partitions, default, _ = cluster.partitions(service)
    if given.get("partition"):
        wanted = str(given["partition"]).split(",")
        partitions = [p for p in partitions if p["name"] in wanted]
    if given.get("nodes"):
        wanted = str(given["nodes"]).split(",")
        nodes = [n for n in nodes if n.get("name") in wanted]
    fmt = given.get("format") or os.environ.get("SINFO_FORMAT") or None
    if given.get("list_reasons"):  # the nodes down or drained, and why (Slurm's -R): a row per reason, not per partition
        # and those with a GPU in use outside corral, which no job is placed on either (while nothing drains them)
        nodes = [dict(n) for n in map(outside_reason, nodes) if n.get("reason")]
        partitions = partitions[:1]  # every node is in every partition here
        fmt = fmt or REASONS_FORMAT
    sys.stdout.write(sinfo(nodes, partitions, now=time.time(), default=default, node_oriented=bool(given.get("Node")),
                           long=bool(given.get("long")), summarize=bool(given.get("summarize")),
                           fmt=None if fmt is None else str(fmt), no_header=bool(given.get("noheader"))))
    sys.stdout.flush()
    return 0
