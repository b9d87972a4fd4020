"""`squeue`: the queue as Slurm's squeue prints it, from the corral server's jobs.

    squeue -u $USER            squeue --me -t PD          squeue -j 12,13 -o "%i %T %R"
    squeue -l                  squeue --start             squeue -h -o %i     (ids for scripts)

Like Slurm, it shows pending and running jobs, and those that ended in the last five minutes
(Slurm's MinJobAge) when asked for by id or by state.
"""

from __future__ import annotations

import os
import sys
import time

from corral.cli.slurm import cluster
from corral.cli.slurm.argv import Option, UsageError, listed, option_text, parse
from corral.cli.slurm.command import Refused, answered, caller, server
from corral.cli.slurm.jobs import active_jobs, expand_refs, finished_jobs
from corral.cli.slurm.squeue_format import format_squeue
from corral.cli.slurm.values import CODE_STATES, STATE_CODES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from corral.cli.wire import Server

MIN_JOB_AGE_S = 300  # Slurm's default MinJobAge: how long an ended job stays in squeue
ACTIVE = frozenset({"PENDING", "RUNNING"})
OPTIONS = [
    Option("user", "u", value=True, many=True), Option("me"), Option("states", "t", value=True),
    Option("jobs", "j", value=True, many=True), Option("partition", "p", value=True), Option("name", "n", value=True),
    Option("nodelist", "w", value=True), Option("account", "A", value=True), Option("qos", "q", value=True),
    Option("noheader", "h"), Option("long", "l"), Option("array", "r"), Option("start"), Option("all", "a"),
    Option("format", "o", value=True), Option("Format", "O", value=True), Option("sort", "S", value=True),
    Option("iterate", "i", value=True), Option("verbose", "v"), Option("version", "V"), Option("help"),
    Option("usage"), Option("hide"), Option("local"), Option("federation"), Option("sibling"),
    Option("clusters", "M", value=True), Option("steps", "s", value=True, optional=True),
]
USAGE = """Usage: squeue [OPTIONS]
  -u, --user=USERS      jobs of these users      --me                 my jobs
  -t, --states=STATES   PD,R,CD,... or all       -j, --jobs=IDS       these jobs
  -p, --partition=NAMES                          -n, --name=NAMES     these job names
  -w, --nodelist=NODES                           -A, --account=NAMES  -q, --qos=NAMES
  -h, --noheader        -l, --long               -r, --array          one line per array task
  --start               expected start times     -o, --format=FMT     -O, --Format=FIELDS
  -S, --sort=KEYS       -i, --iterate=SECONDS
"""


def main(argv: Sequence[str]) -> int:
    given, operands = parse(argv, OPTIONS)
    if operands:
        raise UsageError(f"unrecognized argument '{operands[0]}'")
    if answered(given, USAGE):
        return 0
    if given.get("steps") is not None:
        raise Refused("job steps are not supported by corral: each job is one batch step")
    _from_environment(given, os.environ)
    service = server()
    iterate = float(str(given["iterate"])) if given.get("iterate") else 0.0
    while True:
        status = _show(service, given)
        if not iterate or status:
            return status
        sys.stdout.write("\n")
        time.sleep(iterate)


def _show(service: Server, given: dict[str, object]) -> int:
    now = time.time()
    wanted_refs = expand_refs([str(v) for v in listed(given, "jobs")])
    states = _states(given.get("states"))
    jobs = active_jobs(service)
    if wanted_refs or (states is not None and states - ACTIVE):
        jobs += _recently_ended(service, now)
    if wanted_refs:
        jobs = [job for job in jobs if _named(job, wanted_refs)]
        if not jobs:
            print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
            return 1
    users = set(listed(given, "user")) | ({caller()} if given.get("me") else set())
    jobs = [job for job in jobs if _selected(job, given, users, states)]
    if _needs_priority(given):
        _add_priorities(service, jobs)
    errors: list[str] = []
    try:
        text = format_squeue(jobs, now=now, fmt=option_text(given.get("format")),
                             fmt_long=option_text(given.get("Format")),
                             long=bool(given.get("long")), noheader=bool(given.get("noheader")),
                             start=bool(given.get("start")), array=bool(given.get("array")),
                             sort=option_text(given.get("sort")), node_name=cluster.node_name(), errors=errors)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    for error in errors:
        print(f"squeue: error: {error}", file=sys.stderr)
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def _from_environment(given: dict[str, object], environ: Any) -> None:
    """SQUEUE_FORMAT, SQUEUE_FORMAT2, SQUEUE_SORT, SQUEUE_USERS, SQUEUE_STATES... under the command line's options."""
    for variable, key in (("SQUEUE_FORMAT", "format"), ("SQUEUE_FORMAT2", "Format"), ("SQUEUE_SORT", "sort"),
                          ("SQUEUE_STATES", "states"), ("SQUEUE_PARTITION", "partition"),
                          ("SQUEUE_ACCOUNT", "account"), ("SQUEUE_QOS", "qos"), ("SQUEUE_NAMES", "name")):
        if environ.get(variable) and key not in given and not (key == "Format" and "format" in given):
            given[key] = environ[variable]
    if environ.get("SQUEUE_USERS") and "user" not in given:
        given["user"] = [environ["SQUEUE_USERS"]]


def _states(text: object) -> set[str] | None:
    if not text:
        return None
    states = set()
    for part in str(text).upper().split(","):
        if part == "ALL":
            return set(STATE_CODES)
        state = CODE_STATES.get(part, part)
        if state not in STATE_CODES:
            raise Refused(f"Invalid job state specified: {part}")
        states.add(state)
    return states


def _recently_ended(service: Server, now: float) -> list[dict[str, Any]]:
    return list(finished_jobs(service, ended_after=now - MIN_JOB_AGE_S))


def _named(job: dict[str, Any], refs: list[str]) -> bool:
    return (str(job["id"]) in refs or job["ref"] in refs or str(job.get("array_job_id")) in refs
            or any(ref.partition("_")[0] == str(job.get("array_job_id") or job["id"]) and "_[" in job["ref"]
                   for ref in refs))


def _selected(job: dict[str, Any], given: dict[str, object], users: set[str], states: set[str] | None) -> bool:
    if users and job["user"] not in users:
        return False
    if states is None:
        if job["state"] not in ACTIVE and not given.get("jobs"):
            return False
    elif job["state"] not in states:
        return False
    for key, field in (("partition", "partition"), ("name", "name"), ("account", "account"), ("qos", "qos"),
                       ("nodelist", "node")):
        if key in given and str(job.get(field)) not in listed(given, key):
            return False
    return True


def _needs_priority(given: dict[str, object]) -> bool:
    fmt = f"{given.get('format') or ''}{given.get('Format') or ''}".lower()
    return not given.get("sort") or "p" in str(given.get("sort")) or "%p" in fmt or "%q" in fmt or "priority" in fmt


def _add_priorities(service: Server, jobs: list[dict[str, Any]]) -> None:
    """Pending jobs' priorities (sprio's), by which Slurm's default order sorts them."""
    if not any(job["state"] == "PENDING" for job in jobs):
        return
    priorities = {row["id"]: row["priority"] for row in service.ask("GET", "/api/v1/priority")}
    for job in jobs:
        if job["id"] in priorities:
            job["priority"] = int(priorities[job["id"]])
