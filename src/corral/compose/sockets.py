"""The sockets a server listens on: TCP for other machines, `<home>/corral.sock` for this one's users."""

from __future__ import annotations

import os
import socket

from corral.errors import InvalidRequest
from corral.home import HomeLayout


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except socket.gaierror as exc:
        sock.close()
        raise InvalidRequest("host", f"cannot resolve {host!r}: {exc.strerror}", "use an address such as 127.0.0.1") from None
    except OSError as exc:
        sock.close()
        raise InvalidRequest("port", f"cannot listen on {host}:{port}: {exc.strerror}", "pick another --port, or --port 0") from None
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def bind_unix_socket(home: str, shared: bool) -> socket.socket:
    """`<home>/corral.sock`: local callers connect here and the kernel tells the server who they are.

    Anyone may connect to a shared server's socket (identity comes from SO_PEERCRED, not from
    the file's mode); a personal server's is its user's alone.
    """
    path = HomeLayout(home).socket
    try:
        os.unlink(path)  # a dead server's: this one holds the home's lock
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o111 if shared else 0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock
