"""`seff ID`: how well a job used what it asked for, as Slurm's seff reports it."""

from __future__ import annotations

import sys
import time

from corral.cli.slurm.command import Refused, server
from corral.cli.slurm.seff_format import format_seff
from corral.errors import CorralError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

CLUSTER = "corral"


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print("Usage: seff [Options] <Jobid>\n       Options:\n       -h    Help menu", file=sys.stderr)
        return 1
    ref = argv[0]
    service = server()
    try:
        job = service.ask("GET", f"/api/v1/jobs/{ref}")
    except CorralError as exc:
        if exc.status == 404:
            raise Refused("Job not found.") from None
        raise
    try:
        efficiency = service.ask("GET", f"/api/v1/jobs/{job['ref']}/efficiency") if job.get("start_time") else None
    except CorralError:
        efficiency = None
    sys.stdout.write(format_seff(job, efficiency, cluster=CLUSTER, now=time.time()))
    return 0
