"""`corral submit`, `queue`, `show`, `cancel`, `hold`, `release` and `logs`: the commands people and scripts call most, each one
or two requests and an exit. They start within twice the interpreter's own start: one request on a bare
socket (corral.cli.wire), options read by corral.cli.options, nothing from click, typing, dataclasses, re,
enum or http.client on the way (tests/cli/test_quick_commands.py checks). `corral.cli.entry` runs them
straight from the command line; `corral.cli.main` registers them on the click group too (for
`corral --help`, and for CliRunner), where they run the same code.
"""

from __future__ import annotations

import os
import sys

from corral.cli.options import CHOICE, FLAG, INT, Command, Opt, UsageError, parse
from corral.cli.terminal import escape, flush_stdout, json_text, print_error, print_json
from corral.errors import CorralError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from corral.cli.wire import Server

# what a job asks for: `corral submit`'s options, and `corral plan`'s
JOB_OPTIONS = [
    Opt("-J", "--job-name", key="name", help="Job name [default: the script's or program's name]."),
    Opt("-G", "--gpus", help="GPUs: a count, or TYPE:COUNT."),
    Opt("--gpus-per-node", help="GPUs on each node of a multi-node job (with --nodes)."),
    Opt("-N", "--nodes", kind=INT, help="Nodes (more than 1: srun torchrun with a rendezvous; Slurm backend)."),
    Opt("--gres", help="Slurm style GPU request: gpu:N or gpu:TYPE:N; shard:N for part of one GPU."),
    Opt("--gpu-type", help="GPU type, e.g. A100."),
    Opt("--gpu-mem", help="Minimum memory of each GPU, e.g. 40G (with --gpu-share: the job's budget)."),
    Opt("--gpu-share", kind=FLAG, default=None, help="Share one GPU with other jobs, using at most --gpu-mem of "
        "its memory."),
    Opt("-c", "--cpus-per-task", "--cpus", key="cpus", kind=INT, help="CPUs of each task [default: 1]."),
    Opt("-n", "--ntasks", kind=INT, help="Tasks: `srun` in the job starts this many [default: 1]."),
    Opt("--ntasks-per-node", kind=INT, help="Tasks on each node (sets SLURM_NTASKS_PER_NODE)."),
    Opt("--gpus-per-task", help="GPUs of each task: GPUs = this x tasks; each task sees its own."),
    Opt("--mem", help="Host memory, e.g. 16G; the job is killed past it [default: no limit]."),
    Opt("--mem-per-cpu", help="Host memory per CPU."),
    Opt("--mem-per-gpu", help="Host memory per GPU."),
    Opt("-t", "--time", help="Time limit: minutes, HH:MM:SS, D-HH:MM:SS, 30m, 2h."),
    Opt("-o", "--output", key="stdout", help="Stdout file pattern (%j id, %x name, %A/%a array job/task)."),
    Opt("-e", "--error", key="stderr", help="Stderr file pattern [default: with --output, the same file]."),
    Opt("-D", "--chdir", key="workdir", help="Working directory [default: the current one]."),
    Opt("--export", help="Environment to pass: ALL (default), NONE, or NAMES / ALL,VAR=value."),
    Opt("--env", key="env_pairs", many=True, metavar="KEY=VALUE", help="Set a variable (repeatable)."),
    Opt("--label", key="label_pairs", many=True, metavar="KEY=VALUE", help="Attach a label (repeatable)."),
    Opt("--nice", kind=INT, help="Lower the job's priority by this much."),
    Opt("-p", "--partition", help="Partition [default: the configured default]."),
    Opt("-q", "--qos", help="Quality of service [default: the configured default]."),
    Opt("-A", "--account", help="Account to charge [default: the first you are in]; its coordinators may "
        "manage the job."),
    Opt("-H", "--hold", kind=FLAG, default=None, help="Submit it held: it waits until `corral release`."),
    Opt("-d", "--dependency", help="Start after other jobs: afterok:ID[:ID], afterany:ID, after:ID, afternotok:ID, "
        "singleton; join with , (all) or ? (any)."),
    Opt("-a", "--array", help="A job array: 0-99, 1,3,5-9, 0-20:4; %4 runs at most 4 tasks at once."),
    Opt("--signal", help="Warn the job before its time limit (and on preemption): SIG@SECONDS, e.g. USR1@90."),
    Opt("--preemptible", kind=FLAG, default=None, help="Let jobs of higher priority preempt (and requeue) it."),
    Opt("--requeue", kind=CHOICE, choices=("yes", "no"),
        help="When its GPU fails: wait again (yes) or end NODE_FAIL (no) [default: yes, as Slurm's JobRequeue=1; "
        "sbatch's --requeue, --no-requeue]."),
    Opt("--kill-on-invalid-dep", kind=CHOICE, choices=("yes", "no"),
        help="Cancel the job if its dependency can never be satisfied."),
    Opt("--begin", help="Not before then (reason BeginTime): 16:00, now+1hour, 2026-12-01T08:00."),
    Opt("--deadline", help="Removed (DEADLINE) once it could no longer end by then."),
    Opt("--exclusive", kind=FLAG, default=None, help="Take the whole node: every GPU, CPU and all memory."),
    Opt("-C", "--constraint", help="Node features (config.toml [node] features): nvlink, a100&nvlink, a100|h100."),
    Opt("-w", "--nodelist", help="The node to run on."),
    Opt("-x", "--exclude", help="Nodes not to run on."),
    Opt("--cpus-per-gpu", kind=INT, help="CPUs = this x GPUs."),
    Opt("--time-min", help="The shortest time limit it takes: backfill may start it sooner with less."),
    Opt("--priority", help="The job's fixed priority (admins only); 0 holds it."),
    Opt("--mail-type", help="Mail on BEGIN, END, FAIL, REQUEUE, TIME_LIMIT[_90|_80|_50], ALL or NONE."),
    Opt("--mail-user", help="Where those mails go [default: you, at the server's mail domain]."),
    Opt("--open-mode", kind=CHOICE, choices=("append", "truncate"),
        help="append keeps what the log files hold [default: truncate]."),
    Opt("--comment", help="A note shown with the job."),
    Opt("--reservation", help="Run in this reservation (corral reservation list): on its GPUs, inside its window."),
    # Pyxis's options, as sbatch takes them on a cluster with the plugin
    Opt("--container-image", "--image", key="image", metavar="IMAGE",
        help="Run in this container image: a registry reference (nvcr.io#nvidia/pytorch:24.01-py3), docker://..., "
             "docker-archive:/path.tar, oci-archive:/path.tar or /path/image.sif."),
    Opt("--container-mounts", metavar="SRC:DST[:ro],...", help="Host paths seen inside the container."),
    Opt("--container-workdir", help="Where the job starts inside [default: its working directory]."),
    Opt("--container-env", metavar="NAME,...", help="Variables whose job value wins over the image's."),
    Opt("--no-container-mount-home", kind=FLAG, help="Do not mount your home inside the container."),
    Opt("--container-remap-root", kind=FLAG, default=None, help="Appear as root inside the container (still you "
        "outside it)."),
    Opt("--wrap", help="Run this shell command line, as a one-line batch script (like sbatch --wrap)."),
    Opt("--condor", kind=FLAG, help="SCRIPT is an HTCondor submit description file."),
]
SUBMIT = Command("submit", "Submit a job: `submit [options] SCRIPT [ARGS]`, `submit [options] -- CMD [ARGS]`, or "
                 "`--wrap \"CMD\"`.", [
    *JOB_OPTIONS,
    Opt("--parsable", kind=FLAG, help="Print only the job id."),
    Opt("--json", key="as_json", kind=FLAG, help="Print the submitted job as JSON."),
], "script_and_args", many=True, required=False, interspersed=False, takes_command=True)

PLAN = Command("plan", "When a job would start if submitted now, what holds it back, and whether a shorter --time "
               "or fewer GPUs would start it sooner. Takes `corral submit`'s options; submits nothing.", [
    *JOB_OPTIONS,
    Opt("--json", key="as_json", kind=FLAG, help="Print the forecast as JSON."),
], "script_and_args", many=True, required=False, interspersed=False, takes_command=True)

QUEUE = Command("queue", "Pending and running jobs, with the reason each pending one waits.", [
    Opt("-t", "--state", key="states", many=True, help="Only jobs in this state (repeatable)."),
    Opt("--start", key="starts", kind=FLAG, help="Pending jobs with their estimated start (like squeue --start)."),
    Opt("-l", "--long", key="long", kind=FLAG, help="Also when each job should end: start + time limit, or its "
        "tracked run's ETA where sooner (marked *)."),
    Opt("--json", key="as_json", kind=FLAG),
])

SHOW = Command("show", "Everything about one job.", [Opt("--json", key="as_json", kind=FLAG)], "job_id")

CANCEL = Command("cancel", "Cancel jobs: pending ones leave the queue, running ones get SIGTERM, a grace period, "
                 "then SIGKILL.", [Opt("--json", key="as_json", kind=FLAG)], "job_ids", many=True)

HOLD = Command("hold", "Keep pending jobs from starting (reason JobHeldUser) until released.",
               [Opt("--json", key="as_json", kind=FLAG)], "job_ids", many=True)

RELEASE = Command("release", "Let held jobs run again.", [Opt("--json", key="as_json", kind=FLAG)], "job_ids",
                  many=True)

REQUEUE = Command("requeue", "Queue running or ended jobs again, as Slurm's requeue: a running one is stopped first; "
                  "each restart counts.", [
                      Opt("--hold", kind=FLAG, help="Leave them held (like scontrol requeuehold)."),
                      Opt("--json", key="as_json", kind=FLAG)], "job_ids", many=True)

LOGS = Command("logs", "A job's output. With -f, followed until the job ends: if it did not complete, how it ended is "
               "said on stderr and the exit status is its exit code (1 where that is 0), as with `corral wait`.", [
    Opt("-f", "--follow", kind=FLAG, help="Keep printing as the job writes, until it ends; exit 0 only if it completed."),
    Opt("--stderr", key="use_stderr", kind=FLAG, help="Show stderr instead of stdout."),
    Opt("-a", "--both", kind=FLAG, help="Show stdout and stderr together: the job's stdout on stdout, its stderr on "
        "stderr (one stream when both go to one file)."),
    Opt("-n", "--tail", kind=INT, help="Only the last N lines (of each stream, with --both)."),
], "job_id")


class Call:
    """One command's call: its options, its operands, and the server of its --home/--url (else the global ones)."""

    def __init__(self, command: Command, argv: Sequence[str], home: str | None, url: str | None) -> None:
        self.command = command
        self.command_after_dashes: list[str] | None = None  # submit's `-- CMD ARGS`, untouched by option parsing
        if command.takes_command and "--" in argv:
            cut = list(argv).index("--")
            argv, self.command_after_dashes = argv[:cut], list(argv[cut + 1:])
        self.options, self.operands = parse(command, argv)
        given_home, given_url = self.options.pop("home"), self.options.pop("url")
        self.home = home if given_home is None else str(given_home)
        self.url = url if given_url is None else str(given_url)

    def __getitem__(self, key: str) -> Any:
        return self.options[key]

    def server(self) -> Server:
        from corral.cli.wire import Server

        return Server(self.url, self.home).require_http()


def run(command: Command, argv: Sequence[str], home: str | None, url: str | None,
        table: Mapping[str, Callable[[Call], int]] | None = None) -> int:
    """The command's exit status, its errors printed as `corral` prints them (`corral: error: ...`, 1;
    a command line it cannot read: click's usage and message, 2). `table`: the commands' functions by name
    (these, unless given: `corral.cli.launch` gives its own).

    Raises:
        HelpRequested: for the caller to print the command's help.
    """
    try:
        call = Call(command, argv, home, url)
        return (_RUN if table is None else table)[command.name](call)
    except UsageError as exc:
        _usage_error(command, exc)
        return 2
    except CorralError as exc:
        print_error(exc)
        return 1


def _usage_error(command: Command, exc: UsageError) -> None:
    head = f"{command.usage()}\nTry 'corral {command.name} --help' for help.\n\n" if exc.usage else ""
    flush_stdout()
    print(f"{head}Error: {exc.message}", file=sys.stderr, flush=True)


def _warn(text: str) -> None:
    flush_stdout()
    print(f"corral: warning: {escape(text)}", file=sys.stderr, flush=True)


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")  # as click.echo: one write, flushed (`corral queue | head -1` reads it whole)
    sys.stdout.flush()


def _key_values(pairs: Sequence[str], option: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"Invalid value for {option}: {pair!r} is not KEY=VALUE")
        out[key] = value
    return out


_NOT_FIELDS = frozenset({"env_pairs", "label_pairs", "wrap", "condor", "parsable", "as_json",
                         "no_container_mount_home"})


def submit(call: Call) -> int:
    body = job_request(call)
    job = call.server().ask("POST", "/api/v1/jobs", body)
    for warning in job.get("warnings", []):
        _warn(warning)
    if call["condor"] and job.get("user_log"):
        from corral.cli.condor import write_submitted

        problem = write_submitted(job)
        if problem:
            _warn(problem)
    if call["as_json"]:
        print_json(job)
    elif call["parsable"]:
        _out(str(job["id"]))
    else:
        _out(f"Submitted batch job {job['id']}")
    return 0


def plan(call: Call) -> int:
    answer = call.server().ask("POST", "/api/v1/forecast", job_request(call))
    if call["as_json"]:
        print_json(answer)
        return 0
    for warning in answer.get("warnings", []):
        _warn(warning)
    from corral.cli.format_plan import forecast_text

    _out(forecast_text(answer))
    return 0


def job_request(call: Call) -> dict[str, Any]:
    """The request a submit (or a forecast) sends for these options: the command, script or --wrap, and the
    submitter's directory, environment and umask."""
    body: dict[str, Any] = {k: v for k, v in call.options.items() if k not in _NOT_FIELDS and v is not None}
    wrap, condor, args = call["wrap"], call["condor"], call.operands
    if wrap is not None:
        if call.command_after_dashes is not None or args:
            raise UsageError("give --wrap, a script, or a command after --, not two of them")
        # as sbatch does: a one-line batch script, so it sees SLURM_JOB_ID, SLURM_ARRAY_TASK_ID, ...
        body["script"] = f"#!/bin/sh\n{wrap}\n"
        body["script_name"] = "wrap"
    elif call.command_after_dashes is not None:
        if args:
            raise UsageError("give a script or a command after --, not both")
        if not call.command_after_dashes:
            raise UsageError("nothing after --: give the command to run, e.g. -- python train.py")
        body["command"] = call.command_after_dashes
    elif args:
        path = args[0]
        try:
            with open(path) as f:
                body["script"] = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not a text file"
            raise CorralError(f"cannot read script {path}: {reason}") from None
        if condor:
            if len(args) > 1:
                raise UsageError("an HTCondor submit file takes no arguments here; use its `arguments`")
            from corral.cli.condor import resolve_items

            body["condor"] = resolve_items(body.pop("script"), os.getcwd())
        else:
            body["script_name"] = os.path.basename(path)
            body["script_args"] = list(args[1:])
    elif not sys.stdin.isatty():
        body["script"] = sys.stdin.read()
    else:
        raise UsageError("give a batch script, a command after --, or --wrap")
    body["submit_dir"] = os.getcwd()  # the default working directory; a script's --chdir may override it
    body["environment"] = dict(os.environ)
    mask = os.umask(0o022)
    os.umask(mask)
    body["umask"] = f"{mask:04o}"  # the job's files get the submitter's permissions, as in Slurm
    if call["env_pairs"]:
        body["env"] = _key_values(call["env_pairs"], "--env")
    if call["label_pairs"]:
        body["labels"] = _key_values(call["label_pairs"], "--label")
    if call["no_container_mount_home"]:
        body["container_mount_home"] = False
    return body


def queue(call: Call) -> int:
    starts = call["starts"]
    wanted = ["PENDING"] if starts else [s.upper() for s in call["states"]]
    query = _query([("scope", "active"), ("limit", 10_000), *[("state", s) for s in wanted]])
    jobs = call.server().ask("GET", f"/api/v1/jobs?{query}")["jobs"]
    if call["as_json"]:
        print_json(jobs)
        return 0
    from corral.cli.format import queue_table, start_table

    _out(start_table(jobs, long=call["long"]) if starts else queue_table(jobs, long=call["long"]))
    return 0


def show(call: Call) -> int:
    job = call.server().ask("GET", f"/api/v1/jobs/{job_ref(call.operands[0])}")
    if call["as_json"]:
        _out(json_text(job))
        return 0
    from corral.cli.format import job_view

    _out(job_view(job))
    return 0


def cancel(call: Call) -> int:
    """Every job named in one request: none of them starts on what the running ones free."""
    refs, failed = [], False
    for job_id in call.operands:
        try:
            refs.append(job_ref(job_id))
        except CorralError as exc:
            failed = _job_error(exc.message)
    answers = call.server().ask("POST", "/api/v1/jobs/cancel", {"jobs": refs})["jobs"] if refs else []
    from corral.cli.format_outcomes import cancelled

    results = []
    for ref, answer in zip(refs, answers):
        if "error" in answer and "state" not in answer:
            failed = _job_error(answer["error"]["message"])
            continue
        results.append(answer)
        if not call["as_json"]:
            _out(cancelled(ref, answer))
    if call["as_json"]:
        print_json(results)
    return 1 if failed else 0


def _job_error(message: str) -> bool:
    flush_stdout()
    print(f"corral: error: {escape(message)}", file=sys.stderr, flush=True)
    return True


def each_job(call: Call, action: str, query: str = "") -> int:
    """`action` (hold, release, requeue) on each job: an error is printed for its job and the rest go on."""
    server = call.server()
    results, failed = [], False
    for job_id in call.operands:
        try:
            job = server.ask("POST", f"/api/v1/jobs/{job_ref(job_id)}/{action}{query}")
        except CorralError as exc:
            failed = _job_error(exc.message)
            continue
        results.append(job)
        if call["as_json"]:
            continue
        if action == "requeue":
            from corral.cli.format_outcomes import requeued

            _out(requeued(job_id, job))
        else:
            _out(f"job {job_id}: {job['state']}" + (f" ({escape(job['reason'])})" if job.get("reason") else ""))
    if call["as_json"]:
        print_json(results)
    return 1 if failed else 0


def logs(call: Call) -> int:
    server = call.server()
    ref = job_ref(call.operands[0])
    follow, tail = call["follow"], call["tail"]
    if call["both"] and call["use_stderr"]:
        raise UsageError("--both shows stderr already: give --both or --stderr")
    streams = ["stderr" if call["use_stderr"] else "stdout"]
    if call["both"]:
        job = server.ask("GET", f"/api/v1/jobs/{ref}")
        if job["stderr_path"] != job["stdout_path"]:
            streams = ["stdout", "stderr"]
    sinks = {"stdout": sys.stdout.buffer, "stderr": sys.stderr.buffer}
    offsets = dict.fromkeys(streams, 0)

    def chunk(stream: str, tail: int | None = None) -> tuple[bytes, str]:
        """The next bytes of `stream`, written out, and the job's state as it was before they were read."""
        query: list[tuple[str, object]] = [("stream", stream), ("offset", offsets[stream])]
        if tail is not None:
            query.append(("tail", tail))
        status, headers, data = server.answer("GET", f"/api/v1/jobs/{ref}/logs?{_query(query)}")
        if status >= 400:
            from corral.errors import error_from_answer

            raise error_from_answer(status, data)
        offsets[stream] = int(headers["x-corral-offset"])
        if data:
            sinks[stream].write(data)
            sinks[stream].flush()
        return data, headers["x-corral-state"]

    if tail is not None:
        for stream in streams:
            chunk(stream, tail)
        if not follow:
            return 0
    while True:
        # the server reads the state before the bytes: a stream read empty under a final state is all there
        reads = [chunk(stream) for stream in streams]
        if any(data for data, _ in reads):
            continue
        if not follow:
            return 0
        state = reads[-1][1]
        if all(read_state in _terminal_states() for _, read_state in reads):
            return 0 if state == "COMPLETED" else _say_ended(server.ask("GET", f"/api/v1/jobs/{ref}"))
        import time

        time.sleep(0.25)


_HOW_ENDED = {"TIMEOUT": "it reached its time limit", "OUT_OF_MEMORY": "it went over its memory",
              "CANCELLED": "it was cancelled", "NODE_FAIL": "its node failed", "PREEMPTED": "it was preempted",
              "DEADLINE": "it reached its deadline"}


def _say_ended(job: dict[str, Any]) -> int:
    """How a job that did not complete ended, on stderr (as `corral wait` says it); the exit status for it."""
    how = _HOW_ENDED.get(job["state"], "")
    if job["state"] == "TIMEOUT" and job.get("time_limit_s"):
        how += f" of {_duration(int(job['time_limit_s']))}"
    elif job["state"] == "OUT_OF_MEMORY" and job.get("mem_mb"):
        how += f" limit of {job['mem_mb']} MB"
    why = "; ".join(part for part in (how, job.get("reason") or "") if part)
    flush_stdout()
    print(f"job {job['ref']} {job['state']} (exit code {job['exit_code']}){': ' + escape(why) if why else ''}",
          file=sys.stderr, flush=True)
    code = job["exit_code"]
    return min(int(code), 255) if code else 1  # not completed: never 0, whatever its last process said


def _duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _terminal_states() -> frozenset[str]:
    from corral.core.jobspec.states import TERMINAL_STATES  # enum: only for `logs -f`, which waits anyway

    return frozenset(state.value for state in TERMINAL_STATES)


def job_ref(job_id: str) -> str:
    """A job id or ID_TASK, checked before it goes into a URL (as corral.client checks it)."""
    head, _, task = job_id.partition("_")
    if not head.isdigit() or not head.isascii() or (task and not (task.isdigit() and task.isascii())):
        from corral.errors import InvalidRequest

        raise InvalidRequest("job_id", f"{job_id!r} is not a job id", "write 12, or 12_3 for task 3 of array 12")
    return job_id


_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def _query(pairs: Sequence[tuple[str, object]]) -> str:
    """urllib.parse.urlencode(pairs), without urllib (and the re it imports)."""
    return "&".join(f"{_quote(str(k))}={_quote(str(v))}" for k, v in pairs)


def _quote(text: str) -> str:
    return "".join(chr(b) if b in _SAFE else "+" if b == 0x20 else f"%{b:02X}" for b in text.encode("utf-8"))


_RUN: dict[str, Callable[[Call], int]] = {
    "submit": submit, "plan": plan, "queue": queue, "show": show, "cancel": cancel, "logs": logs,
    "hold": lambda call: each_job(call, "hold"), "release": lambda call: each_job(call, "release"),
    "requeue": lambda call: each_job(call, "requeue", "?hold=true" if call["hold"] else ""),
}
COMMANDS = {command.name: command for command in (SUBMIT, PLAN, QUEUE, SHOW, CANCEL, HOLD, RELEASE, REQUEUE, LOGS)}
