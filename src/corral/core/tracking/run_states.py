"""How a tracked run stands: running until it ends finished, failed or crashed."""

from __future__ import annotations

FINAL_STATES = ("finished", "failed", "crashed")
"""finished: it said so (or its job completed); failed: it ended on an error; crashed: it died, or its job did."""
RUN_STATES = ("running", *FINAL_STATES)
