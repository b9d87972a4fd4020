"""bench/schedule_pass.py: every queue size gets a floor and a verdict that follows from it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench")


def test_a_queue_size_without_a_floor_of_its_own_gets_a_real_floor_and_verdict():
    result = subprocess.run([sys.executable, os.path.join(BENCH, "schedule_pass.py"), "--pending", "1000",
                             "--runs", "1", "--warmup", "0", "--json"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    [scenario] = json.loads(result.stdout)["scenarios"]
    assert scenario["pending"] == 1000
    assert scenario["floor_ms"] == 100.0  # the floor of 10,000 pending jobs holds for fewer
    median = scenario["pass_ms"]["median"]
    assert math.isfinite(median) and median > 0
    assert scenario["verdict"] == ("PASS" if median <= 100.0 else "MISS")


def test_the_lines_printed_carry_no_nan():
    result = subprocess.run([sys.executable, os.path.join(BENCH, "schedule_pass.py"), "--pending", "1000",
                             "--runs", "1", "--warmup", "0"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "nan" not in result.stdout.lower()
    floor = next(line for line in result.stdout.splitlines() if line.strip().startswith("floor"))
    assert floor.split()[1:] == ["median", "100", "ms"]


def test_floors_between_and_past_the_measured_sizes():
    sys.path.insert(0, BENCH)
    try:
        from schedule_pass import floor_ms
    finally:
        sys.path.remove(BENCH)
    assert [floor_ms(n) for n in (0, 1000, 10_000, 10_001, 100_000, 200_000)] == [100.0, 100.0, 100.0, 1000.0,
                                                                                  1000.0, 2000.0]
