"""The values of squeue's field codes (`%i`, `%T`, `%M`, `%R`...) for one job, as Slurm 22.05 spells them:
`field_value` and what it reads (times, reasons, node lists, sizes). Pure and cheap to import.
"""

from __future__ import annotations

from corral.cli.slurm.values import UNLIMITED, duration, local_time, parse_iso, state_code

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

YEAR_SECONDS = 365 * 24 * 3600
UNCUT = frozenset("MlLN")
PENDING, RUNNING = "PENDING", "RUNNING"


def start_time(job: Mapping[str, object]) -> float | None:
    """Slurm's start_time: when it started, or for a pending job when it is expected to."""
    if job.get("state") == PENDING:
        estimate, begin = parse_iso(as_text(job.get("estimated_start"))), begin_time(job)
        return max(estimate, begin) if estimate and begin else estimate or begin  # not before its --begin
    return parse_iso(as_text(job.get("start_time")))


def begin_time(job: Mapping[str, object]) -> float | None:
    """sbatch's --begin, if it asked for one."""
    return parse_iso(as_text(job.get("begin_time")))


def field_value(code: str, job: Mapping[str, object], now: float, node_name: str) -> tuple[str | None, bool]:
    """The text Slurm prints for one job's column, and whether Slurm truncates it to the width."""
    cut = code not in UNCUT
    state = str(job.get("state") or "")
    if code == "i":
        return str(job.get("ref") or job.get("id")), cut
    if code == "A":
        return str(job.get("id")), cut
    if code == "F":
        array_job = job.get("array_job_id")
        return str(array_job if array_job is not None else job.get("id")), cut
    if code == "K":
        return _array_task_text(job), cut
    if code == "j":
        return as_text(job.get("name")), cut
    if code == "u":
        return as_text(job.get("user")), cut
    if code == "a":
        return as_text(job.get("account")) or as_text(job.get("user")), cut
    if code == "P":
        return as_text(job.get("partition")), cut
    if code == "q":
        return as_text(job.get("qos")) or "normal", cut
    if code == "T":
        return state, cut
    if code == "t":
        return state_code(state), cut
    if code == "M":
        return _secs(used_seconds(job, now)), cut
    if code == "l":
        limit = job.get("time_limit_s")
        return (UNLIMITED if limit is None else _secs((as_int(limit) // 60) * 60)), cut
    if code == "L":
        limit = job.get("time_limit_s")
        return (UNLIMITED if limit is None else _secs((as_int(limit) // 60) * 60 - used_seconds(job, now))), cut
    if code == "D":
        return str(as_int(job.get("nodes")) or 1), cut
    if code in "Cc":
        return str(as_int(job.get("cpus")) or 1), cut
    if code == "m":
        return mem_size(as_int(job.get("mem_mb"))), cut
    if code == "d":
        return "0", cut
    if code == "b":
        return _tres_per_node(job), cut
    if code == "tres-alloc":
        return _tres_alloc(job), cut
    if code == "R":
        if state in _REASON_STATES:
            return f"({_reason(job)})", True
        return node_list(job, node_name), False
    if code == "r":
        return _reason(job), cut
    if code == "N":
        return node_list(job, node_name) or "", False
    if code == "S":
        return _time(start_time(job)), cut
    if code == "e":
        end = end_time(job, now)
        if job.get("time_limit_s") is None and end is not None and end > now:
            return "NONE", cut
        return _time(end), cut
    if code == "V":
        return _time(parse_iso(as_text(job.get("submit_time")))), cut
    if code == "eligibletime":
        submit, begin = parse_iso(as_text(job.get("submit_time"))), begin_time(job)
        if begin and job.get("state") == PENDING:
            return _time(max(begin, submit or 0.0)), cut
        return ("N/A" if job.get("held") and job.get("state") == PENDING else _time(submit)), cut
    if code == "deadline":
        return _time(parse_iso(as_text(job.get("deadline")))), cut
    if code == "timemin":
        return _secs((as_int(job.get("time_min_s")) + 59) // 60 * 60), cut
    if code == "pendingtime":
        begin = parse_iso(as_text(job.get("start_time")))
        submit = parse_iso(as_text(job.get("submit_time"))) or now
        return str(int((begin if begin and begin < now else now) - submit)), cut
    if code == "E":
        return _dependency(job), cut
    if code in "pQ":
        priority = as_int(job.get("priority"))
        return (f"{priority / 0xFFFFFFFF:16.14f}" if code == "p" else str(priority)), cut
    if code == "y":
        return str(as_int(job.get("nice"))), cut
    if code == "Z":
        return as_text(job.get("workdir")), cut
    if code == "o":
        command = job.get("command")
        return (" ".join(str(word) for word in command) if isinstance(command, list) and command else None), cut
    if code == "stdout":
        return as_text(job.get("stdout_path")), cut
    if code == "stderr":
        return as_text(job.get("stderr_path")), cut
    if code == "Y":
        return _sched_nodes(job, now, node_name), False
    if code in "kfwv":
        return as_text(job.get({"k": "comment", "f": "features", "v": "reservation"}.get(code, ""))) or None, cut
    if code in "nx":
        return _host_list(job.get("nodelist" if code == "n" else "exclude")), cut
    if code == "h":
        return ("NO" if job.get("exclusive") else "OK"), cut
    if code == "O":
        return "0", cut
    if code in "HIJ":
        return "*", cut
    if code == "z":
        return "*:*:*", cut
    if code == "tres-per-job":
        return "N/A", cut
    if code == "exit_code":
        return str(as_int(job.get("exit_code"))), cut
    if code == "restartcnt":
        return str(as_int(job.get("restarts"))), cut
    if code == "B":
        return (node_list(job, node_name) or "n/a"), cut
    return "N/A", cut


# the states whose NODELIST(REASON) is the reason, not the node (Slurm's _print_job_reason_list)
_REASON_STATES = frozenset({PENDING, "TIMEOUT", "OUT_OF_MEMORY", "DEADLINE", "FAILED"})


# what Slurm gives as the reason of a job that ended so, where corral's record names none
_END_REASONS = {"FAILED": "NonZeroExitCode", "TIMEOUT": "TimeLimit", "OUT_OF_MEMORY": "OutOfMemory",
                "DEADLINE": "DeadLine", "NODE_FAIL": "NodeDown"}


def _reason(job: Mapping[str, object]) -> str:
    reason = as_text(job.get("reason"))
    if reason and reason != "None":
        return reason
    return _END_REASONS.get(str(job.get("state")), "None")


def node_list(job: Mapping[str, object], node_name: str) -> str | None:
    if job.get("state") == PENDING:
        return ""
    node = as_text(job.get("node"))
    return node or (node_name if job.get("start_time") else "")


def _sched_nodes(job: Mapping[str, object], now: float, node_name: str) -> str | None:
    """Where backfill plans to start a pending job; none where it has no plan (Slurm's year-out estimate)
    or where the start is the job's own --begin."""
    begin = start_time(job)
    if job.get("state") != PENDING or not begin or begin - now > YEAR_SECONDS - 86400 or job.get("reason") == "BeginTime":
        return None
    return node_name


def _host_list(names: object) -> str:
    """--nodelist / --exclude as Slurm's ranged host list (empty: none)."""
    if not names or not isinstance(names, list):
        return ""
    from corral.cli.slurm.hostlist import compress_hostlist  # only for jobs that named nodes

    return compress_hostlist(str(name) for name in names) if isinstance(names, list) else ""


def _array_task_text(job: Mapping[str, object]) -> str:
    ref = str(job.get("ref") or "")
    if "_[" in ref:
        return ref.partition("_[")[2].rstrip("]")
    task = job.get("array_task_id")
    return "N/A" if task is None else str(task)


def _tres_per_node(job: Mapping[str, object]) -> str:
    """Slurm 22.05's TresPerNode as --gres writes it: `gres:gpu:2`, `gres:gpu:a100:2`, `gres:shard:2`; no GPUs N/A."""
    shards = as_int(job.get("gpu_shards"))
    if shards:
        return f"gres:shard:{shards}"
    gpus = as_int(job.get("gpus"))
    if not gpus:
        return "N/A"
    nodes = as_int(job.get("nodes")) or 1
    kind = as_text(job.get("gpu_type"))
    per_node = gpus // nodes if gpus % nodes == 0 else gpus
    return f"gres:gpu:{kind}:{per_node}" if kind else f"gres:gpu:{per_node}"


def _tres_alloc(job: Mapping[str, object]) -> str:
    cpus = as_int(job.get("cpus")) or 1
    parts = [f"cpu={cpus}", f"mem={mem_size(as_int(job.get('mem_mb')))}", f"node={as_int(job.get('nodes')) or 1}",
             f"billing={cpus}"]
    gpus, shards = as_int(job.get("gpus")), as_int(job.get("gpu_shards"))
    if shards:  # a shard job holds shards of a GPU, not the GPU (Slurm's gres/shard TRES)
        parts.append(f"gres/shard={shards}")
    elif gpus:
        parts.append(f"gres/gpu={gpus}")
    return ",".join(parts)


def _dependency(job: Mapping[str, object]) -> str | None:
    """Slurm lists the dependencies still waited on, each with its state; met ones are dropped."""
    spec = as_text(job.get("dependency"))
    reason = job.get("reason")
    if not spec or job.get("state") != PENDING or reason not in ("Dependency", "DependencyNeverSatisfied"):
        return None
    status = "(unfulfilled)" if reason == "Dependency" else "(failed)"
    out = []
    for clause in spec.replace("?", ",").split(","):
        kind, _, ids = clause.partition(":")
        if not ids:
            out.append(clause + status)
            continue
        out.extend(f"{kind}:{one}{status}" for one in ids.split(":") if one)
    return ",".join(out)


def used_seconds(job: Mapping[str, object], now: float) -> float:
    """Slurm's job_time_used: 0 while pending; running: since start; ended: start to end."""
    if job.get("state") == PENDING:
        return 0.0
    begin = parse_iso(as_text(job.get("start_time")))
    if not begin:
        return 0.0
    end = parse_iso(as_text(job.get("end_time"))) if job.get("state") != RUNNING else None
    return max((end or now) - begin, 0.0)


def end_time(job: Mapping[str, object], now: float) -> float | None:
    """Slurm's end_time: the expected end (start + limit, or far off when unlimited) until it ends."""
    ended = parse_iso(as_text(job.get("end_time")))
    if ended:
        return ended
    begin = start_time(job)
    if not begin:
        return None
    limit = job.get("time_limit_s")
    return begin + (as_int(limit) // 60) * 60 if limit is not None else begin + YEAR_SECONDS


def _secs(seconds: float) -> str:
    """Slurm's _print_secs: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`; INVALID below 0 or past a year."""
    total = int(seconds)
    return "INVALID" if total < 0 or total > YEAR_SECONDS else duration(total)


def _time(epoch: float | None) -> str:
    return local_time(epoch) if epoch else "N/A"


def mem_size(mb: int) -> str:
    """squeue's MIN_MEMORY (convert_num_unit, exact): divided by 1024 while it stays a multiple of 512,
    so 1024 is `1G`, 1536 `1.50G`, 1000 `1000M`."""
    if not mb:
        return "0"
    value = float(mb)
    units = "MGTP"
    unit = 0
    while value >= 1024 and int(value) % 512 == 0 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{int(value)}{units[unit]}" if value == int(value) else f"{value:.2f}{units[unit]}"


def as_int(value: object) -> int:
    return value if isinstance(value, int) else 0


def as_text(value: object) -> str | None:
    return value if isinstance(value, str) else None
