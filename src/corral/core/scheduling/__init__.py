"""Who runs where and when: nodes and GPUs, priority with fair share, backfill, sharing, reservations, drains, forecasts."""
