"""Running the server in the background (`corral up --detach`) and stopping it (`corral down`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from corral.errors import CorralError
from corral.home import HomeLayout, read_server_info, remove_server_info

START_TIMEOUT_S = 60.0


def start_detached(home: str, up_args: list[str]) -> dict[str, Any]:
    """Start `corral up` in its own session and return its address once it answers.

    Raises:
        CorralError: it exited or did not announce itself; the message holds its log's tail.
    """
    os.makedirs(home, mode=0o700, exist_ok=True)
    log_path = HomeLayout(home).server_log
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "corral.cli", *up_args], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        info = read_server_info(home)
        if info is not None and info.get("pid") == process.pid:
            return info
        if process.poll() is not None:
            raise CorralError(f"the server exited at start (status {process.returncode}):\n{_tail(log_path)}")
        time.sleep(0.05)
    process.terminate()
    raise CorralError(f"the server did not start within {START_TIMEOUT_S:.0f} s:\n{_tail(log_path)}")


def stop_server(home: str, timeout: float) -> int | None:
    """SIGTERM the home's server and wait for it to exit; None if none was running.

    Raises:
        CorralError: it did not exit in time.
    """
    info = read_server_info(home)
    if info is None:
        return None
    pid = int(info["pid"])
    if not _home_locked(home) or not _alive(pid):
        # the server died without cleaning up (kill -9): its pid may belong to another process by now
        remove_server_info(home, pid)
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return pid
        time.sleep(0.05)
    raise CorralError(f"the server (pid {pid}) did not stop within {timeout:.0f} s; `kill -9 {pid}` stops it for good")


def _home_locked(home: str) -> bool:
    """True while a server holds the home's lock (see corral.compose.home.acquire_home)."""
    from corral.executor.files import lock_held

    return lock_held(HomeLayout(home).lock)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is as good as gone
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""
