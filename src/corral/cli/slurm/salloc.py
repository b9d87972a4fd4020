"""`salloc`: an allocation through the queue and a command in it (default: your shell), interactive as
srun's (`corral.cli.slurm.interactive`); `srun` inside it runs steps on the allocation's GPUs."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    from corral.cli.slurm import interactive

    return interactive.main(argv, program="salloc")
