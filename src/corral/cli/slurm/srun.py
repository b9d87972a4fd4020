"""`srun`: inside a corral job, a step on the job's allocation (`corral.cli.slurm.step`); from a login
shell, an interactive job through the queue (`corral.cli.slurm.interactive`)."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    if in_job():
        from corral.cli.slurm import step
        return step.main(argv)
    from corral.cli.slurm import interactive
    return interactive.main(argv)


def in_job() -> bool:
    """Whether this process runs inside a corral job (its supervisor set both)."""
    return bool(os.environ.get("CORRAL_JOB_ID") and os.environ.get("SLURM_JOB_ID"))
