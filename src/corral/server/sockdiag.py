"""Who owns one TCP socket, asked of the kernel by the connection's four addresses (NETLINK_SOCK_DIAG).

What `ss -e` does, for one socket: an `inet_diag_req_v2` naming the exact source and destination
addresses and ports goes to the kernel over a netlink socket, and the answer (an `inet_diag_msg`)
carries the socket's state, owner uid and inode. One round trip, a few microseconds, however many
sockets the machine has; reading `/proc/net/tcp` instead costs a pass over every socket (18 ms at
6,000 of them).

The rules are those of the socket table: only an ESTABLISHED socket with an inode names its owner.
A TIME_WAIT socket (a client that sent and closed) is listed as uid 0 with no inode; taking that
would make anyone root.
"""

from __future__ import annotations

import errno
import itertools
import socket
import struct
import threading
from dataclasses import dataclass

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLMSG_ERROR = 0x2
TCP_ESTABLISHED = 1
_ALL_STATES = 0xFFFFFFFF
_NO_COOKIE = 0xFFFFFFFF  # INET_DIAG_NOCOOKIE: find the socket by its addresses alone

_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
# nlmsghdr, then inet_diag_req_v2: sdiag_family, sdiag_protocol, idiag_ext, pad, idiag_states, and its
# inet_diag_sockid: sport, dport (network byte order: htons), src, dst, idiag_if, idiag_cookie[2]
_REQUEST = struct.Struct("=IHHII" "BBBxI" "HH16s16sIII")
_SOCKID_SIZE = 48
_MSG_HEAD = struct.Struct("=BBBB")  # idiag_family, idiag_state, idiag_timer, idiag_retrans
_MSG_TAIL = struct.Struct("=IIIII")  # expires, rqueue, wqueue, uid, inode


@dataclass(frozen=True, slots=True)
class SocketOwner:
    """What the kernel says of one socket."""

    state: int  # TCP_ESTABLISHED (1), TCP_TIME_WAIT (6), ...
    uid: int
    inode: int

    @property
    def vouches(self) -> bool:
        """Whether this socket names a live owner: established, and with an inode."""
        return self.state == TCP_ESTABLISHED and self.inode != 0


class SockDiagUnavailable(OSError):
    """This kernel (or sandbox) does not answer sock_diag queries: use the socket table instead."""


class SockDiag:
    """One netlink socket to the kernel's socket diagnostics, asked one TCP socket at a time.

    Raises:
        SockDiagUnavailable: on creation, where netlink sock_diag cannot be opened.
    """

    def __init__(self, timeout_s: float = 0.5) -> None:
        try:
            self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
            self._sock.bind((0, 0))
        except (OSError, AttributeError) as exc:
            raise SockDiagUnavailable(getattr(exc, "errno", errno.EPROTONOSUPPORT), f"netlink sock_diag: {exc}") from None
        self._sock.settimeout(timeout_s)
        self._seq = itertools.count(1)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._sock.close()

    def find(self, local: tuple[str, int], remote: tuple[str, int]) -> SocketOwner | None:
        """The TCP socket on this machine whose own end is `local` and whose peer is `remote`, or None.

        Raises:
            SockDiagUnavailable: the kernel refused the question itself (not merely found nothing).
        """
        family, src, dst = _addresses(local[0], remote[0])
        if family is None:
            return None
        with self._lock:
            seq = next(self._seq)
            request = _REQUEST.pack(_REQUEST.size, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, 0,
                                    family, socket.IPPROTO_TCP, 0, _ALL_STATES, socket.htons(local[1]),
                                    socket.htons(remote[1]), src, dst, 0, _NO_COOKIE, _NO_COOKIE)
            try:
                self._sock.send(request)
                while True:
                    data = self._sock.recv(8192)
                    answer = _parse(data, seq)
                    if answer is not _STALE:
                        return answer  # type: ignore[return-value]
            except TimeoutError:
                raise SockDiagUnavailable(errno.ETIMEDOUT, "netlink sock_diag did not answer") from None
            except SockDiagUnavailable:
                raise
            except OSError as exc:
                raise SockDiagUnavailable(exc.errno, f"netlink sock_diag: {exc}") from None


_STALE = object()  # an answer to an earlier question (one that timed out): read on


def _parse(data: bytes, seq: int) -> object:
    if len(data) < _NLMSGHDR.size:
        raise SockDiagUnavailable(errno.EBADMSG, "netlink sock_diag: a short answer")
    _length, kind, _flags, got_seq, _pid = _NLMSGHDR.unpack_from(data)
    if got_seq != seq:
        return _STALE
    if kind == NLMSG_ERROR:
        (code,) = struct.unpack_from("=i", data, _NLMSGHDR.size)
        if -code in (errno.ENOENT, 0):
            return None  # no such socket (not on this machine, or gone)
        raise SockDiagUnavailable(-code, f"netlink sock_diag: {errno.errorcode.get(-code, -code)}")
    if kind != SOCK_DIAG_BY_FAMILY:
        raise SockDiagUnavailable(errno.EBADMSG, f"netlink sock_diag: an answer of type {kind}")
    offset = _NLMSGHDR.size
    _family, state, _timer, _retrans = _MSG_HEAD.unpack_from(data, offset)
    _expires, _rq, _wq, uid, inode = _MSG_TAIL.unpack_from(data, offset + _MSG_HEAD.size + _SOCKID_SIZE)
    return SocketOwner(state, uid, inode)


def _addresses(local: str, remote: str) -> tuple[int | None, bytes, bytes]:
    """The family and the two addresses as sock_diag takes them; an IPv4-mapped IPv6 pair becomes IPv4.

    (socket.inet_pton, not the ipaddress module: this runs for every connection, on the event loop.)
    """
    if local.startswith("::ffff:") and remote.startswith("::ffff:") and "." in local and "." in remote:
        local, remote = local[7:], remote[7:]
    family = socket.AF_INET6 if ":" in local else socket.AF_INET
    try:
        src, dst = socket.inet_pton(family, local), socket.inet_pton(family, remote)
    except (OSError, ValueError):
        return None, b"", b""
    return family, src.ljust(16, b"\0"), dst.ljust(16, b"\0")
