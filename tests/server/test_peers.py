"""Naming a local TCP caller by the kernel's socket table: only a live socket vouches for a uid."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import pwd
import socket
import subprocess
import threading
import time
from unittest import mock

import pytest

from corral.server.peers import (
    LATER, PEER_KEY, PEER_REFUSED, PEER_UID, PeerFinder, peer_protocol, read_table, settle_peer, tcp_peer_uid,
)
from tests.helpers import wait_for

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
# 127.0.0.1:40000 -> 127.0.0.1:8765, as /proc/net/tcp prints it on a little-endian machine
ROW = "   0: 0100007F:9C40 0100007F:223D {st} 00000000:00000000 00:00000000 00000000  {uid}        0 {inode} 1 0 20 4 30 10 -1\n"


def table(tmp_path, **row) -> str:
    path = tmp_path / "tcp"
    path.write_text(HEADER + ROW.format(**row))
    return str(path)


def test_an_established_socket_names_its_owner(tmp_path):
    assert tcp_peer_uid(("127.0.0.1", 8765), ("127.0.0.1", 40000), table(tmp_path, st="01", uid=1001, inode=4242)) == 1001


def test_a_closed_clients_leftover_row_names_nobody_not_root(tmp_path):
    # sent, then closed before the server looked: TIME_WAIT (06) or FIN_WAIT2 (05), uid 0, no inode
    for state in ("06", "05", "08"):
        assert tcp_peer_uid(("127.0.0.1", 8765), ("127.0.0.1", 40000), table(tmp_path, st=state, uid=0, inode=0)) is None
    assert tcp_peer_uid(("127.0.0.1", 8765), ("127.0.0.1", 40000), table(tmp_path, st="01", uid=0, inode=0)) is None


def test_the_real_table_names_this_process_for_its_own_connection():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = socket.create_connection(listener.getsockname())
    try:
        assert tcp_peer_uid(listener.getsockname(), client.getsockname()) == os.geteuid()
        assert tcp_peer_uid(listener.getsockname(), ("127.0.0.1", 1)) is None  # nobody's socket
    finally:
        client.close()
        listener.close()


# -- sock_diag: the kernel asked about one socket --------------------------------------------------

def _pair(listener: socket.socket) -> tuple[socket.socket, socket.socket]:
    client = socket.create_connection(listener.getsockname()[:2])
    accepted, _ = listener.accept()
    return client, accepted


def test_sock_diag_names_the_owner_the_socket_table_names():
    from corral.server.sockdiag import SockDiag

    diag = SockDiag()
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        listener = socket.socket(family)
        listener.bind((host, 0))
        listener.listen(8)
        client, accepted = _pair(listener)
        try:
            server_end, client_end = accepted.getsockname()[:2], accepted.getpeername()[:2]
            owner = diag.find(client_end, server_end)
            assert owner is not None and owner.vouches and owner.uid == os.geteuid()
            assert owner.uid == tcp_peer_uid(server_end, client_end)
            assert diag.find((host, 1), server_end) is None  # nobody's socket
        finally:
            client.close()
            accepted.close()
            listener.close()
    diag.close()


def test_sock_diag_sees_a_dual_stack_servers_ipv4_client():
    from corral.server.sockdiag import SockDiag

    listener = socket.socket(socket.AF_INET6)
    listener.bind(("::", 0))
    listener.listen(8)
    client = socket.create_connection(("127.0.0.1", listener.getsockname()[1]))
    accepted, peer = listener.accept()
    try:
        assert peer[0] == "::ffff:127.0.0.1"
        owner = SockDiag().find(peer[:2], accepted.getsockname()[:2])
        assert owner is not None and owner.vouches and owner.uid == os.geteuid()
    finally:
        client.close()
        accepted.close()
        listener.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="connections of another user need root to make them")
def test_sock_diag_and_the_socket_table_agree_on_another_users_connection(os_users):
    from corral.server.sockdiag import SockDiag

    alice, _ = os_users
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    holder = subprocess.Popen(
        ["runuser", "-u", alice, "--", "/usr/bin/python3", "-c",
         "import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); sys.stdin.read()",
         str(listener.getsockname()[1])], stdin=subprocess.PIPE, cwd="/")
    try:
        accepted, client_end = listener.accept()
        owner = SockDiag().find(client_end, listener.getsockname())
        assert owner is not None and owner.vouches
        assert owner.uid == pwd.getpwnam(alice).pw_uid == tcp_peer_uid(listener.getsockname(), client_end)
        accepted.close()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        listener.close()


def test_a_client_that_closed_first_names_nobody_not_root():
    # its end lingers in TIME_WAIT, which the kernel reports as uid 0 without an inode
    finder = PeerFinder()
    assert finder.diag is not None
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    client, accepted = _pair(listener)
    client_end, server_end = client.getsockname(), listener.getsockname()
    client.close()
    accepted.recv(1)  # the client's FIN
    accepted.close()
    try:
        owner = finder.diag.find(client_end, server_end)
        assert owner is None or not owner.vouches
        assert finder.now(server_end, client_end) is None
        assert tcp_peer_uid(server_end, client_end) is None
    finally:
        listener.close()


# -- without netlink: the socket table, read in a thread, once for a burst --------------------------

def test_without_sock_diag_a_burst_of_connections_shares_one_read_of_the_table_off_the_loop():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    pairs = [_pair(listener) for _ in range(40)]
    finder = PeerFinder(diag=None)
    loop_thread = threading.get_ident()
    read_in: list[int] = []

    def read(*paths):
        read_in.append(threading.get_ident())
        return read_table(*paths)

    async def burst():
        made = finder.table.clock()
        assert isinstance(finder.now(listener.getsockname(), pairs[0][0].getsockname()), type(LATER))
        with mock.patch("corral.server.peers.read_table", read):
            return await asyncio.gather(*(finder.later(listener.getsockname(), c.getsockname(), made) for c, _ in pairs))

    try:
        assert asyncio.run(burst()) == [os.geteuid()] * 40
        assert finder.table.reads == 1 and read_in and loop_thread not in read_in
        # a connection made after the last read is not in it: the table is read again, not trusted stale
        late = _pair(listener)
        pairs.append(late)
        assert asyncio.run(finder.later(listener.getsockname(), late[0].getsockname(), time.monotonic())) == os.geteuid()
        assert finder.table.reads == 2
    finally:
        for client, accepted in pairs:
            client.close()
            accepted.close()
        listener.close()


# -- the protocol: the peer in each request's scope, and a cap on each peer's connections ------------

@contextlib.contextmanager
def echo_server(protocol):
    """uvicorn with `protocol`, in a thread, answering each request with what its scope says of the peer."""
    import uvicorn

    async def app(scope, receive, send):
        await settle_peer(scope)
        body = json.dumps({"uid": scope[PEER_UID], "key": scope[PEER_KEY], "refused": scope[PEER_REFUSED]}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, http=protocol, lifespan="off", log_level="warning", ws="none"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield listener.getsockname()
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.close()


@pytest.mark.parametrize("finder", ["sock_diag", "socket table"])
def test_each_peer_holds_at_most_its_cap_of_connections_and_is_named_in_the_scope(finder):
    protocol = peer_protocol(3, PeerFinder() if finder == "sock_diag" else PeerFinder(diag=None))
    with echo_server(protocol) as address:
        conns = [http.client.HTTPConnection(*address, timeout=30) for _ in range(5)]
        for conn in conns:
            conn.connect()
        try:
            answers = []
            for conn in conns:
                conn.request("GET", "/")
                answers.append(json.loads(conn.getresponse().read()))
            assert all(a["uid"] == os.geteuid() and a["key"] == f"uid:{os.geteuid()}" for a in answers)
            refused = [a["refused"] for a in answers if a["refused"]]
            assert len(refused) == 2 and "max_connections_per_user = 3" in refused[0]
        finally:
            for conn in conns:
                conn.close()
        # closed connections give their places back
        def admitted() -> bool:
            conn = http.client.HTTPConnection(*address, timeout=30)
            try:
                conn.request("GET", "/")
                return json.loads(conn.getresponse().read())["refused"] is None
            finally:
                conn.close()
        assert wait_for(admitted, timeout=15)
