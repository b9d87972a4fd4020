"""The server's home directory and the address file that lets every CLI call find the server."""

from __future__ import annotations

import json
import os
from typing import Any

SERVER_FILE = "server.json"
SOCKET_FILE = "corral.sock"
SYSTEM_HOME = "/var/lib/corral"  # the shared service's home (deploy/corral.service)


def resolve_home(home: str | None = None) -> str:
    """`--home`, else `$CORRAL_HOME`, else `~/.corral`; always absolute."""
    return os.path.abspath(os.path.expanduser(home or os.environ.get("CORRAL_HOME") or "~/.corral"))


def system_home() -> str:
    """Where the machine's shared corral service lives: `$CORRAL_SYSTEM_HOME`, else /var/lib/corral."""
    return os.environ.get("CORRAL_SYSTEM_HOME") or SYSTEM_HOME


def read_server_info(home: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(home, SERVER_FILE)) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def write_server_info(home: str, info: dict[str, Any]) -> None:
    from corral.atomic import write_json_atomic

    write_json_atomic(os.path.join(home, SERVER_FILE), info)


def remove_server_info(home: str, pid: int) -> None:
    """Remove the address file if it still names this server (a newer one may have replaced it)."""
    info = read_server_info(home)
    if info is not None and info.get("pid") == pid:
        try:
            os.unlink(os.path.join(home, SERVER_FILE))
        except FileNotFoundError:
            pass
