"""`sprio`: pending jobs' priorities and their factors, as Slurm's sprio prints them."""

from __future__ import annotations

import os
import sys

from corral.cli.slurm import cluster
from corral.cli.slurm.argv import Option, UsageError, parse
from corral.cli.slurm.command import answered, server
from corral.cli.slurm.jobs import expand_refs
from corral.cli.slurm.sprio_format import sprio

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

OPTIONS = [
    Option("jobs", "j", value=True, many=True), Option("user", "u", value=True), Option("long", "l"),
    Option("norm", "n"), Option("weights", "w"), Option("format", "o", value=True), Option("noheader", "h"),
    Option("partition", "p", value=True), Option("verbose", "v"), Option("version", "V"), Option("help"),
    Option("usage"), Option("sort", "S", value=True), Option("clusters", "M", value=True),
]


def main(argv: Sequence[str]) -> int:
    given, operands = parse(argv, OPTIONS)
    if operands:
        raise UsageError(f"unrecognized argument '{operands[0]}'")
    if answered(given, "Usage: sprio [-j JOBS] [-u USERS] [-l] [-n] [-w] [-h] [-o FORMAT] [-p PARTITIONS]"):
        return 0
    service = server()
    rows = service.ask("GET", "/api/v1/priority")
    jobs = given.get("jobs")
    refs = expand_refs([str(v) for v in jobs]) if isinstance(jobs, list) else []
    if refs:
        rows = [row for row in rows if str(row["id"]) in refs or row["ref"] in refs]
    if given.get("user"):
        users = str(given["user"]).split(",")
        rows = [row for row in rows if row["user"] in users]
    if given.get("partition"):
        names = str(given["partition"]).split(",")
        rows = [row for row in rows if row.get("partition") in names]
    _, _, weights = cluster.partitions(service)
    fmt = given.get("format") or os.environ.get("SPRIO_FORMAT") or None
    sys.stdout.write(sprio(rows, weights=weights, long=bool(given.get("long")), normalized=bool(given.get("norm")),
                           show_weights=bool(given.get("weights")), fmt=None if fmt is None else str(fmt),
                           no_header=bool(given.get("noheader")), show_user=bool(given.get("user"))))
    sys.stdout.flush()
    return 0
