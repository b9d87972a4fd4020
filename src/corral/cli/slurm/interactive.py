"""`srun` and `salloc` from a login shell: an interactive job through the queue."""

from __future__ import annotations

from corral.cli.slurm.command import Refused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    raise Refused("corral runs srun inside a job (in a batch script); interactive srun outside one is not "
                  "supported yet: submit with sbatch")
