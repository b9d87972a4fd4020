"""Test servers forked from one process that imported the server once (tests/forked_server_main.py).

A server's start is mostly its imports (about a CPU second each, against a tenth for what follows), and the
suite starts hundreds: each test process keeps one such parent and asks it for each server, which then runs
`corral up` as `corral up --detach` runs it: its own session, a child of init, its output in the home's
server.log, the caller's environment and directory. A caller whose environment changes what an interpreter
does as it starts (PYTHONPATH, say) gets a real `corral up --detach` instead, as does everyone with
CORRAL_TEST_FORK_SERVERS=0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from corral.home import HomeLayout, read_server_info

MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forked_server_main.py")
# What an interpreter or the libraries it loads read as they start: a fork would keep the parent's.
AT_START = ("PYTHON", "LD_", "OMP_", "OPENBLAS_", "MKL_", "MALLOC_")


class ForkedServers:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parent: subprocess.Popen | None = None
        self._parent_env = dict(os.environ)  # as the test process began, before any test changed it

    def enabled(self) -> bool:
        return os.environ.get("CORRAL_TEST_FORK_SERVERS", "1") != "0"

    def start(self, args: list[str], home: str, timeout: float = 90) -> dict | None:
        """Start `corral up ARGS` (no --detach) for `home` and return its server info once it answers; None
        when this environment needs a fresh interpreter (the caller starts one itself).

        Raises:
            RuntimeError: it exited, or did not answer in time; the message holds its log's tail.
        """
        env = dict(os.environ)
        os.makedirs(home, mode=0o700, exist_ok=True)
        log = HomeLayout(home).server_log
        request = {"args": args, "env": env, "cwd": os.getcwd(), "umask": _umask(), "log": log}
        with self._lock:
            parent = self._parent_for(env)
            if parent is None:
                return None
            assert parent.stdin is not None and parent.stdout is not None
            parent.stdin.write(json.dumps(request) + "\n")
            parent.stdin.flush()
            answer = parent.stdout.readline()
        if not answer:
            raise RuntimeError(f"the server's parent process exited (status {parent.wait()})")
        pid = json.loads(answer)["pid"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = read_server_info(home)
            if info is not None and info.get("pid") == pid:
                return info
            if not _alive(pid):
                raise RuntimeError(f"the server exited at start:\n{_tail(log)}")
            time.sleep(0.02)
        raise RuntimeError(f"the server did not start within {timeout:.0f} s:\n{_tail(log)}")

    def _parent_for(self, env: dict[str, str]) -> subprocess.Popen | None:
        if not self.enabled() or _at_start(env) != _at_start(self._parent_env):
            return None
        if self._parent is not None and self._parent.poll() is None:
            return self._parent
        self._parent = subprocess.Popen([sys.executable, MAIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=self._parent_env)
        assert self._parent.stdout is not None
        if not self._parent.stdout.readline():
            raise RuntimeError(f"the server's parent process did not start (status {self._parent.wait()})")
        return self._parent


def _at_start(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(AT_START)}


def _umask() -> int:
    """This process's umask, read without setting it (os.umask would, for a moment, for every thread)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


FORKED = ForkedServers()
