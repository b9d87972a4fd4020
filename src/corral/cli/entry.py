"""The `corral` program's first step: the quick commands (submit, plan, queue, show, cancel, hold, release, requeue, logs)
and `--version` run from here, without click; every other command line goes to the click group in
`corral.cli.main`, unchanged.

Only the global options (`--home`, `--url`, `--version`) are read here, as click reads them; anything
else before the command (`-h`, an unknown option, a missing value) is left to click to answer.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = list(sys.argv[1:] if argv is None else argv)
    given: dict[str, str] = {}
    version = False
    i = 0
    while i < len(args):
        arg = args[i]
        name, equals, value = arg.partition("=")
        if name in ("--home", "--url") and (equals or i + 1 < len(args)):
            given[name] = value if equals else args[i + 1]
            i += 1 if equals else 2
        elif arg == "--version":
            version = True
            i += 1
        elif arg.startswith("-"):
            _click(args)
        else:
            break
    if version:
        from corral import __version__

        print(f"corral, version {__version__}")
        sys.exit(0)
    from corral.cli.jobs import COMMANDS

    if i < len(args) and args[i] in ("resubmit", "sweep"):  # corral.cli.launch: quick commands too
        from corral.cli.launch import COMMANDS as LAUNCH_COMMANDS
        from corral.cli.launch import run_launch as run_command
        commands = LAUNCH_COMMANDS
    else:
        from corral.cli.jobs import run as run_command
        commands = COMMANDS
    if i == len(args) or args[i] not in commands:
        _click(args)
    # as click's envvar= reads them: an option given wins, else the variable if it is set and not empty
    home = given["--home"] if "--home" in given else os.environ.get("CORRAL_HOME") or None
    url = given["--url"] if "--url" in given else os.environ.get("CORRAL_URL") or None
    from corral.cli.options import HelpRequested

    try:
        status = run_command(commands[args[i]], args[i + 1:], home, url)
    except HelpRequested:
        _click(args)  # click writes the help, from the same declarations
    except KeyboardInterrupt:  # as click: a new line, then Aborted!
        print("\nAborted!", file=sys.stderr)
        status = 1
    except BrokenPipeError:  # `corral queue | head -1`: quiet, as click is
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - Python flushes stdout at exit
        status = 1
    sys.exit(status)


def _click(args: list[str]) -> NoReturn:
    from corral.cli.main import main as click_main

    click_main(args)
    sys.exit(0)  # click exits itself; here for the type checker
