"""Tables and views for the terminal, Slurm-like."""

from __future__ import annotations

import time

from corral.cli.slurm.values import outside_text
from corral.cli.slurm.values import parse_iso as parse_utc
from corral.cli.terminal import escaped
from corral.core.units.units import format_duration, format_memory

TYPE_CHECKING = False  # `corral queue` and `corral show` format here: typing and datetime cost more than the call
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


def parse_iso(text: str | None) -> float | None:
    if not text:
        return None
    clock = text.partition("T")[2]
    if clock.endswith("Z") or "+" in clock or "-" in clock:  # the API's UTC times
        return parse_utc(text)
    import datetime as dt  # no offset: local time, as datetime reads it

    return dt.datetime.fromisoformat(text).timestamp()


def local_time(text: str | None) -> str:
    ts = parse_iso(text)
    return "-" if ts is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def elapsed(job: dict[str, Any], now: float | None = None) -> str:
    start = parse_iso(job.get("start_time"))
    if start is None:
        return "0:00"
    end = parse_iso(job.get("end_time")) or (now or time.time())
    return format_duration(end - start)


_END_GROUNDS = {"eta": "its tracked run's ETA", "time_limit": "start + time limit"}


def expected_end_text(job: dict[str, Any], *, grounds: bool = True) -> str:
    """When the job should end, and (`grounds`) what says so; "-" when nothing does."""
    end = job.get("expected_end")
    if not end:
        return "-"
    source = job.get("expected_end_source") or "time_limit"
    why = _END_GROUNDS.get(source, source)
    if source == "time_limit" and job["state"] == "PENDING":
        why = "estimated " + why
    return f"{local_time(end)} ({why})" if grounds else local_time(end) + ("*" if source == "eta" else "")


def shared_text(shared: dict[str, Any]) -> str:
    """`shared: 12 (train, alice) 20G, 13 (eval, bob) 10G; 30G budgeted, 50G free`: a shared GPU's jobs."""
    jobs = ", ".join(f"{j['job_ref']} ({j['job_name']}, {j['user']}) {format_memory(j['budget_mb'])}"
                     for j in shared["jobs"])
    outside = f", {format_memory(shared['outside_mb'])} outside corral" if shared.get("outside_mb") else ""
    return (f"shared: {jobs or 'no job'}; {format_memory(shared['budgeted_mb']) if shared['budgeted_mb'] else '0'} "
            f"budgeted{outside}, {format_memory(shared['free_mb']) if shared['free_mb'] else '0'} free")


def gpus_cell(job: dict[str, Any]) -> str:
    if not job["gpus"]:
        return "-"
    if job.get("gpu_share_mb"):  # a sharing job: part of one GPU
        share = f"shard:{job['gpu_shards']}" if job.get("gpu_shards") else "share"
        text = f"{share} {format_memory(job['gpu_share_mb'])}"
        return text + (f" ({','.join(str(i) for i in job['gpu_ids'])})" if job.get("gpu_ids") else "")
    text = f"{job['gpu_type']}:{job['gpus']}" if job.get("gpu_type") else str(job["gpus"])
    if job.get("gpu_ids"):
        text += f" ({','.join(str(i) for i in job['gpu_ids'])})"
    return text


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


@escaped
def queue_table(jobs: Sequence[dict[str, Any]], *, long: bool = False) -> str:
    """`corral queue`; `long` adds each job's expected end after its time limit (* where its run's ETA says so)."""
    now = time.time()
    rows = []
    for job in jobs:
        where = job["node"] if job["state"] == "RUNNING" else f"({job.get('reason') or 'None'})"
        rows.append([
            job["ref"], job["partition"], job["name"][:24], job["user"], job["state"], elapsed(job, now),
            format_duration(job["time_limit_s"]), *([expected_end_text(job, grounds=False)] if long else []),
            gpus_cell(job), str(job["cpus"]), format_memory(job["mem_mb"]), where,
        ])
    headers = ["JOBID", "PARTITION", "NAME", "USER", "STATE", "TIME", "TIME_LIMIT", *(["END_TIME"] if long else []),
               "GPUS", "CPUS", "MEM", "NODE(REASON)"]
    return table(headers, rows)


@escaped
def start_table(jobs: Sequence[dict[str, Any]], *, long: bool = False) -> str:
    """`corral queue --start`; `long` adds when each would end (estimated start + time limit)."""
    rows = [[j["ref"], j["partition"], j["name"][:24], j["user"], j["state"],
             local_time(j.get("estimated_start")) if j.get("estimated_start") else "N/A",
             format_duration(j["time_limit_s"]), *([expected_end_text(j, grounds=False)] if long else []),
             gpus_cell(j), f"({j.get('reason') or 'None'})"] for j in jobs]
    headers = ["JOBID", "PARTITION", "NAME", "USER", "ST", "START_TIME", "TIME_LIMIT", *(["END_TIME"] if long else []),
               "GPUS", "REASON"]
    return table(headers, rows)


@escaped
def priority_table(rows: Sequence[dict[str, Any]]) -> str:
    return table(
        ["JOBID", "PARTITION", "USER", "PRIORITY", "AGE", "FAIRSHARE", "JOBSIZE", "PARTITION", "QOS", "NICE", "REASON"],
        [[str(r.get("ref") or r["id"]), r["partition"], r["user"], str(r["priority"]), f"{r['age']:.3f}", f"{r['fairshare']:.3f}",
          f"{r['job_size']:.3f}", f"{r['partition_factor']:.3f}", f"{r['qos_factor']:.3f}", str(r["nice"]),
          r.get("reason") or "None"] for r in rows],
    )


@escaped
def history_table(jobs: Sequence[dict[str, Any]]) -> str:
    rows = []
    for job in jobs:
        code = "-" if job["exit_code"] is None else str(job["exit_code"])
        if job.get("signal"):
            code += f" (signal {job['signal']})"
        rows.append([
            job["ref"], job["name"][:24], job["user"], job["state"], code, local_time(job["start_time"]),
            elapsed(job), gpus_cell(job),
        ])
    text = table(["JOBID", "NAME", "USER", "STATE", "EXIT", "START", "ELAPSED", "GPUS"], rows)
    notes = [f"job {job['ref']}: {event_text(e)}" for job in jobs for e in job.get("events") or ()
             if e["kind"] in ("preempted", "requeued")]
    return "\n".join([text, *notes])


def event_text(event: dict[str, Any]) -> str:
    """One event of a job's timeline, for a person."""
    kind, at = event["kind"], local_time(event["time"])
    if kind == "preempted":
        by = f" by job {event['by_job']}" if event.get("by_job") else ""
        return f"{at} preempted{by}"
    if kind == "started" and event.get("node"):
        return f"{at} started on {event['node']}"
    if kind == "cancelled" and event.get("by_user"):
        return f"{at} cancelled by {event['by_user']}"
    if kind == "run_again":
        return f"{at} run again (of job {event.get('of_job')}) by {event.get('by_user')}"
    if kind == "ended" and event.get("state"):
        return f"{at} ended {event['state']}"
    return f"{at} {kind}"


@escaped
def job_view(job: dict[str, Any]) -> str:
    command = " ".join(job["command"]) if job["command"] else "(batch script) " + " ".join(job.get("script_args") or [])
    fields = [
        ("JobId", job["ref"]), ("Name", job["name"]), ("User", job["user"]), ("State", job["state"]),
        ("Reason", job.get("reason") or "None"),
        ("ExitCode", "-" if job["exit_code"] is None else job["exit_code"]),
        ("Signal", job.get("signal") or "-"),
        ("Command", command.strip()), ("WorkDir", job["workdir"]),
        ("GPUs", gpus_cell(job)), ("GPUMem", format_memory(job.get("gpu_mem_mb"))),
        ("CPUs", job["cpus"]), ("Tasks", job.get("ntasks") or 1), ("Mem", format_memory(job["mem_mb"])),
        ("TimeLimit", format_duration(job["time_limit_s"])),
        ("Checkpoint", f"every {format_duration(job['checkpoint_interval_s'])} (recommended for this time limit)"),
        ("Nice", job["nice"]), ("Partition", job["partition"]),
        ("Preemptible", "yes" if job.get("preemptible") else "no"), ("Restarts", job.get("restarts", 0)),
        ("QOS", job["qos"]), ("Node", job["node"] or "-"),
        ("SubmitTime", local_time(job["submit_time"])), ("StartTime", local_time(job["start_time"])),
        ("EndTime", local_time(job["end_time"])),
        *([("ExpectedEnd", expected_end_text(job))] if job.get("expected_end") else []),
        ("Elapsed", elapsed(job)),
        ("StdOut", job["stdout_path"]), ("StdErr", job["stderr_path"]),
        ("Labels", ",".join(f"{k}={v}" for k, v in job["labels"].items()) or "-"),
    ]
    if job.get("requirements"):
        fields.insert(11, ("Requirements", job["requirements"]))
    container = job.get("container")
    if container:  # after WorkDir: where the command runs
        fields[9:9] = [("Image", container["image"]),
                       *([("ContainerMounts", ",".join(container["mounts"]))] if container.get("mounts") else []),
                       *([("ContainerWorkDir", container["workdir"])] if container.get("workdir") else [])]
    if job.get("user_log"):
        fields.append(("EventLog", job["user_log"]))
    if job.get("mail_type"):
        fields.append(("Mail", f"{','.join(job['mail_type'])} to {job.get('mail_user') or job['user']}"))
    fields += [("Warning", warning) for warning in job.get("warnings") or []]  # mail it will not get, ...
    events = job.get("events") or []
    fields += [("Events" if i == 0 else "", event_text(e)) for i, e in enumerate(events)]
    width = max(len(k) for k, _ in fields)
    return "\n".join(f"{k.rjust(width)}{':' if k else ' '} {v}" for k, v in fields)


def _drained(drain: dict[str, Any]) -> str:
    return f"{drain['reason']} [{drain['by']}@{local_time(drain['at'])}]"


def _health(health: dict[str, Any] | None) -> str:
    """`health: GPU lost; throttled: thermal (hardware); 2 uncorrectable ECC errors; last: XID 13: ... at 10:02:03`."""
    if not health:
        return ""
    parts = ["GPU lost"] if health.get("lost") else []
    if health.get("throttled"):
        parts.append(f"throttled: {', '.join(health['throttled'])}")
    if health.get("ecc_uncorrected"):
        parts.append(f"{health['ecc_uncorrected']} uncorrectable ECC errors")
    events = health.get("events") or []
    if events:
        parts.append(f"last: {events[-1]['what']} at {local_time(events[-1]['at'])}")
    return "health: " + "; ".join(parts) if parts else ""


@escaped
def nodes_table(nodes: Sequence[dict[str, Any]]) -> str:
    rows = []
    for node in nodes:
        for gpu in node["gpus"]:
            holder = f"{gpu.get('job_ref') or gpu['job_id']} ({gpu['job_name']}, {gpu['user']})" if gpu["job_id"] else "free"
            if gpu.get("shared"):  # jobs that share it, each within its budget; no whole-GPU job lands here
                holder = shared_text(gpu["shared"])
            drained = gpu.get("drained")
            if drained:  # a job on it runs on; nothing new lands there
                holder = ("" if holder == "free" else holder + "; ") + f"{gpu['drain_state']}: {_drained(drained)}"
            outside = gpu.get("outside")
            if outside:  # a process no job of corral's runs (a notebook): no job is placed here meanwhile
                holder = ("" if holder == "free" else holder + "; ") + outside_text(outside)
            health = _health(gpu.get("health"))
            if health:  # what NVML says is wrong with it (a fault drains it: the drain above says so)
                holder = ("" if holder == "free" else holder + "; ") + health
            capability = gpu.get("capability")
            kind = gpu["type"] if gpu.get("parent") is None else f"{gpu['type']} (MIG slice of GPU {gpu['parent']})"
            rows.append([node["name"], str(gpu["index"]), kind, format_memory(gpu["mem_mb"]),
                         "-" if capability is None else f"{capability:.1f}", holder])
    summary = [
        f"{n['name']}: CPUs {n['cpus_alloc']}/{n['cpus']} allocated, memory {format_memory(n['mem_alloc_mb']) if n['mem_alloc_mb'] else 0}"
        f"/{format_memory(n['mem_mb'])} allocated, GPUs {sum(1 for g in n['gpus'] if g['job_id'])}/{len(n['gpus'])} busy"
        for n in nodes
    ]
    summary += [f"{n['name']}: {n['state'].upper()}: {n['reason']}" for n in nodes if n.get("state")]
    summary += [f"{n['name']}: {line}" for n in nodes if (line := links_line(n))]
    summary += [f"{n['name']}: job isolation: {n['isolation_detail'] or n['isolation']}" for n in nodes
                if n.get("isolation")]
    if not rows:
        return "\n".join(summary + ["(no GPUs)"])
    matrices = [links_matrix(n) for n in nodes if n.get("links")]
    return "\n".join(summary) + "\n\n" + table(["NODE", "GPU", "TYPE", "MEMORY", "CC", "JOB"], rows) + "".join(
        "\n\n" + m for m in matrices)


def links_line(node: dict[str, Any]) -> str:
    """`features: fast, nvlink; NVLink groups 0-3, 4-7; GPU feature fast: 0-3` ("" when there is nothing)."""
    groups = sorted({tuple(g["nvlink"]) for g in node["gpus"] if g.get("nvlink")})
    parts = [f"features: {', '.join(node['features'])}"] if node.get("features") else []
    if groups:
        from corral.core.jobspec.arrays import format_ranges  # only here: `corral queue` and the like import no re

        parts.append("NVLink groups " + ", ".join(format_ranges(g) for g in groups))
    parts += [f"GPU feature {name}: {gpus}" for name, gpus in (node.get("gpu_features") or {}).items()]
    return "; ".join(parts)


def links_matrix(node: dict[str, Any]) -> str:
    """How close each two GPUs are, as `nvidia-smi topo -m` prints it (NV: NVLink ... SYS: across sockets)."""
    names = [f"GPU{g['index']}" for g in node["gpus"]]
    rows = [[name, *row] for name, row in zip(names, node["links"])]
    return f"{node['name']}: GPU links (NV: NVLink; PIX, PXB: PCIe switches; PHB: host bridge; NODE: NUMA node; " \
           f"SYS: across sockets)\n" + table(["", *names], rows)


