"""`scontrol show job|node|partition|config|hostnames` in Slurm 22.05's `Key=Value` layout, from corral's API JSON.

Pure functions (the caller fetches the JSON and prints the text; each returns what Slurm writes to stdout):

- `show_jobs(jobs, now=, one_liner=, ...)`: `scontrol show job [ID] [-o]`, one record per job (a record is
  followed by a blank line, or is one line with `-o`); `NO_JOBS` when there are none.
- `show_job(job, now=, ...)`: one record of the above.
- `show_nodes(nodes, partitions=, ...)` / `show_node(node, ...)`: `scontrol show node [NAME] [-o]`.
- `show_partitions(partitions, nodes, ...)` / `show_partition(...)`: `scontrol show partition [NAME] [-o]`.
- `show_config(settings, now=)` (in `scontrol_config`): `scontrol show config`: Slurm's header, its `Key = Value` rows in its order
  (corral's values where corral has one, Slurm's defaults for the rest) and the controller's ping line.
- `hostnames(text)` (in `hostlist`, with `expand_hostlist` / `compress_hostlist`, Slurm's host lists both ways):
  `scontrol show hostnames node[1-3,5]`, one name a line.
- `node_state(node)`: the node's Slurm state (IDLE, MIXED, ALLOCATED, DRAINED, ...), shared with sinfo.

Inputs: jobs as the API's job JSON (`corral.core.jobspec.job_fields.JobFields`); nodes as `GET /api/v1/nodes`
answers (name, arch, cpus, cpus_alloc, mem_mb, mem_alloc_mb, gpus; optional `state` such as "drain" or
"down" and `reason`); partitions as dicts of corral's `[partitions.NAME]` settings (name, max_time_s,
default_time_s, allowed_users, allowed_groups, tier, priority_factor; optional `default`, `nodes`).
"""

from __future__ import annotations

from corral.cli.slurm.hostlist import compress_hostlist, expand_hostlist
from corral.cli.slurm.values import exit_code, full_duration, local_time, outside_text, parse_iso, size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any

    Job = Mapping[str, Any]
    Node = Mapping[str, Any]
    Partition = Mapping[str, Any]
    UserIds = Callable[[str], tuple[int, str, int]]

SLURM_VERSION = "22.05.8"
NO_JOBS = "No jobs in the system\n"
INVALID_JOB = "slurm_load_jobs error: Invalid job id specified\n"
NULL = "(null)"


# ---------------------------------------------------------------- jobs

def show_jobs(jobs: Iterable[Job], *, now: float, one_liner: bool = False, user_ids: UserIds | None = None,
              default_partition: str = "default", alloc_node: str = "localhost") -> str:
    """`scontrol show job [-o]`: each job's record; `NO_JOBS` for none."""
    text = "".join(show_job(job, now=now, one_liner=one_liner, user_ids=user_ids,
                            default_partition=default_partition, alloc_node=alloc_node) for job in jobs)
    return text or NO_JOBS


def show_job(job: Job, *, now: float, one_liner: bool = False, user_ids: UserIds | None = None,
             default_partition: str = "default", alloc_node: str = "localhost") -> str:
    """One job's record, as Slurm's `slurm_sprint_job_info`.

    Its Priority is the job's own (`priority`: what sprio gives while it waits, 0 held, the one it started with
    once it runs); where the server does not know it (a job waiting for its dependency), a fixed --priority, else 1.

    Args:
        user_ids: user name -> (uid, group name, gid); by default the local password and group files.
        alloc_node: the host the job was submitted from (Slurm's AllocNode), the server's host.
    """

    state = job["state"]
    pending = state == "PENDING"
    running = state in ("RUNNING", "COMPLETING", "SUSPENDED")
    submit = parse_iso(job.get("submit_time"))
    start = parse_iso(job.get("start_time"))
    end = parse_iso(job.get("end_time"))
    limit_s = job.get("time_limit_s")
    limit_min = None if limit_s is None else -(-int(limit_s) // 60)
    held = bool(job.get("held"))
    begin = parse_iso(job.get("begin_time"))
    if pending:
        run_s = 0.0
        start = _later(parse_iso(job.get("estimated_start")), begin)
        end = start + limit_min * 60 if start is not None and limit_min is not None else None
    elif start is None:
        run_s = 0.0
    else:
        run_s = (now if running or end is None else end) - start
        if running:
            end = start + limit_min * 60 if limit_min is not None else None
    eligible = None if held or (pending and job.get("dependency")) else submit
    if pending and begin is not None and not job.get("dependency"):
        eligible = _later(submit, begin)  # Slurm's eligible (and accruing) time is the --begin, held or not
    if not pending and start is not None:
        eligible = start if eligible is None else eligible
    uid, group, gid = (user_ids or _user_ids)(job["user"])
    gpus = int(job.get("gpus") or 0)
    shards = int(job.get("gpu_shards") or 0)
    nodes = int(job.get("nodes") or 1)
    cpus = int(job.get("cpus") or 1)
    node = job.get("node") or ""
    reason = job.get("reason") or "None"
    priority = job.get("priority")
    if priority is None:
        fixed = job.get("fixed_priority")
        priority = 0 if held else 1 if fixed is None else int(fixed)
    command = " ".join(job.get("command") or []) or NULL

    first = f"JobId={job['id']} "
    if job.get("array_job_id") is not None:
        throttle = _throttle(job.get("array"))
        task = job.get("array_task_id")
        if task is None:
            ref = str(job.get("ref") or "")
            task = ref[ref.find("[") + 1:ref.rfind("]")] if "[" in ref else (job.get("array") or "")
            if throttle and "%" not in str(task):
                task = f"{task}%{throttle}"
        first += f"ArrayJobId={job['array_job_id']} ArrayTaskId={task} "
        if throttle:
            first += f"ArrayTaskThrottle={throttle} "
    lines = [
        first + f"JobName={job['name']}",
        f"UserId={job['user']}({uid}) GroupId={group}({gid}) MCS_label=N/A",
        f"Priority={priority} Nice={job.get('nice') or 0} Account={job.get('account') or NULL} "
        f"QOS={job.get('qos') or 'normal'}",
        f"JobState={state} Reason={_underscored(reason)} Dependency={job.get('dependency') or NULL}",
        f"Requeue={0 if job.get('requeue') is False else 1} Restarts={job.get('restarts') or 0} BatchFlag=1 Reboot=0 "
        f"ExitCode={exit_code(job.get('exit_code'), job.get('signal'))}",
        f"RunTime={full_duration(run_s)} TimeLimit={_limit(limit_min)} TimeMin={_time_min(job.get('time_min_s'))}",
        f"SubmitTime={local_time(submit)} EligibleTime={local_time(eligible)}",
        f"AccrueTime={local_time(eligible if begin is not None and pending else None if held else submit)}",
        f"StartTime={local_time(start)} EndTime={local_time(end)} "
        f"Deadline={local_time(parse_iso(job.get('deadline')), 'N/A')}",
        f"SuspendTime=None SecsPreSuspend=0 LastSchedEval={local_time(start if start and not pending else submit)} "
        "Scheduler=Main",
        f"Partition={job.get('partition') or default_partition} AllocNode:Sid={alloc_node}:0",
        f"ReqNodeList={compress_hostlist(job.get('nodelist') or ()) or NULL} "
        f"ExcNodeList={compress_hostlist(job.get('exclude') or ()) or NULL}",
        f"NodeList={node}",
    ]
    if node:
        lines.append(f"BatchHost={node.split(',')[0]}")
    mem = size(job.get("mem_mb"))
    ntasks = int(job.get("ntasks") or 1)
    per_task = max(1, cpus // max(1, -(-ntasks // nodes)))  # a node's CPUs shared among its tasks
    lines += [
        f"NumNodes={nodes} NumCPUs={cpus * nodes} NumTasks={ntasks} CPUs/Task={per_task} ReqB:S:C:T=0:0:*:*",
        f"TRES=cpu={cpus * nodes},mem={size((job.get('mem_mb') or 0) * nodes)},node={nodes},billing={cpus * nodes}"
        + (f",gres/shard={shards}" if shards else ""),
        f"Socks/Node=* NtasksPerN:B:S:C={job.get('ntasks_per_node') or 0}:0:*:* CoreSpec=*",
        f"MinCPUsNode={per_task if ntasks > 1 else cpus} MinMemoryNode={mem} MinTmpDiskNode=0",
        f"Features={job.get('features') or NULL} DelayBoot=00:00:00",
        *([f"Reservation={job['reservation']}"] if job.get("reservation") else []),
        f"OverSubscribe={'NO' if job.get('exclusive') else 'OK'} Contiguous=0 Licenses={NULL} Network={NULL}",
        f"Command={command}",
        f"WorkDir={job.get('workdir') or ''}",
    ]
    if job.get("comment"):
        lines.append(f"Comment={job['comment']} ")
    lines += [
        f"StdErr={job.get('stderr_path') or ''}",
        "StdIn=/dev/null",
        f"StdOut={job.get('stdout_path') or ''}",
        "Power=",
    ]
    if job.get("mail_type"):
        lines.append(f"MailUser={job.get('mail_user') or job['user']} MailType={mail_type_text(job['mail_type'])}")
    if shards:
        lines.append(f"TresPerNode=gres:shard:{shards}")
    elif gpus:
        gpu_type = job.get("gpu_type")
        kind = f"{gpu_type}:" if _simple(gpu_type) else ""
        per_task_gpus = job.get("gpus_per_task")
        lines.append(f"TresPerTask=gres:gpu:{kind}{per_task_gpus}" if per_task_gpus else f"TresPerNode=gres:gpu:{kind}{gpus}")
    return record(lines, one_liner, trailing=True)


# Slurm's print_mail_type order; its ALL adds STAGE_OUT, which corral's ALL (these five) stands for too
_MAIL_ORDER = ("ARRAY_TASKS", "INVALID_DEPEND", "BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT", "TIME_LIMIT_50",
               "TIME_LIMIT_80", "TIME_LIMIT_90", "TIME_LIMIT")
_MAIL_ALL = frozenset({"BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND"})


def mail_type_text(types: Iterable[str]) -> str:
    """A job's --mail-type as Slurm prints it (`END,FAIL`; ALL as `INVALID_DEPEND,BEGIN,...,STAGE_OUT`)."""
    chosen = set(types)
    if _MAIL_ALL <= chosen:
        chosen.add("STAGE_OUT")
    return ",".join(kind for kind in _MAIL_ORDER if kind in chosen) or "NONE"


def _later(first: float | None, second: float | None) -> float | None:
    if first is None or second is None:
        return second if first is None else first
    return max(first, second)


def _time_min(seconds: int | None) -> str:
    """--time-min as Slurm shows it, in whole minutes (N/A: none)."""
    return "N/A" if not seconds else full_duration(-(-int(seconds) // 60) * 60)


def _throttle(array: str | None) -> int:
    if not array or "%" not in array:
        return 0
    tail = array.rsplit("%", 1)[1]
    return int(tail) if tail.isdigit() else 0


def _limit(minutes: int | None) -> str:
    return "UNLIMITED" if minutes is None else full_duration(minutes * 60)


def _underscored(text: str) -> str:
    """Slurm puts `_` for white space in a reason, so the `Key=Value` pairs split on spaces."""
    return "_".join(text.split(" ")).replace("\t", "_").replace("\n", "_")


def _simple(text: str | None) -> bool:
    """A name Slurm's gres syntax can hold (`gpu:a100:2`): no spaces, colons or commas."""
    return bool(text) and not any(c in str(text) for c in " :,=")


def show_steps(job: Job, steps: Iterable[Mapping[str, Any]], *, batch: bool = True, one_liner: bool = False,
               user_ids: UserIds | None = None) -> str:
    """`scontrol show step` for a running job: its batch step (a batch script's; `batch`: shown), then each
    srun step still running, as Slurm 22.05 prints them (ended steps are not shown)."""

    uid = (user_ids or _user_ids)(str(job.get("user") or ""))[0]
    ref = job.get("ref") or job.get("id")
    node = job.get("node") or ""
    partition = job.get("partition") or "default"
    records = []
    if batch and not job.get("command"):
        records.append(record([
            f"StepId={ref}.batch UserId={uid} StartTime={local_time(parse_iso(job.get('start_time')))} "
            "TimeLimit=UNLIMITED",
            f"State=RUNNING Partition={partition} NodeList={node}",
            "Nodes=1 CPUs=0 Tasks=1 Name=batch Network=(null)", "TRES=(null)", "ResvPorts=(null)",
            "CPUFreqReq=Default", "SrunHost:Pid=(null):0"], one_liner))
    tres = f"cpu={job.get('cpus') or 0},mem={size(job.get('mem_mb') or 0)},node=1"
    for step in steps:
        if step.get("state") != "RUNNING":
            continue
        records.append(record([
            f"StepId={ref}.{step.get('step_id')} UserId={uid} "
            f"StartTime={local_time(parse_iso(step.get('start_time')))} TimeLimit=UNLIMITED",
            f"State=RUNNING Partition={partition} NodeList={node}",
            f"Nodes=1 CPUs={job.get('cpus') or 0} Tasks={step.get('ntasks')} Name={step.get('name')} Network=(null)",
            f"TRES={tres}", "ResvPorts=(null)", "CPUFreqReq=Default Dist=Block", f"SrunHost:Pid={node}:0"], one_liner))
    return "".join(records)


def record(lines: Sequence[str], one_liner: bool, *, trailing: bool = False) -> str:
    """Slurm's record: lines joined by `\\n   ` (by a space with -o), then a blank line (a newline with -o).

    `trailing`: a job's record ends with one more separator (Slurm's job printer adds it after the last key).
    """
    sep = " " if one_liner else "\n   "
    text = sep.join(lines) + (sep if trailing else "")
    return text + ("\n" if one_liner else "\n\n")


def _user_ids(user: str) -> tuple[int, str, int]:
    import grp
    import pwd

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return (4294967294, "nobody", 4294967294)
    try:
        group = grp.getgrgid(entry.pw_gid).gr_name
    except KeyError:
        group = str(entry.pw_gid)
    return (entry.pw_uid, group, entry.pw_gid)


# ---------------------------------------------------------------- nodes

NODE_STATES = ("IDLE", "MIXED", "ALLOCATED", "DRAINED", "DRAINING", "DOWN")


def node_state(node: Node) -> str:
    """The node's state in Slurm's words: IDLE, MIXED, ALLOCATED (by its CPUs, as Slurm counts), or
    DRAINED / DRAINING / DOWN where the node dict says `state` "drain" or "down"."""
    declared = str(node.get("state") or "").lower()
    alloc, total = int(node.get("cpus_alloc") or 0), int(node.get("cpus") or 0)
    if declared.startswith("down"):
        return "DOWN"
    if declared in ("draining", "drained"):  # corral says which (its alloc counts jobs on any of the node)
        return declared.upper()
    if declared.startswith("drain"):
        return "DRAINING" if alloc else "DRAINED"
    if alloc == 0:
        return "IDLE"
    return "ALLOCATED" if alloc >= total else "MIXED"


def gres(node: Node) -> str:
    """The node's `Gres=` (sinfo's %G): `gpu:a100:4`, one entry a type (`gpu:a100:1,gpu:3g.40gb:1,gpu:1g.10gb:2`
    with MIG slices, their profiles their types, as Slurm's gres.conf names them); `gpu:4` where a type is no
    name gres syntax can hold; then `shard:16` where it shares GPUs by shards (`[node] shards_per_gpu`); `(null)`."""
    gpus = node.get("gpus") or []
    if not gpus:
        return NULL
    counts: dict[str | None, int] = {}
    for gpu in sorted(gpus, key=lambda g: (g.get("parent") is not None, g.get("index") or 0)):
        counts[gpu.get("type")] = counts.get(gpu.get("type"), 0) + 1
    text = (",".join(f"gpu:{kind}:{count}" for kind, count in counts.items())
            if all(_simple(kind) for kind in counts) else f"gpu:{len(gpus)}")
    shards = int(node.get("shards_per_gpu") or 0) * len(gpus)
    return f"{text},shard:{shards}" if shards else text


def outside_comment(node: Node) -> str:
    """`GPU 0 in use outside corral by alice (pid 4242, 2048 MB)`, for each GPU a process outside corral uses."""
    return "; ".join(f"GPU {gpu['index']} {outside_text(gpu['outside'])}" for gpu in node.get("gpus") or []
                     if gpu.get("outside"))


def outside_reason(node: Node) -> Node:
    """The node, with its GPUs in use outside corral as its reason (sinfo -R) where nothing else gives one;
    when: the earliest of those processes' `since`."""
    comment = outside_comment(node)
    if node.get("reason") or not comment:
        return node
    since = min(p["since"] for g in node.get("gpus") or [] for p in g.get("outside") or [])
    return {**node, "reason": comment, "reason_by": None, "reason_at": since}


def show_nodes(nodes: Iterable[Node], *, partitions: Sequence[str], now: float, one_liner: bool = False,
               boot_time: float | None = None, start_time: float | None = None, os_name: str | None = None,
               cpu_load: float | None = None) -> str:
    """`scontrol show node [-o]`: each node's record."""
    return "".join(show_node(node, partitions=partitions, now=now, one_liner=one_liner, boot_time=boot_time,
                             start_time=start_time, os_name=os_name, cpu_load=cpu_load) for node in nodes)


def show_node(node: Node, *, partitions: Sequence[str], now: float, one_liner: bool = False,
              boot_time: float | None = None, start_time: float | None = None, os_name: str | None = None,
              cpu_load: float | None = None) -> str:
    """One node's record, as Slurm's `slurm_sprint_node_table`.

    corral counts no sockets or cores: a node shows as Slurm's testbed does, one core per socket and
    one thread per core (Sockets = CPUs).

    Args:
        partitions: the partitions holding the node (in corral, all of them).
        boot_time, start_time: the machine's boot and the server's start (Slurm's SlurmdStartTime); None is `None`.
        os_name: `uname -sr -v` of the node; None leaves the OS line out, as Slurm does for a node that did not say.
        cpu_load: the 1-minute load average; None is `N/A`.
    """
    name = node["name"]
    cpus = int(node.get("cpus") or 0)
    alloc = int(node.get("cpus_alloc") or 0)
    mem, mem_alloc = int(node.get("mem_mb") or 0), int(node.get("mem_alloc_mb") or 0)
    arch = str(node.get("arch") or "x86_64")
    arch = "x86_64" if arch.upper() == "X86_64" else arch
    alloc_tres = ",".join(part for part in (f"cpu={alloc}" if alloc else "",
                                            f"mem={size(mem_alloc)}" if mem_alloc else "") if part)
    lines = [
        f"NodeName={name} Arch={arch} CoresPerSocket=1 ",
        f"CPUAlloc={alloc} CPUEfctv={cpus} CPUTot={cpus} CPULoad={'N/A' if cpu_load is None else f'{cpu_load:.2f}'}",
        f"AvailableFeatures={','.join(node.get('features') or ()) or NULL}",
        f"ActiveFeatures={','.join(node.get('features') or ()) or NULL}",
        f"Gres={gres(node)}",
        f"NodeAddr={name} NodeHostName={name} Version={SLURM_VERSION}",
    ]
    if os_name:
        lines.append(f"OS={os_name} ")
    lines += [
        f"RealMemory={mem} AllocMem={mem_alloc} FreeMem=N/A Sockets={cpus} Boards=1",
        f"State={node_state(node)} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
    ]
    if partitions:
        lines.append(f"Partitions={','.join(partitions)} ")
    lines += [
        f"BootTime={local_time(boot_time, 'None')} SlurmdStartTime={local_time(start_time, 'None')}",
        f"LastBusyTime={local_time(now if alloc else start_time)}",
        f"CfgTRES=cpu={cpus},mem={size(mem)},billing={cpus}",
        f"AllocTRES={alloc_tres}",
        "CapWatts=n/a",
        "CurrentWatts=0 AveWatts=0",
        "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
    ]
    outside = outside_comment(node)
    if outside:  # Slurm's free-text node comment: corral's GPUs that a process outside it uses
        lines.append(f"Comment={outside}")
    if node.get("reason"):
        by = f" [{node['reason_by']}@{local_time(parse_iso(node.get('reason_at')))}]" if node.get("reason_by") else ""
        lines.append(f"Reason={node['reason']}{by}")
    return record(lines, one_liner)


# ---------------------------------------------------------------- partitions

def show_partitions(partitions: Iterable[Partition], nodes: Sequence[Node], *, default: str | None = None,
                    one_liner: bool = False) -> str:
    """`scontrol show partition [-o]`: each partition's record; `default` names the default partition
    (else a partition's own `default` key says)."""
    return "".join(show_partition(p, nodes, default=default, one_liner=one_liner) for p in partitions)


def show_partition(partition: Partition, nodes: Sequence[Node], *, default: str | None = None,
                   one_liner: bool = False) -> str:
    """One partition's record, as Slurm's `slurm_sprint_partition_info`.

    corral's partitions are not sets of nodes: each holds every node (unless it lists `nodes`).
    Its `allowed_users` show as AllowAccounts (on corral the accounts are the users).
    """
    name = partition["name"]
    members = partition_nodes(partition, nodes)
    is_default = partition.get("default") if default is None else name == default
    groups = partition.get("allowed_groups")
    users = partition.get("allowed_users")
    cpus = sum(int(n.get("cpus") or 0) for n in members)
    mem = sum(int(n.get("mem_mb") or 0) for n in members)
    default_time = partition.get("default_time_s")
    max_time = partition.get("max_time_s")
    lines = [
        f"PartitionName={name}",
        f"AllowGroups={','.join(sorted(groups)) if groups else 'ALL'} "
        f"AllowAccounts={','.join(sorted(users)) if users else 'ALL'} AllowQos=ALL",
        f"AllocNodes=ALL Default={'YES' if is_default else 'NO'} QoS=N/A",
        f"DefaultTime={'NONE' if default_time is None else full_duration(default_time)} DisableRootJobs=NO "
        "ExclusiveUser=NO GraceTime=0 Hidden=NO",
        f"MaxNodes=UNLIMITED MaxTime={'UNLIMITED' if max_time is None else full_duration(max_time)} MinNodes=0 "
        "LLN=NO MaxCPUsPerNode=UNLIMITED",
        f"Nodes={compress_hostlist(n['name'] for n in members)}",
        f"PriorityJobFactor={partition.get('priority_factor', 1)} PriorityTier={partition.get('tier', 1)} "
        "RootOnly=NO ReqResv=NO OverSubscribe=NO",
        "OverTimeLimit=NONE PreemptMode=OFF",
        f"State=UP TotalCPUs={cpus} TotalNodes={len(members)} SelectTypeParameters=NONE",
        f"JobDefaults={NULL}",
        "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED",
        f"TRES=cpu={cpus},mem={size(mem)},node={len(members)},billing={cpus}",
    ]
    return record(lines, one_liner)


def partition_nodes(partition: Partition, nodes: Sequence[Node]) -> list[Node]:
    """The nodes of a partition: those it lists, else all."""
    listed = partition.get("nodes")
    if not listed:
        return list(nodes)
    wanted = set(expand_hostlist(listed) if isinstance(listed, str) else listed)
    return [n for n in nodes if n["name"] in wanted]
