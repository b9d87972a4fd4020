"""The process's open runs: the current one (what `corral.log` and `corral.finish` act on), and the
hooks that look after them: at exit they are finished, on SIGTERM flushed, in a forked child stopped.

The hooks are installed once, by the first run `init` makes that records anything.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from corral.sdk.sender import logger

if TYPE_CHECKING:
    from corral.sdk.run import Run

SIGTERM_FLUSH_S = 3.0  # well inside the grace before SIGKILL (corral's default 10 s, Slurm's KillWait 30 s)

_current: Run | None = None
_open_runs: list[Run] = []
_hooks_installed = False
_uncaught_exception = False
_warned_child = False
_lock = threading.Lock()


def log(data: Mapping[str, Any], step: int | None = None) -> None:
    """`run.log` on the current run."""
    run = _current
    if run is None:
        raise RuntimeError("corral.log() needs a run: call corral.init() first")
    run.log(data, step)


def finish(state: str = "finished") -> None:
    """`run.finish` on the current run, if there is one."""
    if _current is not None:
        _current.finish(state)


def _remember(run: Run) -> None:
    global _hooks_installed
    with _lock:
        _open_runs.append(run)
        if not _hooks_installed:
            _hooks_installed = True
            atexit.register(_finish_open_runs)
            os.register_at_fork(after_in_child=_orphan_runs_in_child)
            _flush_on_sigterm()
            previous = sys.excepthook

            def excepthook(*args: Any) -> None:
                global _uncaught_exception
                _uncaught_exception = True
                previous(*args)

            sys.excepthook = excepthook


def _forget(run: Run) -> None:
    global _current
    with _lock:
        if run in _open_runs:
            _open_runs.remove(run)
        if _current is run:
            _current = None


def _orphan_runs_in_child() -> None:
    """A forked child (a DataLoader worker, say) has the parent's runs but no thread to send
    their data: what it logs would pile up unsent. Its runs stop recording, with one warning."""
    global _current
    for run in list(_open_runs):
        run.log = _logged_in_child  # type: ignore[method-assign]
        run._extend = _ignore
        run._finished = True
    _open_runs.clear()
    _current = None


def _logged_in_child(data: Any, step: int | None = None) -> None:
    global _warned_child
    if not _warned_child:
        _warned_child = True
        logger.warning("corral: run.log() in a forked child process is ignored; log from the parent, "
                       "or call corral.init() in the child")


def _flush_on_sigterm() -> None:
    """SIGTERM (cancel, time limit, preemption) ends Python without its atexit hooks; send what
    is queued first, then die of the signal as before. Only where nobody handles SIGTERM yet:
    a script's or a framework's own handler is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        pass


def _on_sigterm(signum: int, frame: Any) -> None:
    deadline = time.monotonic() + SIGTERM_FLUSH_S
    for run in list(_open_runs):
        if run._pid == os.getpid():
            # not finish(): a preempted job resumes this run; the server ends it if the job ends
            run.flush(max(0.0, deadline - time.monotonic()))
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _finish_open_runs() -> None:
    """At exit: finish what the script left open (failed if an exception ended it)."""
    for run in list(_open_runs):
        if run._pid == os.getpid():  # a forked child does not own its parent's runs
            run.finish("failed" if _uncaught_exception else "finished")



def _ignore_log(data: Any, step: int | None = None) -> None:
    pass


def _ignore(record: Any) -> None:
    pass
