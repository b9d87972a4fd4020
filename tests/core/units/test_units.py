"""Sizes and durations as people type them: Slurm's syntax in, Slurm's style out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.units.units import format_duration, format_memory, parse_duration_s, parse_memory_mb
from corral.errors import InvalidRequest

MIN = 60
HOUR = 3600
DAY = 86400


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (90, 90 * MIN),  # a bare int is minutes, as in sbatch --time=90
        ("90", 90 * MIN),
        ("1:30", 1 * MIN + 30),  # minutes:seconds
        ("1:00:00", 1 * HOUR),  # hours:minutes:seconds
        ("04:00:00", 4 * HOUR),
        ("2-12", 2 * DAY + 12 * HOUR),  # days-hours
        ("2-12:30", 2 * DAY + 12 * HOUR + 30 * MIN),  # days-hours:minutes
        ("2-12:30:15", 2 * DAY + 12 * HOUR + 30 * MIN + 15),  # days-hours:minutes:seconds
        ("0-00:00:01", 1),
        ("30m", 30 * MIN),
        ("2h", 2 * HOUR),
        ("1d", 1 * DAY),
        ("45s", 45),
        ("1.5h", 90 * MIN),
        ("  2H ", 2 * HOUR),
        ("3days", 3 * DAY),
    ],
)
def test_parse_duration_reads_slurm_time_formats(text, seconds):
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["UNLIMITED", "unlimited", "infinite", " INF "])
def test_parse_duration_unlimited_means_no_limit(text):
    assert parse_duration_s(text) is None


@pytest.mark.parametrize("text", ["", "abc", "1:2:3:4", "1-", "-5", "x-1", "1:xx", "::", "1.5", "10 minutes", "1-2-3", "1w"])
def test_parse_duration_rejects_text_that_is_not_a_duration(text):
    with pytest.raises(InvalidRequest) as err:
        parse_duration_s(text, field="time")
    assert err.value.field == "time"
    assert "time" in str(err.value)


@pytest.mark.parametrize("value", [0, -1, "0", "0:00", "0-00:00:00", "0m", -90])
def test_parse_duration_rejects_zero_and_negative_limits(value):
    with pytest.raises(InvalidRequest) as err:
        parse_duration_s(value, field="time")
    assert err.value.field == "time"
    assert "time" in str(err.value)


def test_parse_duration_error_names_the_field_it_was_given():
    with pytest.raises(InvalidRequest) as err:
        parse_duration_s("soon", field="time_limit")
    assert err.value.field == "time_limit"
    assert str(err.value).startswith("time_limit:")


def test_parse_duration_refuses_booleans():
    with pytest.raises(InvalidRequest):
        parse_duration_s(True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "mb"),
    [
        ("16G", 16 * 1024),
        ("16g", 16 * 1024),
        ("512M", 512),
        ("1.5T", 1536 * 1024),
        ("1024", 1024),  # a bare number is megabytes, Slurm's default unit
        (1024, 1024),
        ("16GB", 16 * 1024),
        ("16GiB", 16 * 1024),
        (" 8 G ", 8 * 1024),
        ("2048K", 2),
        ("0", 0),
        (0, 0),
        ("1P", 1024**3),
    ],
)
def test_parse_memory_reads_sizes_in_megabytes(text, mb):
    assert parse_memory_mb(text) == mb


@pytest.mark.parametrize("text", ["", "G", "16X", "sixteen", "-1G", "16 G B", "1,5G", "16GG", "1e3"])
def test_parse_memory_rejects_text_that_is_not_a_size(text):
    with pytest.raises(InvalidRequest) as err:
        parse_memory_mb(text, field="mem")
    assert err.value.field == "mem"
    assert "mem" in str(err.value)


def test_parse_memory_rejects_negative_numbers():
    with pytest.raises(InvalidRequest) as err:
        parse_memory_mb(-5, field="mem_per_cpu")
    assert err.value.field == "mem_per_cpu"


def test_parse_memory_refuses_booleans():
    with pytest.raises(InvalidRequest):
        parse_memory_mb(True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0:00"),
        (59, "0:59"),
        (90, "1:30"),
        (3600, "1:00:00"),
        (3661, "1:01:01"),
        (DAY, "1-00:00:00"),
        (2 * DAY + 12 * HOUR + 30 * MIN + 15, "2-12:30:15"),
        (None, "UNLIMITED"),
        (-5, "0:00"),
        (90.9, "1:30"),
    ],
)
def test_format_duration_uses_slurm_elapsed_style(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("mb", "text"),
    [(None, "-"), (0, "-"), (512, "512M"), (1024, "1G"), (80 * 1024, "80G"), (1536, "1536M"), (1024 * 1024, "1T")],
)
def test_format_memory_uses_the_largest_exact_unit(mb, text):
    assert format_memory(mb) == text


@settings(max_examples=200)
@given(st.integers(min_value=1, max_value=400 * DAY))
def test_format_duration_round_trips_through_parse(seconds):
    assert parse_duration_s(format_duration(seconds)) == seconds


def test_format_duration_round_trips_unlimited():
    assert parse_duration_s(format_duration(None)) is None


@settings(max_examples=200)
@given(st.integers(min_value=1, max_value=1 << 34))
def test_format_memory_round_trips_through_parse(mb):
    assert parse_memory_mb(format_memory(mb)) == mb
