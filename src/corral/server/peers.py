"""Who is on the other end of a connection, as the kernel tells it: no passwords on one machine.

- A Unix socket's peer: `SO_PEERCRED` gives the connecting process's uid (what munge and
  the Docker daemon rely on).
- A TCP connection from this machine (a browser, the SDK inside a job): the kernel names the
  owner of the client's end. Asked with NETLINK_SOCK_DIAG for that one socket
  (`corral.server.sockdiag`, microseconds, on the event loop); where netlink is unavailable,
  from the socket table (`/proc/net/tcp`, as identd reads it), read in a worker thread and shared
  by every connection made before the read began. A connection from another machine has no
  such socket here, so it proves nothing and must bring a token.

The uid is looked up once per connection, when it is made, and put in every request's ASGI
scope as `corral.peer_uid` (None when unknown), with `corral.peer_key`: whom the per-peer caps
and limits count against (the local uid, else the remote address).

Each peer may hold `max_connections_per_user` connections at once (`[auth]`); the requests of
a connection beyond that are answered 429 and the connection closed, so one user's flood of
connections costs the others nothing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import struct
import sys
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from corral.core.access.caps import ConcurrencyCap
from corral.server.sockdiag import SockDiag, SockDiagUnavailable

log = logging.getLogger("corral.server")

PEER_UID = "corral.peer_uid"
PEER_KIND = "corral.peer_kind"  # "socket" or "local" (TCP from this machine)
PEER_KEY = "corral.peer_key"  # "uid:1001" or "ip:10.0.0.5": whom per-peer caps and limits count against
PEER_REFUSED = "corral.peer_refused"  # why this connection's requests are refused (over its peer's cap)
PEER_PENDING = "corral.peer_pending"  # a future of the Peer, while the socket table is being read
_ESTABLISHED = "01"  # the st column of /proc/net/tcp
DEFAULT_MAX_CONNECTIONS = 256
REFUSED_IDLE_S = 2.0  # a refused connection that sends no request is closed this soon


@dataclass(slots=True)
class Peer:
    """A connection's other end: its uid (None: unknown), how it was learned, and whom it counts against."""

    uid: int | None
    kind: str | None
    key: str
    refused: str | None = None

    def scope_items(self) -> dict[str, Any]:
        return {PEER_UID: self.uid, PEER_KIND: self.kind, PEER_KEY: self.key, PEER_REFUSED: self.refused}


def peer_key(uid: int | None, client: tuple[str, int] | None) -> str:
    """Whom a connection counts against: its local user, else its address."""
    if uid is not None:
        return f"uid:{uid}"
    return f"ip:{client[0]}" if client else "unknown"


def socket_peer_uid(sock: Any) -> int | None:
    """The uid of a Unix socket's peer (SO_PEERCRED), or None."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


# -- the socket table (/proc/net/tcp): the fallback ---------------------------------------------------

_Row = tuple[str, int, str]  # st, uid, inode
_Table = dict[tuple[str, str], _Row]  # (local, remote) as the table prints them -> the row


def tcp_peer_uid(server: tuple[str, int], client: tuple[str, int], table: str | None = None) -> int | None:
    """The uid owning the client's end of a TCP connection to `server`, from the socket table (a full read).

    Only a live socket counts: one ESTABLISHED, with an inode. A client that sent its request and
    closed before the server looked leaves a TIME_WAIT or FIN_WAIT row, which the kernel lists
    as uid 0: taking that would make any user root.
    """
    try:
        version = ipaddress.ip_address(client[0]).version
    except ValueError:
        return None
    rows = read_table(table or ("/proc/net/tcp" if version == 4 else "/proc/net/tcp6"))
    return _owner(rows, server, client)


def read_table(*paths: str) -> _Table:
    """The rows of socket tables (`/proc/net/tcp`, `/proc/net/tcp6`), by their two addresses; unreadable: none."""
    rows: _Table = {}
    for path in paths:
        try:
            with open(path) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 9:
                        rows[(fields[1], fields[2])] = (fields[3], int(fields[7]), fields[9])
        except (OSError, ValueError):
            continue
    return rows


def _owner(rows: _Table, server: tuple[str, int], client: tuple[str, int]) -> int | None:
    try:
        key = (f"{_proc_address(client[0])}:{client[1]:04X}", f"{_proc_address(server[0])}:{server[1]:04X}")
    except ValueError:
        return None
    row = rows.get(key)
    if row is None or row[0] != _ESTABLISHED or row[2] == "0":
        return None
    return row[1]


def _proc_address(ip: str) -> str:
    """An address as /proc/net/tcp prints it: each 32-bit word in the machine's byte order, in hex."""
    packed = ipaddress.ip_address(ip).packed
    return "".join(f"{int.from_bytes(packed[i:i + 4], sys.byteorder):08X}" for i in range(0, len(packed), 4))


class SocketTable:
    """The socket table read off the event loop, one read shared by every connection made before it began.

    A connection may use a read only if the read began after the connection was made (its row is in
    it): a burst of connections costs one pass over the table, not one each, and never one on the loop.
    """

    def __init__(self, paths: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6"),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.paths = paths
        self.clock = clock
        self.reads = 0
        self._latest: tuple[float, _Table] | None = None
        self._reading: tuple[float, asyncio.Future[_Table]] | None = None

    async def owner(self, server: tuple[str, int], client: tuple[str, int], since: float) -> int | None:
        """The uid owning `client`'s end of a connection made at `since` (this clock), or None."""
        latest = self._latest
        if latest is None or latest[0] < since:
            reading = self._reading
            if reading is None or reading[0] < since:
                began = self.clock()
                self.reads += 1
                future = asyncio.ensure_future(asyncio.to_thread(read_table, *self.paths))
                reading = self._reading = (began, future)
            rows = await asyncio.shield(reading[1])
            if self._latest is None or self._latest[0] < reading[0]:
                self._latest = (reading[0], rows)
        else:
            rows = latest[1]
        return _owner(rows, server, client)


class PeerFinder:
    """Names the local owner of TCP connections: sock_diag now, else the socket table in a thread."""

    def __init__(self, diag: SockDiag | None | bool = True, table: SocketTable | None = None) -> None:
        if diag is True:
            try:
                diag = SockDiag()
            except SockDiagUnavailable as exc:
                log.warning("corral: %s; naming local TCP callers from /proc/net/tcp instead (in a thread)", exc)
                diag = None
        self.diag: SockDiag | None = diag or None
        self.table = table or SocketTable()

    def now(self, server: tuple[str, int], client: tuple[str, int]) -> int | None | _Later:
        """The uid at once (sock_diag), or LATER: ask `later` (the socket table, off the loop)."""
        if self.diag is None:
            return LATER
        try:
            owner = self.diag.find(client, server)
        except SockDiagUnavailable as exc:
            log.warning("corral: %s; naming local TCP callers from /proc/net/tcp instead (in a thread)", exc)
            self.diag = None
            return LATER
        return owner.uid if owner is not None and owner.vouches else None

    async def later(self, server: tuple[str, int], client: tuple[str, int], since: float) -> int | None:
        return await self.table.owner(server, client, since)


class _Later:
    pass


LATER = _Later()


# -- the protocol --------------------------------------------------------------------------------------

def peer_protocol(max_connections: int = DEFAULT_MAX_CONNECTIONS, finder: PeerFinder | None = None) -> type[PeerAwareProtocol]:
    """uvicorn's `http=` protocol class for one server: its own peer finder and per-peer connection cap."""
    return type("ServerPeerProtocol", (PeerAwareProtocol,),
                {"finder": finder or PeerFinder(), "connection_cap": ConcurrencyCap(max_connections)})


class PeerAwareProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, plus the peer in each request's scope, and a cap on each peer's connections."""

    finder: PeerFinder
    connection_cap: ConcurrencyCap

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._peer: Peer | asyncio.Future[Peer] = Peer(None, None, peer_key(None, self.client))
        self._counted: str | None = None
        self._idle: asyncio.TimerHandle | None = None
        if self.client is None:  # no address: a Unix socket's peer, or none at all
            sock = transport.get_extra_info("socket")
            if getattr(sock, "family", None) == socket.AF_UNIX:
                self._peer = self._admit(socket_peer_uid(sock), "socket")
        elif self.server is not None and self.server[1] is not None:
            server = (self.server[0], int(self.server[1]))
            uid = self.finder.now(server, self.client)
            if isinstance(uid, _Later):
                self._peer = asyncio.ensure_future(self._find_later(server, self.client, self.finder.table.clock()))
            else:
                self._peer = self._admit(uid, "local")

    async def _find_later(self, server: tuple[str, int], client: tuple[str, int], since: float) -> Peer:
        try:
            uid = await self.finder.later(server, client, since)
        except Exception:  # noqa: BLE001 - an unreadable table names nobody; the request may still bring a token
            log.exception("corral: could not read the socket table")
            uid = None
        if self.transport.is_closing():
            return Peer(uid, "local", peer_key(uid, client))
        return self._admit(uid, "local")

    def _admit(self, uid: int | None, kind: str) -> Peer:
        key = peer_key(uid, self.client)
        if self.connection_cap.acquire(key):
            self._counted = key
            return Peer(uid, kind, key)
        limit = self.connection_cap.limit
        who = f"uid {uid}" if uid is not None else (self.client[0] if self.client else "this peer")
        reason = (f"{who} already has {limit} connections open to this server (its limit, "
                  f"[auth] max_connections_per_user = {limit}); close some, or ask an admin to raise it")
        # answered (429) if it sends a request; closed soon if it does not
        self._idle = asyncio.get_event_loop().call_later(REFUSED_IDLE_S, self.transport.close)
        return Peer(uid, kind, key, reason)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._counted is not None:
            self.connection_cap.release(self._counted)
            self._counted = None
        if self._idle is not None:
            self._idle.cancel()
        if isinstance(self._peer, asyncio.Future) and not self._peer.done():
            self._peer.add_done_callback(lambda _: self._release_late())

    def _release_late(self) -> None:
        if self._counted is not None:  # identified after the connection was lost
            self.connection_cap.release(self._counted)
            self._counted = None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # a refused connection keeps its close timer: a request begun and never finished must not hold it open
        peer = self._peer
        if isinstance(peer, asyncio.Future):
            if not peer.done():
                self.scope.update(Peer(None, None, peer_key(None, self.client)).scope_items())  # type: ignore[typeddict-item]
                self.scope[PEER_PENDING] = peer  # type: ignore[literal-required]
                return
            peer = peer.result()
        self.scope.update(peer.scope_items())  # type: ignore[typeddict-item]


async def settle_peer(scope: MutableMapping[str, Any]) -> None:
    """Wait for the peer of a request whose connection is still being looked up in the socket table."""
    pending = scope.pop(PEER_PENDING, None)
    if pending is not None:
        peer: Peer = await asyncio.shield(pending)
        scope.update(peer.scope_items())
