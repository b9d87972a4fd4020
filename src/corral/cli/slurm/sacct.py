"""`sacct`: the accounting of jobs, as Slurm's sacct prints it, from the corral server's records.

    sacct -j 12 --format=JobID,State,ExitCode,MaxRSS        sacct -X -P -o JobID,State,NodeList
    sacct -S 2026-11-01 -E now -s CD,F                      sacct -u alice -b
    sacct -j 12.batch,12.0 --format=JobID,Reason            (a step: its own line; -X: its job's)

Selection as Slurm 22.05's: your own jobs (all users' for root, or with -a; -u names users) that were
eligible by -E and had not ended before -S. -S defaults to midnight, or to the epoch with -j, or to now
with -s; -E to now, or to -S with -s. `-j 12.STEP` asks for one step's line: `.batch` is the line
corral keeps for a started job; numbered steps (srun's) it keeps none of, so they print nothing, as
Slurm prints nothing for a step that is not there. With -X a step stands for its job. A requeued job is
its newest run's record (its steps, numbered from 0 in that run), or with -D one record per run
(`sacct_runs`).
"""

from __future__ import annotations

import os
import sys
import time

from corral.cli.slurm.argv import Option, UsageError, listed, option_text, parse
from corral.cli.slurm.command import Refused, answered, caller, server
from corral.cli.slurm.jobs import active_jobs, expand_refs, finished_jobs, split_step
from corral.cli.slurm.sacct_format import format_sacct
from corral.core.units.slurm_times import parse_time
from corral.cli.slurm.values import CODE_STATES, STATE_CODES, parse_iso
from corral.errors import CorralError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from corral.cli.wire import Server

OPTIONS = [
    Option("jobs", "j", value=True, many=True), Option("user", "u", value=True, many=True), Option("uid", value=True),
    Option("allusers", "a"), Option("allocations", "X"), Option("parsable2", "P"), Option("parsable", "p"),
    Option("noheader", "n"), Option("format", "o", value=True), Option("starttime", "S", value=True),
    Option("endtime", "E", value=True), Option("name", value=True), Option("state", "s", value=True),
    Option("brief", "b"), Option("long", "l"), Option("partition", "r", value=True),
    Option("accounts", "A", value=True), Option("nodelist", "N", value=True), Option("qos", "q", value=True),
    Option("duplicates", "D"), Option("allclusters", "L"), Option("clusters", "M", value=True),
    Option("truncate", "T"), Option("units", value=True), Option("noconvert"), Option("delimiter", value=True),
    Option("verbose", "v"), Option("version", "V"), Option("help", "h"), Option("usage"),
    Option("helpformat", "e"), Option("array"),
]
USAGE = """Usage: sacct [OPTIONS]
  -j, --jobs=IDS          these jobs (12, 12_3, 12,13)     -u, --user=USERS   these users' jobs
  -a, --allusers          everyone's jobs                  -X, --allocations  no step lines
  -o, --format=FIELDS     JobID,State,ExitCode,MaxRSS...   -e, --helpformat   the fields there are
  -P, --parsable2         | between fields                 -p, --parsable     | after each field
  -n, --noheader          -b, --brief                      -l, --long
  -S, --starttime=TIME    -E, --endtime=TIME               -s, --state=STATES (CD,F,CA,TO,OOM,R,PD...)
  --name=NAMES            -r, --partition=NAMES            -A, --accounts=NAMES
  -D, --duplicates        every run of a requeued job, a record each (else its newest run's)
"""
USAGE_FIELDS = ("JobID", "JobIDRaw", "JobName", "User", "UID", "Partition", "Account", "State", "ExitCode", "Elapsed",
                "ElapsedRaw", "Start", "End", "Submit", "Eligible", "NodeList", "NNodes", "AllocCPUS", "NCPUS",
                "AllocTRES", "ReqTRES", "ReqMem", "ReqCPUS", "MaxRSS", "AveRSS", "TotalCPU", "CPUTime",
                "CPUTimeRAW", "Timelimit", "QOS", "Reason", "NTasks")
_USAGE_NEEDED = ("maxrss", "averss", "totalcpu", "mincpu", "avecpu", "usercpu", "systemcpu")


def main(argv: Sequence[str]) -> int:
    given, operands = parse(argv, OPTIONS)
    if operands:
        raise UsageError(f"unrecognized argument '{operands[0]}'")
    if given.get("helpformat"):
        print("".join(f"{name:<20}" + ("\n" if i % 4 == 3 else "") for i, name in enumerate(USAGE_FIELDS)).rstrip())
        return 0
    if answered(given, USAGE):
        return 0
    now = time.time()
    fields = option_text(given.get("format"))
    if fields is None and not given.get("brief") and not given.get("long"):
        fields = os.environ.get("SACCT_FORMAT") or None
    asked = _asked(listed(given, "jobs"), bool(given.get("allocations")))
    refs = list(asked)
    states = _states(given.get("state"))
    start, end = _window(given, bool(refs), states is not None, now)
    service = server()
    jobs = _by_id(service, refs) if refs else _in_window(service, start)
    users = _users(given, bool(refs))
    jobs = [job for job in jobs if _selected(job, given, users, states, start, end)]
    steps_only = {job["id"] for job in jobs if refs and None not in _steps_of(job, asked)}
    jobs = [job for job in jobs if job["id"] not in steps_only or "batch" in _steps_of(job, asked)]
    jobs.sort(key=lambda job: (parse_iso(job.get("submit_time")) or 0, job["id"]))
    usage = _usage(service, jobs) if _wants_usage(fields, given) else None
    if not given.get("allocations"):
        _add_steps(service, jobs)
    _add_runs(service, jobs)
    parsable = "" if given.get("parsable2") else "|" if given.get("parsable") else None
    if parsable is not None and given.get("delimiter"):
        parsable = "" if given.get("parsable2") else str(given["delimiter"])
    try:
        text = format_sacct(jobs, usage, fields=fields, parsable=parsable, noheader=bool(given.get("noheader")),
                            allocations=bool(given.get("allocations")), brief=bool(given.get("brief")),
                            long=bool(given.get("long")), now=now, uids=_uids(jobs), steps_only=steps_only,
                            duplicates=bool(given.get("duplicates")))
    except ValueError as exc:
        raise Refused(str(exc)) from None
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def _asked(selectors: list[str], allocations: bool) -> dict[str, set[str | None]]:
    """Each job ref -j names, with the steps asked of it (None: the job itself, as with -X always)."""
    asked: dict[str, set[str | None]] = {}
    for text in selectors:
        job, step = split_step(text)
        for ref in expand_refs([job]):
            asked.setdefault(ref, set()).add(None if allocations else step)
    return asked


def _steps_of(job: dict[str, Any], asked: dict[str, set[str | None]]) -> set[str | None]:
    """What -j asked of this job: by its own ref, or by its array's (`12` or `12.batch` of every task)."""
    for key in (job["ref"], str(job["id"]), str(job.get("array_job_id"))):
        if key in asked:
            return asked[key]
    return {None}


def _window(given: dict[str, object], by_id: bool, by_state: bool, now: float) -> tuple[float, float]:
    try:
        if given.get("starttime"):
            start = parse_time(str(given["starttime"]), now)
        else:
            start = 0.0 if by_id else now if by_state else parse_time("midnight", now)
        if given.get("endtime"):
            end = parse_time(str(given["endtime"]), now)
        else:
            end = start if by_state and not by_id and given.get("starttime") else now
    except ValueError as exc:
        raise Refused(str(exc)) from None
    return start, end


def _by_id(service: Server, refs: list[str]) -> list[dict[str, Any]]:
    """The jobs named, an array with every task (and its waiting rest); a name that is no job is left out."""
    out: dict[str, dict[str, Any]] = {}
    for ref in refs:
        try:
            job = service.ask("GET", f"/api/v1/jobs/{ref}")
        except CorralError as exc:
            if exc.status == 404:
                continue
            raise
        if "_" not in ref and job.get("array") is not None and job.get("array_task_id") is None:
            answer = service.ask("GET", f"/api/v1/jobs/{job['id']}/tasks?limit=10000")
            for task in answer["tasks"]:
                out[task["ref"]] = task
            if answer["summary"].get("waiting"):
                out[job["ref"]] = job
        else:
            out[job["ref"]] = job
    return list(out.values())


def _in_window(service: Server, start: float) -> list[dict[str, Any]]:
    ended = list(finished_jobs(service, ended_after=start))
    return active_jobs(service) + ended


def _selected(job: dict[str, Any], given: dict[str, object], users: set[str] | None, states: set[str] | None,
              start: float, end: float) -> bool:
    if users is not None and job["user"] not in users:
        return False
    if states is not None and job["state"] not in states:
        return False
    if job.get("held") and not given.get("jobs"):
        return False  # not eligible: Slurm's window leaves it out
    submitted = parse_iso(job.get("submit_time")) or 0
    ended = parse_iso(job.get("end_time"))
    if submitted > end or (ended is not None and ended < start):
        return False
    for key, field in (("name", "name"), ("partition", "partition"), ("accounts", "account"), ("qos", "qos"),
                       ("nodelist", "node")):
        if key in given and str(job.get(field)) not in listed(given, key):
            return False
    return True


def _users(given: dict[str, object], by_id: bool) -> set[str] | None:
    named = listed(given, "user")
    if named:
        return set(named)
    if given.get("allusers") or os.getuid() == 0 or by_id:
        return None
    return {caller()}


def _states(text: object) -> set[str] | None:
    if not text:
        return None
    states = set()
    for part in str(text).upper().split(","):
        state = CODE_STATES.get(part, part)
        if state not in STATE_CODES:
            raise Refused(f"Invalid state specified: {part}")
        states.add(state)
    return states


def _wants_usage(fields: str | None, given: dict[str, object]) -> bool:
    if given.get("brief"):
        return False
    if fields is None:
        return bool(given.get("long"))
    names = [name.partition("%")[0].strip().lower() for name in fields.split(",")]
    return any(name and any(usage.startswith(name) or name.startswith(usage) for usage in _USAGE_NEEDED)
               for name in names) or "all" in names


def _usage(service: Server, jobs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Each ended job's peak memory and CPU time (the server's efficiency answer: its samples and the kernel's count)."""
    out: dict[int, dict[str, Any]] = {}
    for job in jobs:
        if not job.get("start_time"):
            continue
        try:
            out[job["id"]] = service.ask("GET", f"/api/v1/jobs/{job['ref']}/efficiency")
        except CorralError:
            continue
    return out


STEPS_PER_REQUEST = 1000  # job ids in one query string (~7 KB)


def _add_steps(service: Server, jobs: list[dict[str, Any]]) -> None:
    """Each started batch or interactive job's `srun` steps, under `steps` (a plain command's job has none:
    its srun is not a step)."""
    started = [job for job in jobs if job.get("start_time") and (not job.get("command") or job.get("interactive"))]
    for at in range(0, len(started), STEPS_PER_REQUEST):  # one request for a day's jobs, not one per job
        page = started[at:at + STEPS_PER_REQUEST]
        ids = ",".join(str(job["id"]) for job in page)
        found = service.ask("GET", f"/api/v1/steps?jobs={ids}")["steps"]
        for job in page:
            job["steps"] = found.get(str(job["id"]), [])


def _add_runs(service: Server, jobs: list[dict[str, Any]]) -> None:
    """A requeued job's timeline, for its runs' records (`sacct_runs`): what a listing leaves out, asked of the
    few jobs that were requeued."""
    for job in jobs:
        if job.get("restarts") and "events" not in job:
            try:
                job["events"] = service.ask("GET", f"/api/v1/jobs/{job['ref']}")["events"]
            except CorralError:
                continue


def _uids(jobs: list[dict[str, Any]]) -> dict[str, int]:
    import pwd

    out = {}
    for user in {job["user"] for job in jobs}:
        try:
            out[user] = pwd.getpwnam(user).pw_uid
        except KeyError:
            out[user] = 0
    return out
