"""What every Slurm command shares: finding the server, and failing as Slurm fails (`sbatch: error: ...`
on stderr, exit status 1)."""

from __future__ import annotations

import os
import sys

from corral.cli.slurm.argv import UsageError
from corral.cli.wire import Server
from corral.errors import CorralError, OverLimit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


VERSION = "slurm 22.05.8 (corral)"  # what `--version` prints: the Slurm whose formats these commands follow


def answered(given: dict[str, object], usage: str) -> bool:
    """`--help`/`--usage` (the usage text) or `--version` answered, as every command answers them."""
    if given.get("help") or given.get("usage"):
        print(usage, end="" if usage.endswith("\n") else "\n")
        return True
    if given.get("version"):
        print(VERSION)
        return True
    return False


TIME_LIMIT_INVALID = "Requested time limit is invalid (missing or exceeds some limit)"


def refusal(name: str, exc: CorralError, failed: str) -> Refused:
    """A refused submission as Slurm says it (`failed`: `Batch job submission failed`): Slurm's own words where
    it has some, after corral's line that names the field and the fix; else corral's message."""
    if isinstance(exc, OverLimit) and exc.field == "time":  # ESLURM_INVALID_TIME_LIMIT
        print(f"{name}: error: {exc.message}", file=sys.stderr)
        return Refused(f"{failed}: {TIME_LIMIT_INVALID}")
    return Refused(f"{failed}: {exc.message}")


def caller() -> str:
    """The account running the command (`--me`, sacct's own jobs)."""
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


class Refused(Exception):
    """What the command says before it exits 1 (`<command>: error: <message>`)."""


def server() -> Server:
    """The server `corral` would talk to: `$CORRAL_URL`, else `$CORRAL_HOME`'s, else the shared one."""
    return Server(None, os.environ.get("CORRAL_HOME") or None)


# a command line getopt cannot read: sbatch exits 255, the others 1; sacct offers no --help hint
USAGE_STATUS = {"sbatch": 255}
NO_HINT = frozenset({"sacct"})


def run(name: str, main: Callable[[Sequence[str]], int], argv: Sequence[str] | None = None) -> int:
    """`main(argv)`'s exit status, with Slurm's messages for what went wrong."""
    try:
        return main(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        hint = "" if name in NO_HINT else f"\nTry \"{name} --help\" for more information"
        print(f"{name}: {exc}{hint}", file=sys.stderr)
        return USAGE_STATUS.get(name, 1)
    except (Refused, CorralError) as exc:
        message = exc.message if isinstance(exc, CorralError) else str(exc)
        print(f"{name}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `squeue | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - Python flushes stdout at exit
        except OSError:
            pass
        return 0
