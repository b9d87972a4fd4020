"""`scontrol`: show jobs, nodes, partitions and the configuration in Slurm's `Key=Value` layout, and
hold, release, requeue or update jobs.

    scontrol show job 12            scontrol -o show job           scontrol show node
    scontrol hold 12                scontrol release 12_[1-3]      scontrol requeue 12
    scontrol update JobId=12 TimeLimit=2:00:00 Partition=gpu       scontrol show hostnames node[1-3]
    scontrol update NodeName=node1 State=DRAIN Reason="XID 79"      scontrol update NodeName=node1 State=RESUME
    scontrol create reservation ReservationName=demo StartTime=now Duration=4:00:00 Users=ada TRES=gres/gpu=2
    scontrol show reservation [demo]        scontrol delete reservation demo
"""

from __future__ import annotations

import sys
import time

from corral.cli.slurm import cluster, scontrol_reservations
from corral.cli.slurm.argv import Option, UsageError, parse
from corral.cli.slurm.command import TIME_LIMIT_INVALID, VERSION, Refused, server
from corral.cli.slurm.jobs import active_jobs, expand_refs
from corral.cli.slurm.hostlist import expand_hostlist, hostnames
from corral.cli.slurm.scontrol_format import INVALID_JOB, show_jobs, show_nodes, show_partitions, show_steps
from corral.cli.slurm.scontrol_config import show_config
from corral.errors import CorralError, OverLimit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from corral.cli.wire import Server

OPTIONS = [Option("oneliner", "o"), Option("details", "d"), Option("quiet", "Q"), Option("verbose", "v"),
           Option("version", "V"), Option("help", "h"), Option("usage"), Option("all", "a"),
           Option("clusters", "M", value=True)]
# scontrol update's job keys, as corral's update request names them
UPDATE_KEYS = {"timelimit": "time", "numcpus": "cpus", "mincpusnode": "cpus", "partition": "partition", "nice": "nice",
               "qos": "qos", "name": "name", "jobname": "name", "minmemorynode": "mem", "gres": "gres",
               "tresperjob": "gpus", "starttime": "begin", "begintime": "begin", "deadline": "deadline",
               "features": "constraint", "reqnodelist": "nodelist", "nodelist": "nodelist",
               "excnodelist": "exclude", "mailuser": "mail_user", "mailtype": "mail_type", "comment": "comment",
               "timemin": "time_min", "dependency": "dependency", "priority": "priority"}


def main(argv: Sequence[str]) -> int:
    given, words = parse(argv, OPTIONS)
    if given.get("version"):
        print(VERSION)
        return 0
    if given.get("help") or given.get("usage") or not words:
        print("Usage: scontrol [-o] show job|step|node|partition|config|hostnames [ID] | hold|release|requeue JOBS | "
              "update JobId=ID KEY=VALUE... | update ReservationName=R KEY=VALUE... | create|show|delete reservation ...")
        return 0
    command, rest = words[0].lower(), words[1:]
    if command == "show":
        return _show(rest, bool(given.get("oneliner")))
    if command in ("hold", "uhold", "release", "requeue", "requeuehold"):
        return _each(command, rest)
    if command == "update":
        return _update(rest)
    if command == "create":
        return scontrol_reservations.create(rest)
    if command == "delete":
        return scontrol_reservations.delete(rest)
    raise UsageError(f"invalid keyword: {words[0]}")


def _show(words: list[str], one_liner: bool) -> int:
    if not words:
        raise Refused("show what? job, node, partition, config or hostnames")
    entity, name = words[0].lower(), (words[1] if len(words) > 1 else None)
    if entity == "hostnames":
        if name is None:
            raise Refused("show hostnames needs a host list, e.g. node[1-3]")
        sys.stdout.write(hostnames(name))
        return 0
    service = server()
    now = time.time()
    if entity in ("job", "jobs", "jobid"):
        return _show_jobs(service, name, one_liner, now)
    if entity in ("step", "steps", "stepid"):
        return _show_steps(service, name, one_liner)
    if entity in ("node", "nodes", "nodename"):
        nodes = cluster.nodes(service)
        if name is not None:
            nodes = [node for node in nodes if node.get("name") == name]
            if not nodes:
                print(f"Node {name} not found", file=sys.stderr)
                return 1
        names = [p["name"] for p in cluster.partitions(service)[0]]
        sys.stdout.write(show_nodes(nodes, partitions=names, now=now, one_liner=one_liner))
        return 0
    if entity in ("partition", "partitions", "partitionname"):
        partitions, default, _ = cluster.partitions(service)
        if name is not None:
            partitions = [p for p in partitions if p["name"] == name]
            if not partitions:
                print(f"Partition {name} not found", file=sys.stderr)
                return 1
        sys.stdout.write(show_partitions(partitions, cluster.nodes(service), default=default, one_liner=one_liner))
        return 0
    if scontrol_reservations.is_reservation(entity):
        return scontrol_reservations.show(name, one_liner)
    if entity in ("config", "configuration"):
        _, _, weights = cluster.partitions(service)
        settings = {"PriorityWeightAge": str(weights["age"]), "PriorityWeightFairShare": str(weights["fairshare"]),
                    "PriorityWeightJobSize": str(weights["job_size"]), "PriorityWeightPartition": str(weights["partition"]),
                    "PriorityWeightQOS": str(weights["qos"])}
        sys.stdout.write(show_config(settings, now=now, controller=cluster.node_name()))
        return 0
    raise Refused(f"invalid entity: {words[0]} (show job, step, node, partition, config or hostnames)")


def _show_jobs(service: Server, name: str | None, one_liner: bool, now: float) -> int:
    if name is None:
        jobs = active_jobs(service)
    else:
        jobs = []
        for ref in expand_refs([name]):
            try:
                jobs.append(service.ask("GET", f"/api/v1/jobs/{ref}"))
            except CorralError as exc:
                if exc.status != 404:
                    raise
        if not jobs:
            sys.stderr.write(INVALID_JOB)
            return 1
    _, default, _ = cluster.partitions(service)
    sys.stdout.write(show_jobs(jobs, now=now, one_liner=one_liner,
                               default_partition=default or "default", alloc_node=cluster.node_name()))
    return 0


def _show_steps(service: Server, name: str | None, one_liner: bool) -> int:
    """The running jobs' steps that run (`12`, `12.0`, `12.batch` narrow it), as Slurm shows them."""
    ref, _, wanted = (name or "").partition(".")
    if name is None:
        jobs = [job for job in active_jobs(service) if job["state"] == "RUNNING"]
    else:
        try:
            jobs = [service.ask("GET", f"/api/v1/jobs/{ref}")]
        except CorralError as exc:
            if exc.status not in (404, 422):
                raise
            jobs = []
        if not jobs or jobs[0]["state"] != "RUNNING":
            print("slurm_get_job_steps error: Invalid job id specified", file=sys.stderr)
            return 1
    text = ""
    for job in jobs:
        steps = service.ask("GET", f"/api/v1/jobs/{job['ref']}/steps")["steps"]
        if wanted:
            steps = [step for step in steps if str(step["step_id"]) == wanted]
        batch = wanted in ("", "batch") and not job.get("interactive")  # srun's and salloc's jobs run no script
        text += show_steps(job, steps, batch=batch, one_liner=one_liner)
    if name is not None and wanted and not text:
        print(f"Job step {name} not found", file=sys.stderr)
        return 1
    sys.stdout.write(text or ("No job steps in the system\n" if name is None else ""))
    return 0


def _each(command: str, words: list[str]) -> int:
    if not words:
        raise Refused(f"{command} needs job ids")
    action = {"hold": "hold", "uhold": "hold", "release": "release", "requeue": "requeue",
              "requeuehold": "requeue"}[command]
    query = "?hold=true" if command == "requeuehold" else ""
    service = server()
    status = 0
    for ref in expand_refs(words[0].split(",") if len(words) == 1 else words):
        try:
            service.ask("POST", f"/api/v1/jobs/{ref}/{action}{query}")
        except CorralError as exc:
            print(f"{action.capitalize()} job {ref} error: {_reason(exc)}", file=sys.stderr)
            status = 1
    return status


def _update(words: list[str]) -> int:
    if any(word.lower().startswith("reservationname=") for word in words):
        return scontrol_reservations.update(words)
    pairs = [word.partition("=") for word in words]
    if not pairs or any(not equals for _, equals, _ in pairs):
        raise Refused("update takes KEY=VALUE pairs, e.g. update JobId=12 TimeLimit=2:00:00")
    values = {key.lower(): value for key, _, value in pairs}
    if "nodename" in values:
        return _update_node(values)
    ref = values.pop("jobid", None) or values.pop("job", None)
    if ref is None:
        raise Refused("update needs JobId=ID or NodeName=NAME")
    changes: dict[str, Any] = {}
    for key, value in values.items():
        if key not in UPDATE_KEYS:
            raise Refused(f"Update of this parameter is not supported by corral: {key}")
        changes[UPDATE_KEYS[key]] = value
    service = server()
    try:
        for one in expand_refs([ref]):
            service.ask("PATCH", f"/api/v1/jobs/{one}", changes)
    except CorralError as exc:
        if isinstance(exc, OverLimit) and exc.field == "time":  # corral's line naming the limit, then Slurm's
            print(f"scontrol: error: {exc.message}\n{TIME_LIMIT_INVALID} for job {ref}", file=sys.stderr)
            return 1
        raise Refused(f"Update of job {ref} failed: {_reason(exc)}") from None
    return 0


def _update_node(values: dict[str, str]) -> int:
    """State=DRAIN Reason=... (DOWN drains too) or State=RESUME (UNDRAIN, IDLE), for each node named."""
    names = expand_hostlist(values.pop("nodename"))
    state = values.pop("state", "").upper()
    reason = values.pop("reason", None)
    if values:
        raise Refused(f"Update of this parameter is not supported by corral: {next(iter(values))}")
    if state in ("DRAIN", "DOWN", "FAIL"):
        if not reason or not reason.strip():
            raise Refused("You must specify a reason when DOWNING or DRAINING a node. Request denied")
        body: dict[str, Any] | None = {"reason": reason}
        action = "drain"
    elif state in ("RESUME", "UNDRAIN", "IDLE"):
        body, action = None, "resume"
    else:
        raise Refused(f"Invalid node state specified: {state or '(none)'} (corral takes State=DRAIN or State=RESUME)")
    import urllib.parse  # only here: urllib (and the re it imports) stays off every other scontrol's start

    service = server()
    for name in names:
        try:
            service.ask("POST", f"/api/v1/nodes/{urllib.parse.quote(name, safe='')}/{action}", body)
        except CorralError as exc:
            raise Refused(f"Update of node {name} failed: {_node_reason(exc)}") from None
    return 0


def _node_reason(error: CorralError) -> str:
    if error.status == 404:
        return "Invalid node name specified"
    if error.status == 403:
        return f"Access/permission denied ({error.message})"
    return error.message


def _reason(error: CorralError) -> str:
    if error.status == 404:
        return "Invalid job id specified"
    if error.status == 403:
        return "Access/permission denied"
    return error.message
