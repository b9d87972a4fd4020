"""How often a job should checkpoint, from its time limit (the seed's table)."""

from __future__ import annotations

HOUR = 3600


def recommended_checkpoint_interval_s(time_limit_s: float | None) -> int:
    """Seconds between checkpoints for a job with this time limit (None: no limit).

    Under 1 h: every 10 min, or a quarter of the limit where that comes sooner (a job of 1 minute saves
    every 15 s, not never); 1-4 h: every 30 min; 4-24 h: every hour; longer or unlimited: every 2 h.
    """
    if time_limit_s is None:
        return 2 * HOUR
    if time_limit_s < HOUR:
        return max(1, min(600, int(time_limit_s // 4)))
    if time_limit_s <= 4 * HOUR:
        return 1800
    if time_limit_s <= 24 * HOUR:
        return HOUR
    return 2 * HOUR
