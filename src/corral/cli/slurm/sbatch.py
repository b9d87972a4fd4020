"""`sbatch`: submit a batch script to corral as Slurm's sbatch does.

The script's `#SBATCH` lines, `SBATCH_*` variables and the command line's options all reach the server,
which reads them with one parser (corral.core.dialects.sbatch), in Slurm's order: the script, then the
environment, then the command line. Here only what sbatch itself does: find the script, print the id,
wait for the job (`--wait`).
"""

from __future__ import annotations

import os
import sys
import time

from corral.cli.slurm.argv import Option, UsageError, parse
from corral.cli.slurm.command import Refused, answered, refusal, run, server
from corral.errors import CorralError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from corral.cli.wire import Server

# sbatch's own options (handled here); every other option goes to the server as written
LOCAL = ("parsable", "wait", "test_only", "wrap", "quiet", "help", "usage", "version")

# Slurm 22.05's sbatch options, each as getopt_long knows it: which take a value, which may (the
# container-* ones are Pyxis's, which a cluster with the plugin adds to sbatch, srun and salloc)
_FLAGS = ("contiguous", "hold:H", "ignore-pbs", "no-requeue", "overcommit:O", "parsable", "quiet:Q", "reboot",
          "requeue", "spread-job", "test-only", "use-min-nodes", "verbose:v", "wait:W", "help:h", "usage",
          "version:V", "oversubscribe:s", "preemptible", "no-container-mount-home", "container-remap-root")
_OPTIONAL = ("exclusive", "get-user-env", "nice", "no-kill:k")
_VALUED = ("account:A", "acctg-freq", "array:a", "batch", "bb", "bbf", "begin:b", "chdir:D", "cluster-constraint",
           "clusters:M", "comment", "constraint:C", "container", "core-spec:S", "cores-per-socket", "cpu-freq",
           "cpus-per-gpu", "cpus-per-task:c", "deadline", "delay-boot", "dependency:d", "distribution:m",
           "error:e", "exclude:x", "export", "export-file", "extra-node-info:B", "gid", "gpu-bind", "gpu-freq",
           "gpus:G", "gpus-per-node", "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "hint", "input:i",
           "job-name:J", "kill-on-invalid-dep", "licenses:L", "mail-type", "mail-user", "mcs-label", "mem",
           "mem-bind", "mem-per-cpu", "mem-per-gpu", "mincpus", "network", "nodefile:F", "nodelist:w", "nodes:N",
           "ntasks:n", "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-node", "ntasks-per-socket", "open-mode",
           "output:o", "partition:p", "power", "priority", "profile", "propagate", "qos:q", "reservation",
           "signal", "sockets-per-node", "switches", "thread-spec", "threads-per-core", "time:t", "time-min",
           "tmp", "uid", "wckey", "wrap", "container-image", "container-mounts", "container-workdir",
           "container-env", "container-name")


def _option(spec: str, value: bool = False, optional: bool = False) -> Option:
    long, _, short = spec.partition(":")
    return Option(long, short, value=value, optional=optional)


OPTIONS = ([_option(spec) for spec in _FLAGS] + [_option(spec, True, True) for spec in _OPTIONAL]
           + [_option(spec, True) for spec in _VALUED])
BY_KEY = {option.key: option for option in OPTIONS}

# sbatch's input environment variables (man sbatch, INPUT ENVIRONMENT VARIABLES): the option each sets
ENVIRONMENT = {
    "SBATCH_ACCOUNT": "account", "SBATCH_ARRAY_INX": "array", "SBATCH_CONSTRAINT": "constraint",
    "SBATCH_CPUS_PER_GPU": "cpus-per-gpu", "SBATCH_DISTRIBUTION": "distribution", "SBATCH_EXCLUSIVE": "exclusive",
    "SBATCH_EXPORT": "export", "SBATCH_GPUS": "gpus", "SBATCH_GPUS_PER_NODE": "gpus-per-node",
    "SBATCH_GPUS_PER_TASK": "gpus-per-task", "SBATCH_GRES": "gres", "SBATCH_HINT": "hint",
    "SBATCH_JOB_NAME": "job-name", "SBATCH_MEM_PER_CPU": "mem-per-cpu", "SBATCH_MEM_PER_GPU": "mem-per-gpu",
    "SBATCH_MEM_PER_NODE": "mem", "SBATCH_NO_REQUEUE": "no-requeue", "SBATCH_OPEN_MODE": "open-mode",
    "SBATCH_OVERCOMMIT": "overcommit", "SBATCH_PARTITION": "partition", "SBATCH_QOS": "qos",
    "SBATCH_REQUEUE": "requeue", "SBATCH_RESERVATION": "reservation", "SBATCH_SIGNAL": "signal",
    "SBATCH_TIMELIMIT": "time", "SBATCH_WCKEY": "wckey", "SBATCH_WAIT": "wait",
}
_DONE = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"})
USAGE = """Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]

Submits a batch script to corral, read as Slurm's sbatch reads it: #SBATCH lines, SBATCH_* variables
and these options, e.g. -J NAME, -p PARTITION, -t TIME, -G GPUS, --gres=gpu:N, -c CPUS, --mem=SIZE,
-o FILE, -e FILE, -a ARRAY, -d DEPENDENCY, --parsable, --wait, --wrap=COMMAND. corral refuses, by name,
any option it cannot honour.
"""


def main(argv: Sequence[str]) -> int:
    given, operands = parse(argv, OPTIONS, stop_at_first_operand=True)
    if answered(given, USAGE):
        return 0
    environment = _from_environment(os.environ)
    wait = bool(given.get("wait") or environment.pop("wait", None))
    tokens = [token for key, value in environment.items() for token in _tokens(key, value)]
    tokens += [token for key, value in given.items() if key not in LOCAL for token in _tokens(key, value)]
    body = _script(given.get("wrap"), operands)
    if tokens:
        body["options"] = tokens
    body.update(submit_dir=os.getcwd(), environment=dict(os.environ), umask=_umask())
    service = server()
    if given.get("test_only"):
        return _test_only(service, body, quiet=bool(given.get("quiet")))
    try:
        job = service.ask("POST", "/api/v1/jobs", body)
    except CorralError as exc:
        raise refusal("sbatch", exc, "Batch job submission failed") from None
    if not given.get("quiet"):
        for warning in job.get("warnings", []):
            print(f"sbatch: warning: {warning}", file=sys.stderr)
    print(job["id"] if given.get("parsable") else f"Submitted batch job {job['id']}", flush=True)
    return _wait(service, job) if wait else 0


def _test_only(service: Server, body: dict[str, object], quiet: bool) -> int:
    """As `sbatch --test-only`: when the job would start, in Slurm's words on stderr; nothing is submitted.

    The id is the one the job would get now. Where no start can be foreseen (what it needs is held without a
    time limit), Slurm counts such jobs as running for a year, and so does this line.
    """
    try:
        answer = service.ask("POST", "/api/v1/forecast", body)
    except CorralError as exc:
        raise refusal("sbatch", exc, "Batch job submission failed") from None
    if answer["code"] == "Unsatisfiable":
        print(f"allocation failure: {answer['reason']}", file=sys.stderr)
        return 1
    if not quiet:
        for warning in answer.get("warnings", []):
            print(f"sbatch: warning: {warning}", file=sys.stderr)
    from corral.cli.slurm.values import local_time, parse_iso

    start = parse_iso(answer["start"])
    if start is None:
        start = (parse_iso(answer["now"]) or time.time()) + 365 * 86400
    node = answer["node"] or next((b["node"] for b in answer["blockers"] if b.get("node")), None) or "(null)"
    print(f"sbatch: Job {answer['job_id']} to start at {local_time(start)} using {answer['cpus']} processors on "
          f"nodes {node} in partition {answer['partition']}", file=sys.stderr, flush=True)
    return 0


def _from_environment(environ: dict[str, str] | os._Environ[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for variable, long in ENVIRONMENT.items():
        value = environ.get(variable)
        if value is None:
            continue
        option = BY_KEY[long.replace("-", "_")]
        out[option.key] = value if option.value else True
    return out


def _tokens(key: str, value: object) -> list[str]:
    option = BY_KEY[key]
    if value is True:
        return [f"--{option.long}"]
    return [f"--{option.long}={value}"]


def _script(wrap: object, operands: list[str]) -> dict[str, object]:
    if isinstance(wrap, str):
        if operands:
            raise Refused("Script arguments not permitted with --wrap option")
        return {"script": f"#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{wrap}\n", "script_name": "wrap"}
    if not operands:
        if sys.stdin.isatty():
            raise UsageError("no batch script given (sbatch SCRIPT, sbatch --wrap=COMMAND, or the script on stdin)")
        return {"script": sys.stdin.read(), "script_name": "sbatch"}
    path = operands[0]
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        raise Refused(f"Unable to open file {path}") from None
    except UnicodeDecodeError:
        raise Refused(f"{path} is not a text file: a batch script starts with #! and an interpreter") from None
    return {"script": text, "script_name": os.path.basename(path), "script_args": operands[1:]}


def _umask() -> str:
    mask = os.umask(0o022)
    os.umask(mask)
    return f"{mask:04o}"  # the job's files get the submitter's permissions, as in Slurm


def _wait(service: Server, job: dict[str, Any]) -> int:
    """As `sbatch --wait`: block until the job (every task of an array) ends; its exit status, an array's highest."""
    ref = job["id"]
    if job.get("array") is None:
        while True:
            answer = service.ask("GET", f"/api/v1/jobs/{ref}/wait?timeout=30")
            if answer["state"] in _DONE:
                return _status(answer)
    while True:
        tasks = service.ask("GET", f"/api/v1/jobs/{ref}/tasks?limit=10000")
        if tasks["summary"]["ended"] >= tasks["summary"]["tasks"]:
            return max((_status(task) for task in tasks["tasks"]), default=0)
        time.sleep(1.0)


def _status(job: dict[str, Any]) -> int:
    code = job.get("exit_code")
    return int(code) if code else (0 if job["state"] == "COMPLETED" else 1)


if __name__ == "__main__":
    sys.exit(run("sbatch", main))
