"""seff-like efficiency from sacct's records of a job and its steps."""

from __future__ import annotations

import pytest

from corral.backends.slurm.efficiency import cpu_seconds, efficiency, size_mb
from corral.backends.slurm.parse import SEP


def lines(*rows: tuple[str, ...]) -> str:
    return "\n".join(SEP.join(row) for row in rows) + "\n"


def test_cpu_and_memory_efficiency_come_from_the_job_and_its_steps():
    text = lines(
        ("123", "COMPLETED", "00:01:40", "00:02:30", "2", "", "1024M"),
        ("123.batch", "COMPLETED", "00:01:40", "00:02:30", "2", "524288K", ""),
        ("123.extern", "COMPLETED", "00:01:40", "00:00:00", "2", "1024K", ""),
    )
    eff = efficiency(text)
    assert (eff["elapsed_s"], eff["cpus"], eff["cpu_time_s"]) == (100, 2, 150.0)
    assert eff["cpu_efficiency"] == 0.75
    assert (eff["max_rss_mb"], eff["mem_requested_mb"], eff["mem_efficiency"]) == (512.0, 1024.0, 0.5)


def test_old_per_cpu_memory_requests_count_for_every_cpu():
    eff = efficiency(lines(("7", "COMPLETED", "00:00:10", "00:00:05.500", "4", "", "1000Mc"),
                           ("7.batch", "COMPLETED", "00:00:10", "00:00:05.500", "4", "2000M", "")))
    assert eff["mem_requested_mb"] == 4000.0 and eff["mem_efficiency"] == 0.5
    assert eff["cpu_time_s"] == 5.5


def test_no_record_is_an_error():
    with pytest.raises(ValueError):
        efficiency("")


@pytest.mark.parametrize(("text", "seconds"), [("00:02.250", 2.25), ("01:00:00", 3600.0), ("1-00:00:01", 86401.0),
                                               ("", 0.0)])
def test_total_cpu_reads_slurms_forms(text, seconds):
    assert cpu_seconds(text) == seconds


@pytest.mark.parametrize(("text", "mb"), [("2048K", 2.0), ("1.5G", 1536.0), ("4000Mn", 4000.0), ("", None)])
def test_sizes_read_slurms_units(text, mb):
    assert size_mb(text) == mb
