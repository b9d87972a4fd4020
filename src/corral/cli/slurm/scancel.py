"""`scancel`: cancel jobs, array tasks or the jobs a filter selects, as Slurm's scancel does.

    scancel 12 13_4 14_[1-3]        jobs, array tasks, a range of tasks
    scancel -u $USER -t PENDING     every pending job of mine
    scancel -n prep -p gpu          by name and partition (filters combine, as in Slurm)
"""

from __future__ import annotations

import sys

from corral.cli.slurm.argv import Option, parse
from corral.cli.slurm.command import Refused, answered, caller, server
from corral.cli.slurm.jobs import active_jobs, expand_refs
from corral.cli.slurm.values import CODE_STATES
from corral.errors import CorralError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

OPTIONS = [
    Option("user", "u", value=True), Option("name", "n", value=True), Option("state", "t", value=True),
    Option("partition", "p", value=True), Option("nodelist", "w", value=True), Option("account", "A", value=True),
    Option("qos", "q", value=True), Option("signal", "s", value=True), Option("batch", "b"), Option("full", "f"),
    Option("interactive", "i"), Option("quiet", "Q"), Option("verbose", "v"), Option("me"),
    Option("help", "h"), Option("usage"), Option("version", "V"), Option("hurry", "H"),
    Option("clusters", "M", value=True),  # one cluster: `--clusters=all` (snakemake's) is this one
]
USAGE = """Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]] [job_id...]
  -u, --user=NAME       jobs of this user        -n, --name=NAME        jobs of this name
  -t, --state=STATE     PENDING or RUNNING       -p, --partition=NAME   jobs in this partition
  -w, --nodelist=NODES  jobs on these nodes      -A, --account=NAME     jobs of this account
  -q, --qos=NAME        jobs of this QOS         -i, --interactive      confirm each cancel
  -Q, --quiet           no messages about jobs already ended or not found
"""


def main(argv: Sequence[str]) -> int:
    given, operands = parse(argv, OPTIONS)
    if answered(given, USAGE):
        return 0
    if given.get("signal") is not None:
        raise Refused("--signal is not supported by corral yet: scancel without it cancels the job")
    if "." in "".join(operands):
        raise Refused("job steps are not supported by corral: cancel the job (its id without .STEP)")
    if given.get("me"):
        given["user"] = caller()
    filters = {key: given[key] for key in ("user", "name", "state", "partition", "nodelist", "account", "qos")
               if key in given}
    if not operands and not filters:
        raise Refused("No job identification provided")
    service = server()
    refs = expand_refs(operands)
    if filters:
        chosen = [job for job in active_jobs(service) if _matches(job, filters)]
        refs = [job["ref"] for job in chosen if not refs or job["ref"] in refs or str(job["id"]) in refs
                or str(job.get("array_job_id")) in refs]
    status = 0
    for ref in refs:
        if given.get("interactive") and not _confirm(ref):
            continue
        try:
            service.ask("POST", f"/api/v1/jobs/{ref}/cancel")
        except CorralError as exc:
            # as Slurm 22.05: a job that is not there (any more) is told of only with -v, and is no failure
            gone = exc.status == 404 or exc.code == "conflict"
            if not gone or (given.get("verbose") and not given.get("quiet")):
                print(f"scancel: error: Kill job error on job id {ref}: {_reason(exc)}", file=sys.stderr)
            status = status or int(not gone)
    return status


def _matches(job: dict[str, object], filters: dict[str, object]) -> bool:
    for key, wanted in filters.items():
        values = str(wanted).split(",")
        if key == "state":
            states = {CODE_STATES.get(v.upper(), v.upper()) for v in values}
            if job["state"] not in states:
                return False
        elif key == "nodelist":
            if job.get("node") not in values:
                return False
        elif str(job.get(key)) not in values:
            return False
    return True


def _reason(error: CorralError) -> str:
    if error.status == 404:
        return "Invalid job id specified"
    if error.status == 403:
        return "Access/permission denied"
    if error.code == "conflict":
        return "Job/step already completing or completed"
    return error.message


def _confirm(ref: str) -> bool:
    sys.stdout.write(f"Cancel job_id={ref}? [y/n] ")
    sys.stdout.flush()
    return sys.stdin.readline().strip().lower().startswith("y")
