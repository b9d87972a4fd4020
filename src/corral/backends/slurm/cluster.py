"""Running Slurm's commands: sbatch, squeue, sacct, scancel, sinfo, scontrol.

Every call is an argv list (never a shell string) with a timeout. Reading the queue is one
call for all of corral's jobs, however many there are: clusters rate-limit RPCs per user.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from corral.backends.slurm.parse import (
    SACCT_ARGS, SEP, SLURM_ENV, SQUEUE_ARGS, SQUEUE_ENDED_ARGS, SacctRow, SqueueRow, parse_sacct, parse_sbatch_id,
    parse_squeue, parse_squeue_ended,
)
from corral.backends.slurm.script import SbatchRequest
from corral.core.scheduling.resources import Gpu, Node
from corral.errors import CorralError, InvalidRequest

log = logging.getLogger("corral.slurm")

Runner = Callable[..., subprocess.CompletedProcess]
TIMEOUT_S = 30.0


class SlurmError(CorralError):
    """A Slurm command failed; `message` holds what it printed."""

    status = 502
    code = "slurm"


@dataclass
class CallCount:
    """How many Slurm commands ran, by name (the poller's cost, for the benchmark and tests)."""

    counts: dict[str, int]

    def add(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1


class SlurmCluster:
    def __init__(self, *, user: str | None = None, runner: Runner = subprocess.run) -> None:
        self.user = user or os.environ.get("USER") or "root"
        self.runner = runner
        self.calls = CallCount({})
        self.has_accounting = True
        """False once sacct said this cluster keeps none."""
        # sbatch and squeue read SBATCH_*/SQUEUE_* as option defaults: none of a user's may leak in
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SBATCH_", "SQUEUE_", "SACCT_"))}
        self.env.update(SLURM_ENV)

    def _run(self, argv: Sequence[str], *, input_text: str | None = None) -> str:
        self.calls.add(argv[0])
        try:
            done = self.runner(list(argv), input=input_text, capture_output=True, text=True, timeout=TIMEOUT_S,
                               env=self.env)
        except FileNotFoundError:
            raise SlurmError(f"{argv[0]} is not installed here; the Slurm backend needs Slurm's client tools") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{argv[0]} did not answer within {TIMEOUT_S:g} s") from None
        if done.returncode != 0:
            raise SlurmError(f"{argv[0]} failed: {(done.stderr or done.stdout).strip()[:500]}")
        return done.stdout

    def submit(self, request: SbatchRequest, script_path: str) -> str:
        """Submit; returns Slurm's job id. The script is a file: Slurm keeps its own copy.

        Raises:
            InvalidRequest: Slurm refused the job (bad partition, too many GPUs, ...), with its words.
        """
        try:
            out = self._run(["sbatch", *request.argv, script_path])
        except SlurmError as exc:
            raise InvalidRequest("slurm", exc.message.removeprefix("sbatch failed: "),
                                 "check the partition, account and resources against `sinfo`") from None
        return str(parse_sbatch_id(out))

    def queue(self) -> list[SqueueRow]:
        """Every job of this user that Slurm still has queued or running."""
        return parse_squeue(self._run(["squeue", *SQUEUE_ARGS, f"--user={self.user}"]))

    def accounting(self, job_ids: Sequence[str]) -> list[SacctRow]:
        """sacct's records of these jobs (array ids expand to their tasks); on a cluster without accounting,
        what squeue still lists of them.

        Raises:
            SlurmError: the call failed.
        """
        if not job_ids:
            return []
        if self.has_accounting:
            try:
                return parse_sacct(self._run(["sacct", *SACCT_ARGS, "-X", f"--jobs={','.join(job_ids)}"]))
            except SlurmError as exc:
                if "accounting storage is disabled" not in exc.message:
                    raise
                log.warning("this cluster keeps no accounting: how a job ended is read from squeue, "
                            "which lists it for MinJobAge after")
                self.has_accounting = False
        # One call for all: squeue, asked for every state, lists jobs that ended for MinJobAge after.
        return parse_squeue_ended(self._run(["squeue", *SQUEUE_ENDED_ARGS, f"--user={self.user}"]), job_ids)

    def efficiency_record(self, job_id: str) -> str:
        """sacct's lines for one job and its steps, with what `efficiency` reads."""
        from corral.backends.slurm.efficiency import SACCT_EFFICIENCY_FIELDS

        return self._run(["sacct", "--parsable2", "--noheader", f"--delimiter={SEP}",
                          f"--format={','.join(SACCT_EFFICIENCY_FIELDS)}", f"--jobs={job_id}"])

    def cancel(self, job_ids: Sequence[str], signal: str | None = None, state: str | None = None) -> None:
        """`scancel` of jobs (`state`: only their parts in that state, as an array's PENDING tasks)."""
        if job_ids:
            argv = ["scancel"] + ([f"--signal={signal}"] if signal else []) + ([f"--state={state}"] if state else [])
            self._run(argv + list(job_ids))

    def job_info(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` of one job, as its KEY=VALUE fields (a job sbatch'ed outside corral)."""
        out = self._run(["scontrol", "show", "job", "--oneliner", job_id])
        return dict(_FIELD.findall(out.splitlines()[0] if out.strip() else ""))

    def hold(self, job_ids: Sequence[str], *, release: bool = False) -> None:
        """`scontrol uhold` (or `release`) of pending jobs."""
        if job_ids:
            # uhold: held by its user (JobHeldUser), as `corral hold` means, even when the server runs as root
            self._run(["scontrol", "release" if release else "uhold", ",".join(job_ids)])

    def requeue(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            self._run(["scontrol", "requeue", ",".join(job_ids)])

    def nodes(self) -> list[Node]:
        """The cluster's nodes with their CPUs, memory and GPUs (from sinfo)."""
        out = self._run(["sinfo", "-N", "-h", "-o", "%N|%c|%m|%G"])
        found: dict[str, Node] = {}
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) != 4 or parts[0] in found:
                continue
            found[parts[0]] = node_from_sinfo(*parts)
        return list(found.values())


_FIELD = re.compile(r"(?:^|\s)([A-Za-z:/]+)=(\S*)")
_GRES = re.compile(r"(?:^|,)gpu(?::([A-Za-z0-9_.-]+))?:(\d+)")


def node_from_sinfo(name: str, cpus: str, mem: str, gres: str) -> Node:
    """A node from sinfo's `%N|%c|%m|%G`: its GPUs numbered in the order its GRES lists their types."""
    types = [gpu_type for gpu_type, count in gpus_in(gres) for _ in range(count)]
    return Node(name=name, cpus=int(cpus.rstrip("+") or 0), mem_mb=int(mem.rstrip("+") or 0),
                gpus=tuple(Gpu(index=i, type=gpu_type, mem_mb=0) for i, gpu_type in enumerate(types)))


def gpus_in(gres: str) -> list[tuple[str, int]]:
    """The GPUs in a node's GRES string, type by type (`gpu:4`, `gpu:a100:8(S:0-1)`,
    `gpu:a100:1,gpu:3g.40gb:1,gpu:1g.10gb:2,shard:8`): [(type or "gpu", count), ...]; shards are no GPUs."""
    return [(match.group(1) or "gpu", int(match.group(2))) for match in _GRES.finditer(gres)]
