"""What Slurm 22.05's `sacct` prints, from the API's job JSON: pure formatting, cheap to import.

    format_sacct(jobs, usage=None, *, fields=None, parsable=None, noheader=False,
                 allocations=False, brief=False, long=False, now, uids=None, duplicates=False) -> str

`jobs` are job dicts (`corral.core.jobspec.job_fields.JobFields`), in the order to print (the caller selects
and orders them; see /work/notes/sacct.md for Slurm's selection rules). `usage` maps a job's `id`
to what it used, `{"max_rss_mb": float | None, "cpu_time_s": float | None}` (the keys of the server's
`/api/v1/jobs/{id}/efficiency` answer); a job missing there used nothing known. `now` (epoch seconds)
is the clock for running jobs' Elapsed and CPUTime.

`fields` is `-o/--format`'s text (`JobID,JobName%30,state`; several -o joined with commas; or
`$SACCT_FORMAT`, which Slurm reads only when no -o, -b or -l is given): names are matched as Slurm
matches them, case-insensitively by prefix against its own field table in its order (`st` is Start),
with `%N` setting a column's width (and so right-justifying it, as Slurm does); `ALL` is every field.
`brief` (`-b`: JobID,State,ExitCode) and `long` (`-l`) append their columns after `fields`, as Slurm
does; with none of the three, Slurm's default columns.
`parsable`: None (columns), `"|"` for `-p` (every field followed by `|`), `""` for `-P` (`|` between
fields, none at the end). `noheader` is `-n`; `allocations` is `-X` (no step lines).

How corral shows steps: each job that has started gets the step line Slurm prints for a batch job,
`ID.batch`, carrying the job's usage (MaxRSS and the per-step figures are only on step lines in Slurm
too, so tools reading them from there work), then a line for each step `srun` ran in it, `ID.0`,
`ID.1`, from the job's `steps` (the server's `/api/v1/jobs/{id}/steps`, which the caller adds). No
`.extern` line: Slurm prints it only with `PrologFlags=contain`, which the reference testbed lacks.
A requeued job is its newest run's record, or with `duplicates` (`-D`) one record per run
(`sacct_runs.records`, from the job's `events`, which the caller adds for a job with restarts).

Raises `ValueError("Invalid field requested: \"X\"")` for a name Slurm does not know.
"""

from __future__ import annotations

from corral.cli.slurm.sacct_runs import records
from corral.cli.slurm.values import exit_code, full_duration, local_time, parse_iso

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping
    from typing import Any

    Job = Mapping[str, Any]
    Usage = Mapping[str, Any]

# Slurm's field table (src/sacct/sacct.c), in its order, since a prefix matches the first name it fits;
# a negative width is left-justified. Kinds: s text (cut to width with `+`), n number, t time, d date.
_TABLE = (
    (10, "Account", "s"), (15, "AdminComment", "s"), (10, "AllocCPUS", "n"), (10, "AllocNodes", "s"),
    (10, "AllocTRES", "s"), (7, "AssocID", "n"), (10, "AveCPU", "s"), (10, "AveCPUFreq", "s"),
    (14, "AveDiskRead", "s"), (14, "AveDiskWrite", "s"), (10, "AvePages", "s"), (10, "AveRSS", "s"),
    (10, "AveVMSize", "s"), (16, "BlockID", "s"), (10, "Cluster", "s"), (14, "Comment", "s"),
    (19, "Constraints", "s"), (14, "ConsumedEnergy", "s"), (17, "ConsumedEnergyRaw", "n"),
    (19, "Container", "s"), (10, "CPUTime", "t"), (10, "CPUTimeRAW", "n"), (-10, "DBIndex", "n"),
    (15, "DerivedExitCode", "s"), (10, "Elapsed", "t"), (10, "ElapsedRaw", "n"), (19, "Eligible", "d"),
    (19, "End", "d"), (8, "ExitCode", "s"), (19, "Flags", "s"), (6, "GID", "n"), (9, "Group", "s"),
    (-12, "JobID", "s"), (-12, "JobIDRaw", "s"), (10, "JobName", "s"), (9, "Layout", "s"),
    (12, "MaxDiskRead", "s"), (15, "MaxDiskReadNode", "s"), (15, "MaxDiskReadTask", "n"),
    (12, "MaxDiskWrite", "s"), (16, "MaxDiskWriteNode", "s"), (16, "MaxDiskWriteTask", "n"),
    (8, "MaxPages", "s"), (12, "MaxPagesNode", "s"), (14, "MaxPagesTask", "n"), (10, "MaxRSS", "s"),
    (10, "MaxRSSNode", "s"), (10, "MaxRSSTask", "n"), (10, "MaxVMSize", "s"), (14, "MaxVMSizeNode", "s"),
    (14, "MaxVMSizeTask", "n"), (12, "McsLabel", "s"), (10, "MinCPU", "s"), (10, "MinCPUNode", "s"),
    (10, "MinCPUTask", "n"), (10, "NCPUS", "n"), (8, "NNodes", "n"), (15, "NodeList", "s"),
    (8, "NTasks", "n"), (10, "Partition", "s"), (10, "Priority", "n"), (10, "QOS", "s"), (6, "QOSRAW", "n"),
    (22, "Reason", "s"), (10, "ReqCPUFreq", "s"), (13, "ReqCPUFreqGov", "s"), (13, "ReqCPUFreqMax", "s"),
    (13, "ReqCPUFreqMin", "s"), (8, "ReqCPUS", "n"), (10, "ReqMem", "s"), (8, "ReqNodes", "s"),
    (10, "ReqTRES", "s"), (20, "Reservation", "s"), (8, "ReservationId", "n"), (10, "Reserved", "t"),
    (10, "ResvCPU", "t"), (10, "ResvCPURAW", "n"), (19, "Start", "d"), (10, "State", "s"),
    (19, "Submit", "d"), (20, "SubmitLine", "s"), (10, "Suspended", "t"), (15, "SystemComment", "s"),
    (10, "SystemCPU", "s"), (10, "Timelimit", "s"), (10, "TimelimitRaw", "s"), (10, "TotalCPU", "s"),
    (14, "TRESUsageInAve", "s"), (14, "TRESUsageInMax", "s"), (18, "TRESUsageInMaxNode", "s"),
    (18, "TRESUsageInMaxTask", "s"), (14, "TRESUsageInMin", "s"), (18, "TRESUsageInMinNode", "s"),
    (18, "TRESUsageInMinTask", "s"), (14, "TRESUsageInTot", "s"), (15, "TRESUsageOutAve", "s"),
    (15, "TRESUsageOutMax", "s"), (19, "TRESUsageOutMaxNode", "s"), (19, "TRESUsageOutMaxTask", "s"),
    (15, "TRESUsageOutMin", "s"), (19, "TRESUsageOutMinNode", "s"), (19, "TRESUsageOutMinTask", "s"),
    (15, "TRESUsageOutTot", "s"), (6, "UID", "n"), (9, "User", "s"), (10, "UserCPU", "s"),
    (10, "WCKey", "s"), (10, "WCKeyID", "n"), (20, "WorkDir", "s"),
)

DEFAULT_FIELDS = "jobid,jobname,partition,account,alloccpus,state,exitcode"
BRIEF_FIELDS = "jobid,state,exitcode"
LONG_FIELDS = (
    "jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,"
    "maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,"
    "ntasks,alloccpus,elapsed,state,exitcode,avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,reqmem,"
    "consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,"
    "maxdiskwritetask,avediskwrite,reqtres,alloctres,tresusageinave,tresusageinmax,tresusageinmaxn,"
    "tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutmax,"
    "tresusageoutmaxn,tresusageoutmaxt,tresusageoutave,tresusageouttot"
)
_SIZE_UNITS = "KMGTPE"


def parse_fields(text: str) -> list[tuple[str, int, str]]:
    """`-o`'s text as Slurm reads it: `(name, width, kind)` per column (see the module's docstring)."""
    columns = []
    for item in text.split(","):
        item = item.lstrip()
        if not item:
            continue
        name, percent, width_text = item.partition("%")
        width = _atoi(width_text) if percent else None
        if name.lower() == "all"[:len(name)]:
            columns += [(field, width if width is not None else w, kind) for w, field, kind in _TABLE]
            continue
        for w, field, kind in _TABLE:
            if field.lower().startswith(name.lower()):
                columns.append((field, width if width is not None else w, kind))
                break
        else:
            raise ValueError(f'Invalid field requested: "{name}"')
    return columns


def format_sacct(
    jobs: Iterable[Job], usage: Mapping[Any, Usage] | None = None, *, fields: str | None = None,
    parsable: str | None = None, noheader: bool = False, allocations: bool = False, brief: bool = False,
    long: bool = False, now: float, uids: Mapping[str, int] | None = None, steps_only: Collection[Any] = (),
    duplicates: bool = False,
) -> str:
    """sacct's whole output (ending in a newline, or "" with no header and no job). See the module's docstring.

    `uids`: user name to uid, for the UID field and `CANCELLED by UID` (corral keeps no record of who
    cancelled, so it is the job's owner; an unknown user is 0). `steps_only`: ids of jobs to print
    without their job line (`sacct -j 12.batch`).
    """
    # Slurm appends: every -o, then -b's fields, then -l's; the default only when none is given
    text = ",".join(part for part in (fields, brief and BRIEF_FIELDS, long and LONG_FIELDS) if part)
    text = text or DEFAULT_FIELDS
    columns = parse_fields(text)
    lines = [] if noheader else _header(columns, parsable)
    for job in (record for each in jobs for record in records(each, duplicates=duplicates)):
        used = _usage_of(usage, job) if job.get("usage_known", True) else {}
        rows = [] if job.get("id") in steps_only else [_job_values(job, used, now, uids or {})]
        if not allocations and job.get("start_time"):
            if not job.get("interactive"):  # srun's and salloc's jobs run no batch script
                rows.append(_step_values(job, used, now))
            rows.extend(_srun_step_values(job, step, now) for step in job.get("steps") or ())
        for row in rows:
            lines.append(_line(columns, [row.get(name) for name, _, _ in columns], parsable))
    return "".join(line + "\n" for line in lines)


def _header(columns: list[tuple[str, int, str]], parsable: str | None) -> list[str]:
    if parsable is not None:
        return [_line(columns, [name for name, _, _ in columns], parsable)]
    names = "".join(f"{_cut(name, width, mark=False):{'<' if width < 0 else '>'}{abs(width)}} "
                    for name, width, _ in columns)
    return [names, "".join("-" * abs(width) + " " for _, width, _ in columns)]


def _line(columns: list[tuple[str, int, str]], values: list[Any], parsable: str | None) -> str:
    if parsable is not None:
        texts = ["" if value is None else str(value) for value in values]
        return "|".join(texts) + ("|" if parsable else "")
    out = []
    for (_, width, kind), value in zip(columns, values):
        text = "" if value is None else str(value)
        if kind == "s":  # text is cut to the column, its last kept character a `+`; numbers and times never
            text = _cut(text, width, mark=True)
        elif kind == "d":
            text = text[:abs(width)]
        out.append(f"{text:{'<' if width < 0 else '>'}{abs(width)}} ")
    return "".join(out)


def _cut(text: str, width: int, *, mark: bool) -> str:
    size = abs(width)
    if len(text) <= size:
        return text
    return text[:size - 1] + "+" if mark and size else text[:size]


def _job_values(job: Job, used: Usage, now: float, uids: Mapping[str, int]) -> dict[str, Any]:
    state = str(job.get("state") or "")
    started = parse_iso(job.get("start_time"))
    elapsed = _elapsed(job, now)
    cpus = int(job.get("cpus") or 0)
    user = str(job.get("user") or "")
    uid = uids.get(user, 0)
    pending = state == "PENDING" or started is None
    limit = job.get("time_limit_s")
    # Slurm resolves a job's unset limit to its partition's when it starts; an array's waiting rest
    # (`12_[4-9]`) reads resolved once its first tasks started, which is the usual case when it is shown
    remainder = "_[" in str(job.get("ref") or "")
    unset_limit = "Partition_Limit" if pending and not remainder else "UNLIMITED"
    values = _common(job, used, elapsed, started)
    values.update({
        "JobName": job.get("name") or "", "User": user, "UID": uid,
        "Partition": job.get("partition") or "", "QOS": job.get("qos") or "",
        "State": f"CANCELLED by {uid}" if state == "CANCELLED" else state,
        "ExitCode": _job_exit(job),
        "Submit": local_time(parse_iso(job.get("submit_time"))),
        "Eligible": local_time(_eligible(job)),
        "Comment": job.get("comment") or "", "Constraints": job.get("features") or "",
        "NodeList": "None assigned" if pending else job.get("node") or "",
        "AllocTRES": "" if pending else _tres(job, billing=True),
        "ReqTRES": _tres(job, billing=True),
        "ReqMem": _mem(job.get("mem_mb")),
        "Timelimit": unset_limit if limit is None else full_duration(limit),
        "TimelimitRaw": unset_limit if limit is None else str(int(limit) // 60),
        "NNodes": int(job.get("nodes") or 1), "ReqNodes": str(int(job.get("nodes") or 1)),
        "AllocNodes": "0" if pending else str(int(job.get("nodes") or 1)),
        "Reason": job.get("reason") or "None", "Priority": _fixed_priority(job), "WorkDir": job.get("workdir") or "",
        "ReqCPUFreqMin": "Unknown", "ReqCPUFreqMax": "Unknown", "ReqCPUFreqGov": "Unknown", "ReqCPUFreq": "Unknown",
        "NTasks": None, "ReqCPUS": cpus,
        "ConsumedEnergy": "0" if pending else None,  # Slurm's quirk: only a job not yet run reads 0
    })
    return values


def _eligible(job: Job) -> float | None:
    """When it could first start: its submit, or its --begin if later (Slurm's Eligible)."""
    submit, begin = parse_iso(job.get("submit_time")), parse_iso(job.get("begin_time"))
    return max(submit, begin) if submit is not None and begin is not None else submit or begin


def _fixed_priority(job: Job) -> int | None:
    """0 while held, as Slurm's; else an admin's --priority; None: computed, which accounting does not show here."""
    fixed = job.get("fixed_priority")
    return 0 if job.get("held") else None if fixed is None else int(fixed)


def _step_values(job: Job, used: Usage, now: float) -> dict[str, Any]:
    """The `.batch` step of a started job: Slurm's step line, with the job's usage."""
    if job.get("batch_end_time"):  # an earlier run's, which ended before it was requeued
        job = {**job, "end_time": job["batch_end_time"]}
    started = parse_iso(job.get("start_time"))
    elapsed = _elapsed(job, now)
    values = _common(job, used, elapsed, started)
    values.update({
        "JobID": f"{job.get('ref') or job.get('id')}.batch", "JobIDRaw": f"{job.get('id')}.batch",
        "JobName": "batch", "State": job.get("batch_state") or _step_state(job),
        "ExitCode": job.get("batch_exit") or _step_exit(job),
        "Submit": local_time(started), "Eligible": local_time(started),
        "NodeList": job.get("node") or "", "AllocTRES": _tres(job, billing=False),
        "NNodes": 1, "NTasks": 1, "ReqCPUS": int(job.get("cpus") or 0),
        "ReqCPUFreqMin": "0", "ReqCPUFreqMax": "0", "ReqCPUFreqGov": "0", "ReqCPUFreq": "0",
        "AllocNodes": "1", "ConsumedEnergy": "0", "AveCPUFreq": "0", "ConsumedEnergyRaw": 0,
    })
    if job.get("end_time"):  # like Slurm, a step's memory and CPU figures show once it has ended
        values.update(_step_usage(job.get("node") or "", used.get("max_rss_mb"), used.get("cpu_time_s")))
    return values


def _step_usage(node: str, rss_mb: float | None, cpu_s: float | None) -> dict[str, Any]:
    """An ended step's memory and CPU columns (task 0's, on its node: corral's steps run on one node)."""
    values: dict[str, Any] = {}
    if rss_mb is not None:
        kb = _size_k(rss_mb)
        values.update({"MaxRSS": kb, "AveRSS": kb, "MaxRSSNode": node, "MaxRSSTask": 0})
    if cpu_s is not None:
        clock = _cpu_clock(cpu_s, fraction=False)
        values.update({"MinCPU": clock, "AveCPU": clock, "MinCPUNode": node, "MinCPUTask": 0})
    return values


def _srun_step_values(job: Job, step: Mapping[str, Any], now: float) -> dict[str, Any]:
    """A step `srun` ran in the job (`12.0`): its own times, state, exit code and usage, the job's CPUs."""
    started = parse_iso(step.get("start_time"))
    ended = parse_iso(step.get("end_time"))
    elapsed = max((ended if ended is not None else now) - (started or now), 0)
    usage = {"max_rss_mb": step.get("max_rss_mb"), "cpu_time_s": step.get("cpu_time_s")}
    values = _common({**job, "end_time": step.get("end_time")}, usage, elapsed, started)
    ref = f"{job.get('ref') or job.get('id')}.{step.get('step_id')}"
    state = str(step.get("state") or "")
    values.update({
        "JobID": ref, "JobIDRaw": f"{job.get('id')}.{step.get('step_id')}", "JobName": step.get("name") or "",
        "State": state, "ExitCode": exit_code(step.get("exit_code"), step.get("signal")) if ended else "0:0",
        "Submit": local_time(started), "Eligible": local_time(started), "End": local_time(ended),
        "NodeList": job.get("node") or "", "AllocTRES": _tres(job, billing=False),
        "NNodes": 1, "NTasks": int(step.get("ntasks") or 1), "ReqCPUS": int(job.get("cpus") or 0),
        "ReqCPUFreqMin": "Unknown", "ReqCPUFreqMax": "Unknown", "ReqCPUFreqGov": "Unknown", "ReqCPUFreq": "Unknown",
        "AllocNodes": "1", "ConsumedEnergy": "0", "AveCPUFreq": "0", "ConsumedEnergyRaw": 0,
    })
    if ended is not None:
        values.update(_step_usage(job.get("node") or "", step.get("max_rss_mb"), step.get("cpu_time_s")))
    return values


def _common(job: Job, used: Usage, elapsed: float, started: float | None) -> dict[str, Any]:
    """Fields the job line and its step line share."""
    cpus = int(job.get("cpus") or 0)
    ended = parse_iso(job.get("end_time"))
    cpu = used.get("cpu_time_s") if job.get("end_time") else None
    return {
        "JobID": str(job.get("ref") or job.get("id")), "JobIDRaw": str(job.get("id")),
        "Account": job.get("account") or "", "Cluster": None, "AllocCPUS": cpus, "NCPUS": cpus,
        "Elapsed": full_duration(elapsed), "ElapsedRaw": int(elapsed),
        "CPUTime": full_duration(int(elapsed) * cpus), "CPUTimeRAW": int(elapsed) * cpus,
        # a job that ended without starting (cancelled while pending) started "None"; one waiting, "Unknown"
        "Start": local_time(started, "None" if ended is not None else "Unknown"), "End": local_time(ended),
        "TotalCPU": "00:00:00" if cpu is None else _cpu_clock(cpu, fraction=True),
        "Suspended": "00:00:00", "Reserved": None, "ResvCPU": None,
    }


def _elapsed(job: Job, now: float) -> float:
    start = parse_iso(job.get("start_time"))
    if start is None:
        return 0
    end = parse_iso(job.get("end_time"))
    return max((end if end is not None else now) - start, 0)


def _job_exit(job: Job) -> str:
    # Slurm's job line of a job that was stopped (scancel, its time limit) reads 0:0: the signal is the step's
    if job.get("state") in ("CANCELLED", "TIMEOUT"):
        return "0:0"
    return exit_code(job.get("exit_code"), job.get("signal"))


def _step_state(job: Job) -> str:
    """Slurm kills the batch step of a job past its limit, and a script killed by a signal ends as one
    killed: both steps read CANCELLED (captured: TIMEOUT -> CANCELLED 0:15, FAILED 0:9 -> CANCELLED 0:9)."""
    state = str(job.get("state") or "")
    if state == "TIMEOUT" or (state == "FAILED" and job.get("signal") and not job.get("exit_code")):
        return "CANCELLED"
    return state


def _step_exit(job: Job) -> str:
    if job.get("state") in ("CANCELLED", "TIMEOUT") and job.get("start_time"):
        return f"0:{job.get('signal') or 15}"
    return exit_code(job.get("exit_code"), job.get("signal"))


def _tres(job: Job, *, billing: bool) -> str:
    """`billing=2,cpu=2,gres/gpu=1,mem=4000M,node=1`: Slurm sorts TRES by name; a step has no billing."""
    cpus = int(job.get("cpus") or 0)
    gpus = int(job.get("gpus") or 0)
    mem = job.get("mem_mb")
    parts = [f"billing={cpus}"] if billing else []
    parts.append(f"cpu={cpus}")
    shards = int(job.get("gpu_shards") or 0)
    if shards:  # a shard job holds shards of a GPU, not the GPU (Slurm's gres/shard TRES)
        parts.append(f"gres/shard={shards}")
    elif gpus:
        parts.append(f"gres/gpu={gpus}")
    if mem:
        parts.append(f"mem={_mem(mem)}")
    parts.append(f"node={int(job.get('nodes') or 1)}")
    return ",".join(parts)


def _mem(mb: float | None) -> str:
    """Slurm's exact unit conversion: `1000M`, `1G` (1024M), `0`."""
    return _exact_units(int(mb or 0), 1)


def _size_k(mb: float) -> str:
    """MaxRSS in kilobytes as Slurm counts them, `219792K`, in a larger unit only when exact."""
    return _exact_units(int(round(mb * 1024)), 0)


def _exact_units(value: int, unit: int) -> str:
    if not value:
        return "0"
    while value % 1024 == 0 and unit < len(_SIZE_UNITS) - 1:
        value //= 1024
        unit += 1
    return f"{value}{_SIZE_UNITS[unit]}"


def _cpu_clock(seconds: float, *, fraction: bool) -> str:
    """sacct's CPU times: `00:07.911` (minutes, seconds, milliseconds), `00:05:03` (whole seconds under
    an hour), `01:05:03`, `2-01:05:03`. MinCPU/AveCPU are whole seconds (`fraction=False`)."""
    micros = int(round(seconds * 1_000_000))
    whole, micros = divmod(micros, 1_000_000)
    millis = micros // 1000 if fraction else 0  # Slurm truncates to milliseconds
    if whole >= 3600:
        return full_duration(whole)
    minutes, secs = divmod(whole, 60)
    if millis:
        return f"{minutes:02d}:{secs:02d}.{millis:03d}"
    return f"00:{minutes:02d}:{secs:02d}"


def _usage_of(usage: Mapping[Any, Usage] | None, job: Job) -> Usage:
    if not usage:
        return {}
    found = usage.get(job.get("id"))
    if found is None:
        found = usage.get(str(job.get("id")))
    return found or {}


def _atoi(text: str) -> int:
    """C's atoi, as Slurm reads `%N`: leading digits (with a sign), else 0."""
    digits = ""
    for index, char in enumerate(text):
        if char.isdigit() or (index == 0 and char in "+-"):
            digits += char
        else:
            break
    try:
        return int(digits)
    except ValueError:
        return 0
