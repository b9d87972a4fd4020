"""The checkpoint interval corral recommends from a job's time limit (the seed's table)."""

import pytest

from corral.core.jobspec.checkpointing import recommended_checkpoint_interval_s


@pytest.mark.parametrize(("limit", "interval"), [
    (2400, 600), (3599, 600),               # under 1 h: every 10 min ...
    (60, 15), (1200, 300), (2, 1),          # ... or a quarter of a shorter limit: a 1-minute job saves within it
    (3600, 1800), (4 * 3600, 1800),         # 1-4 h: every 30 min
    (4 * 3600 + 1, 3600), (24 * 3600, 3600),  # 4-24 h: every hour
    (24 * 3600 + 1, 7200), (7 * 86400, 7200),  # longer: every 2 h
    (None, 7200),                           # no limit
])
def test_interval_follows_the_table(limit, interval):
    assert recommended_checkpoint_interval_s(limit) == interval
