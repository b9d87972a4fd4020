"""Naming a local TCP caller by the kernel's socket table: only a live socket vouches for a uid."""

from __future__ import annotations

import os
import socket

from corral.server.peers import tcp_peer_uid

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
