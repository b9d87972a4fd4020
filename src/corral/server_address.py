"""Where the corral server is: a URL a person chose, else the home's address file, else the machine's
shared service. Light on purpose: every CLI call and Slurm command starts here.
"""

from __future__ import annotations

import os
import time

from corral.errors import ServerUnavailable
from corral.home import read_server_info, read_trusted_server_info, resolve_home, system_home

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_RATE_WAIT_S = 30.0  # a rate-limited call waits this long in all before it reports the 429
HOME_URL_ENV = "CORRAL_HOME_URL"
"""Set by corral in a job beside CORRAL_URL: that address is the home's server's as the job
started, not one the user chose, so the home's address file (a restarted server's) overrides it."""


def find_server(url: str | None = None, home: str | None = None) -> str:
    """The server's URL: `url`, else `$CORRAL_URL`, else the address file in the home."""
    return locate(url, home)[0]


def chosen_url(url: str | None) -> tuple[str | None, bool]:
    """(`url`, else `$CORRAL_URL`; whether a person chose it rather than corral for a job it started)."""
    given = (url or os.environ.get("CORRAL_URL") or "").rstrip("/") or None
    return given, given is not None and given != (os.environ.get(HOME_URL_ENV) or "").rstrip("/")


def locate(url: str | None, home: str | None) -> tuple[str, str | None]:
    """(URL, Unix socket or None). Without a URL: the home's server, else the machine's shared one.

    The URL corral gave a job yields to the home's address file, which a restarted server
    rewrites: a job that sees its home (on the server's machine, or a compute node sharing it)
    finds the server again on any port. It follows only a file that can be the server's alone
    (`read_trusted_server_info`: root's or the job's own user's) to the same host: the job's
    token goes to no other listener. The socket is taken where the server runs on this machine.

    Raises:
        ServerUnavailable: no server has announced itself in the home.
    """
    given, chosen = chosen_url(url)
    if given is not None and chosen:
        return given, None
    resolved = resolve_home(home)
    try:
        info = read_server_info(resolved) if given is None else _followed(resolved, given)
    except OSError:
        if given is None:
            raise
        info = None
    if info is None and given is not None:
        return given, None  # the home's server has not announced itself (yet): the address corral gave
    if info is None and home is None and not os.environ.get("CORRAL_HOME"):
        info = read_server_info(system_home())  # no server of one's own: the shared service's
    if info is None:
        raise ServerUnavailable(no_server_message(resolved))
    sock = info.get("socket")
    here = info.get("host") in (None, os.uname().nodename)  # a socket on a shared file system is another machine's
    return str(info["url"]), str(sock) if sock and here and os.path.exists(str(sock)) else None


def _followed(home: str, given: str) -> dict[str, object] | None:
    """The home's address file for the URL corral gave a job, if it is the server's (owned by root or by this
    process's user, whom a server serving others or this user alone runs as) and names the same host."""
    info = read_trusted_server_info(home, (0, os.geteuid()))
    if info is None or _host_of(str(info.get("url") or "")) != _host_of(given):
        return None
    return info


def _host_of(url: str) -> str:
    """`http://127.0.0.1:8765/x` -> `http://127.0.0.1`; `http://[::1]:1` -> `http://[::1]` (no urllib: the CLI's hot path)."""
    scheme, _, rest = url.partition("://")
    hostport = rest.partition("/")[0]
    host = hostport.rpartition(":")[0] if hostport.rpartition(":")[2].isdigit() else hostport
    return f"{scheme.lower()}://{host.lower()}"


def no_server_message(home: str) -> str:
    return f"no corral server is running for home {home}; start one with `corral up --detach --home {home}`"


def retrying_rate_limits(send: Callable[[], tuple[int, dict[str, str], bytes]]) -> tuple[int, dict[str, str], bytes]:
    """`send()`'s answer; a 429 (not processed) is sent again after the server's Retry-After, up to
    MAX_RATE_WAIT_S in all (the Python client and the CLI alike)."""
    waited = 0.0
    while True:
        status, headers, data = send()
        if status != 429 or waited >= MAX_RATE_WAIT_S:
            return status, headers, data
        pause = max(min(float(headers.get("retry-after") or 1), MAX_RATE_WAIT_S - waited), 0.05)
        time.sleep(pause)
        waited += pause
