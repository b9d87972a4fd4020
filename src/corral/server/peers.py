"""Who is on the other end of a connection, as the kernel tells it: no passwords on one machine.

- A Unix socket's peer: `SO_PEERCRED` gives the connecting process's uid (what munge and
  the Docker daemon rely on).
- A TCP connection from this machine (a browser, the SDK inside a job): the kernel's socket
  table (`/proc/net/tcp`) lists the client's end of the connection with the uid that opened
  it, as identd reads it. A connection from another machine has no such entry, so it proves
  nothing and must bring a token.

The uid is looked up once per connection, when it is made, and put in every request's ASGI
scope as `corral.peer_uid` (None when unknown).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import struct
import sys
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

PEER_UID = "corral.peer_uid"
_ESTABLISHED = "01"  # the st column of /proc/net/tcp
PEER_KIND = "corral.peer_kind"  # "socket" or "local" (TCP from this machine)


def socket_peer_uid(sock: Any) -> int | None:
    """The uid of a Unix socket's peer (SO_PEERCRED), or None."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


def tcp_peer_uid(server: tuple[str, int], client: tuple[str, int], table: str | None = None) -> int | None:
    """The uid owning the client's end of a TCP connection to `server`, if that end is on this machine.

    Only a live socket counts: one ESTABLISHED, with an inode. A client that sent its request and
    closed before the server looked leaves a TIME_WAIT or FIN_WAIT row, which the kernel lists
    as uid 0: taking that would make any user root.
    """
    try:
        version = ipaddress.ip_address(client[0]).version
    except ValueError:
        return None
    table = table or ("/proc/net/tcp" if version == 4 else "/proc/net/tcp6")
    want_local = f"{_proc_address(client[0])}:{client[1]:04X}"
    want_remote = f"{_proc_address(server[0])}:{server[1]:04X}"
    try:
        with open(table) as f:
            next(f, None)
            for line in f:
                fields = line.split()
                if len(fields) > 9 and fields[1] == want_local and fields[2] == want_remote:
                    if fields[3] != _ESTABLISHED or fields[9] == "0":
                        return None
                    return int(fields[7])
    except OSError:
        return None
    return None


def _proc_address(ip: str) -> str:
    """An address as /proc/net/tcp prints it: each 32-bit word in the machine's byte order, in hex."""
    packed = ipaddress.ip_address(ip).packed
    return "".join(f"{int.from_bytes(packed[i:i + 4], sys.byteorder):08X}" for i in range(0, len(packed), 4))


class PeerAwareProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, plus the peer's uid in each request's scope."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        self._peer: tuple[int | None, str | None] = (None, None)
        family = getattr(sock, "family", None)
        if family == socket.AF_UNIX:
            self._peer = (socket_peer_uid(sock), "socket")
        elif self.client is not None and self.server is not None and self.server[1] is not None:
            self._peer = (tcp_peer_uid((self.server[0], int(self.server[1])), self.client), "local")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[PEER_UID] = self._peer[0]  # type: ignore[literal-required]
        self.scope[PEER_KIND] = self._peer[1]  # type: ignore[literal-required]
