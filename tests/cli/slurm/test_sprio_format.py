"""`sprio`: the testbed runs priority/basic, where sprio only refuses (golden/sprio_priority_basic.txt), so the
expected text here is built by hand from Slurm 22.05's src/sprio/sprio.c (the formats) and print.c (the values)."""

from __future__ import annotations

from typing import Any

from corral.cli.slurm.sprio_format import NO_MATCH, default_format, sprio

WEIGHTS = {"age": 1000, "fairshare": 10000, "job_size": 0, "partition": 1000, "qos": 1000}


def row(id: int, partition: str, user: str, priority: int, age: float, fairshare: float,
        part: float = 1.0, qos: float = 0.0, nice: int = 0) -> dict[str, Any]:
    return {"id": id, "ref": str(id), "name": "x", "user": user, "partition": partition, "priority": priority,
            "age": age, "fairshare": fairshare, "job_size": 0.0, "partition_factor": part, "qos_factor": qos,
            "nice": nice, "reason": "Priority"}


ROWS = [row(12, "default", "alice", 6012, 0.0123, 0.5), row(9, "verylongpartition", "bob", 12000, 1.0, 1.0)]


def test_default_columns_follow_the_weights_set() -> None:
    assert default_format(WEIGHTS) == "%.15i %9r %.10Y %.10S %.10A %.10F %.10P %.10Q"
    assert default_format({**WEIGHTS, "job_size": 5, "qos": 0}) == "%.15i %9r %.10Y %.10S %.10A %.10F %.10J %.10P"
    assert default_format(WEIGHTS, show_user=True).startswith("%.15i %9r %.8u ")


def test_default_output() -> None:
    assert sprio(ROWS, weights=WEIGHTS) == (
        "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE  PARTITION        QOS\n"
        "              9 verylongp      12000          0       1000      10000       1000          0\n"
        "             12 default         6012          0         12       5000       1000          0\n"
    )


def test_long_output_has_user_every_factor_and_nice() -> None:
    lines = sprio(ROWS, weights=WEIGHTS, long=True).split("\n")
    assert lines[0] == ("          JOBID PARTITION     USER   PRIORITY       SITE        AGE      ASSOC  FAIRSHARE"
                        "    JOBSIZE  PARTITION        QOS        NICE                 TRES")
    assert lines[2].split() == ["12", "default", "alice", "6012", "0", "12", "0", "5000", "0", "1000", "0", "0"]


def test_normalized_factors_and_priority() -> None:
    lines = sprio(ROWS, weights=WEIGHTS, normalized=True).split("\n")
    assert lines[0] == "          JOBID PARTITION PRIORITY   AGE        FAIRSHARE  PARTITION  QOS       "
    # the priority over 2^32-1 as %16.14f, cut to its 10 columns; factors as %.7f
    assert lines[2] == "             12 default   0.00000139 0.0123000  0.5000000  1.0000000  0.0000000 "


def test_weights_line() -> None:
    assert sprio(ROWS, weights=WEIGHTS, show_weights=True).split("\n")[1] == (
        "        Weights                               1       1000      10000       1000       1000")


def test_no_header_and_format() -> None:
    assert sprio(ROWS, weights=WEIGHTS, fmt="%i %Y %u", no_header=True) == "9 12000 bob\n12 6012 alice\n"
    assert NO_MATCH == "Unable to find jobs matching user/id(s) specified\n"
