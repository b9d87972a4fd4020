"""What Slurm's `seff JOBID` prints (contribs/seff/seff, version 2.1, as shipped with 22.05), from the
API's job JSON and its efficiency answer: pure formatting, cheap to import.

    format_seff(job, efficiency, *, cluster, now, group=None) -> str

`job` is a job dict (`corral.core.jobspec.job_fields.JobFields`); `efficiency` is the server's
`/api/v1/jobs/{id}/efficiency` answer (`elapsed_s`, `cpus`, `cpu_time_s`, `max_rss_mb`,
`mem_requested_mb`; None or {} for a job not yet run), `cluster` the cluster's name, `now` (epoch
seconds) the clock for a running job's wall time when the answer has none, `group` the owner's group
name (seff prints `user/group`; the job JSON has no group, so the caller looks it up; default: the user).

seff is a perl script over Slurm's perl API; it is followed line by line, including its quirks: a job
whose step recorded no memory reads `Memory Utilized: 0.00 MB (estimated maximum)` and a per-node
efficiency line (its task count stays 0); the CPU time rounds half a second up; sizes are kilobytes
shown in the largest power-of-1024 unit, `214.64 MB`.
"""

from __future__ import annotations

import math

from corral.cli.slurm.values import parse_iso

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

_PREFIXES = "KMGTPE"


def format_seff(
    job: Mapping[str, Any], efficiency: Mapping[str, Any] | None, *, cluster: str, now: float,
    group: str | None = None,
) -> str:
    """seff's report, ending in a newline. See the module's docstring."""
    eff = efficiency or {}
    state = str(job.get("state") or "")
    user = str(job.get("user") or "")
    ncpus = int(eff.get("cpus") or job.get("cpus") or 0) or 1
    nnodes = int(job.get("nodes") or 0) or 1
    requested_mb = eff.get("mem_requested_mb") if eff.get("mem_requested_mb") is not None else job.get("mem_mb")
    reqmem = float(requested_mb or 0) * 1024 * nnodes  # kilobytes; corral's memory is per node, like --mem
    walltime = _walltime(job, eff, now)
    cpu_time = float(eff.get("cpu_time_s") or 0)
    cput = int(cpu_time) + int(cpu_time - int(cpu_time) + 0.5)
    rss_mb = eff.get("max_rss_mb")
    mem = float(rss_mb) * 1024 if rss_mb else 0.0
    ntasks = 1 if mem else 0  # seff takes the task count from the step that reported the most memory

    lines = [f"Job ID: {job.get('id')}"]
    if job.get("array_job_id") is not None:
        lines.append(f"Array Job ID: {job.get('array_job_id')}_{job.get('array_task_id')}")
    lines += [f"Cluster: {cluster}", f"User/Group: {user}/{group or user}"]
    if state in ("PENDING", "RUNNING"):
        lines.append(f"State: {state}")
    else:
        lines.append(f"State: {state} (exit code {int(job.get('exit_code') or 0)})")
    if ncpus == 1:
        lines.append(f"Cores: {ncpus}")
    else:
        lines += [f"Nodes: {nnodes}", f"Cores per node: {ncpus // nnodes}"]
    if state == "PENDING":
        lines.append("Efficiency not available for jobs in the PENDING state.")
        return "".join(line + "\n" for line in lines)
    corewalltime = walltime * ncpus
    cpu_eff = cput / corewalltime * 100 if corewalltime else 0.0
    mem_eff = mem / reqmem * 100 if reqmem else 0.0
    lines += [
        f"CPU Utilized: {_time(cput)}",
        f"CPU Efficiency: {cpu_eff:.2f}% of {_time(corewalltime)} core-walltime",
        f"Job Wall-clock time: {_time(walltime)}",
    ]
    if ntasks == 1:
        lines += [f"Memory Utilized: {_kbytes(mem)}", f"Memory Efficiency: {mem_eff:.2f}% of {_kbytes(reqmem)}"]
    else:
        lines += [f"Memory Utilized: {_kbytes(mem)} (estimated maximum)",
                  f"Memory Efficiency: {mem_eff:.2f}% of {_kbytes(reqmem)} ({_kbytes(reqmem / nnodes)}/node)"]
    if state == "RUNNING":
        lines.append(f"WARNING: Efficiency statistics may be misleading for {state} jobs.")
    return "".join(line + "\n" for line in lines)


def _walltime(job: Mapping[str, Any], eff: Mapping[str, Any], now: float) -> int:
    if eff.get("elapsed_s") is not None:
        return int(eff["elapsed_s"])
    start = parse_iso(job.get("start_time"))
    if start is None:
        return 0
    end = parse_iso(job.get("end_time"))
    return int(max((end if end is not None else now) - start, 0))


def _time(seconds: int) -> str:
    """seff's time2str: `HH:MM:SS`, with `D-` from a day."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return (f"{days}-" if days else "") + f"{hours:02d}:{minutes:02d}:{secs:02d}"


def _kbytes(kbytes: float) -> str:
    """seff's kbytes2str: `214.64 MB`, `1.00 GB`, `512.00 KB`; nothing is `0.00 MB`."""
    if kbytes == 0:
        return "0.00 MB"
    exp = int(math.log(kbytes) / math.log(1024))
    return f"{kbytes / 1024 ** exp:.2f} {_PREFIXES[exp] if 0 <= exp < len(_PREFIXES) else ''}B"
