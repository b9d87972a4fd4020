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
CHUNK = 10_000  # jobs a request names, well within the API's bound
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
    pending_only = False
    if filters:
        chosen = [job for job in active_jobs(service) if _matches(job, filters)
                  if not refs or job["ref"] in refs or str(job["id"]) in refs or str(job.get("array_job_id")) in refs]
        chosen.sort(key=lambda job: job["state"] != "PENDING")  # as Slurm's: pending first (chunks keep the order)
        # an array's row stands for its tasks not started (`12_[4-9]`, a range the API does not take): its id
        # cancels them; its running tasks are rows of their own, chosen or not
        shown = [job["ref"] for job in chosen]
        refs = [str(job["id"]) if _is_array(job) else job["ref"] for job in chosen]
        pending_only = "state" in filters and {CODE_STATES.get(v.upper(), v.upper())
                                               for v in str(filters["state"]).split(",")} == {"PENDING"}
    else:
        shown = refs
    if given.get("interactive"):
        refs = [ref for ref, name in zip(refs, shown) if _confirm(name)]
    status = 0
    for start in range(0, len(refs), CHUNK):
        part = refs[start:start + CHUNK]
        answers = service.ask("POST", "/api/v1/jobs/cancel", {"jobs": part, "pending_only": pending_only})["jobs"]
        for ref, answer in zip(part, answers):
            error = answer.get("error") if "state" not in answer else None
            if error is None:
                continue
            # as Slurm 22.05: a job that is not there (any more) is told of only with -v, and is no failure
            gone = error.get("status") == 404 or error.get("code") == "conflict"
            if not gone or (given.get("verbose") and not given.get("quiet")):
                print(f"scancel: error: Kill job error on job id {ref}: {_reason(error)}", file=sys.stderr)
            status = status or int(not gone)
    return status


def _is_array(job: dict[str, object]) -> bool:
    """The row of an array job itself (its tasks not started), not one of its tasks."""
    return bool(job.get("array")) and job.get("array_job_id") is None


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


def _reason(error: dict[str, object]) -> str:
    if error.get("status") == 404:
        return "Invalid job id specified"
    if error.get("status") == 403:
        return "Access/permission denied"
    if error.get("code") == "conflict":
        return "Job/step already completing or completed"
    return str(error.get("message"))


def _confirm(ref: str) -> bool:
    sys.stdout.write(f"Cancel job_id={ref}? [y/n] ")
    sys.stdout.flush()
    return sys.stdin.readline().strip().lower().startswith("y")
