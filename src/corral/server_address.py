"""Where the corral server is: a URL a person chose, else the home's address file, else the machine's
shared service. Light on purpose: every CLI call and Slurm command starts here.
"""

from __future__ import annotations

import os
import time

from corral.errors import ServerUnavailable
from corral.home import read_server_info, resolve_home, system_home

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
    rewrites: a job on the server's machine finds it again on any port.

    Raises:
        ServerUnavailable: no server has announced itself in the home.
    """
    given, chosen = chosen_url(url)
    if given is not None and chosen:
        return given, None
    resolved = resolve_home(home)
    try:
        info = read_server_info(resolved)
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
    return str(info["url"]), str(sock) if sock and os.path.exists(str(sock)) else None


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
