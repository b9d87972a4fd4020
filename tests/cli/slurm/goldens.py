"""Slurm 22.05.8's own output, captured on the testbed (`scripts/slurm-testbed.sh`), to compare corral's with."""

from __future__ import annotations

from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str) -> str:
    return (GOLDEN / name).read_text()
