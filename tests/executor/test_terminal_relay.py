"""The supervisor's side of an interactive job without a terminal (`corral.executor.terminal`), driven frame by
frame: input written to the job, then an end of input that reaches the supervisor in a read of its own, after the
input was written. The job (`cat`) must see the end of its input and end; it used to wait forever, the relay
waiting on the job and the job on its input (a `printf ... | srun tac` that hung under load)."""

from __future__ import annotations

import os
import socket
import subprocess

from corral.core.jobspec import terminal_frames as tf
from corral.executor.terminal import Terminal


def _frames_until(sock: socket.socket, reader: tf.Reader, kind: int) -> bytes:
    """What the relay sends of `kind` until some arrives (the socket times out otherwise)."""
    got = b""
    while not got:
        data = sock.recv(1 << 16)
        assert data, "the relay closed the connection"
        got += b"".join(payload for k, payload in reader.feed(data) if k == kind)
    return got


def test_an_end_of_input_arriving_after_the_input_was_written_ends_the_jobs_input(short_tmp):
    terminal = Terminal({"socket": os.path.join(short_tmp, "t.sock"), "mode": "pipe", "grace_s": 5}, None, None)
    terminal.prepare()
    stdin, stdout, stderr = terminal.child_fds
    job = subprocess.Popen(["cat"], stdin=stdin, stdout=stdout, stderr=stderr)
    terminal.after_fork()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(10)
    client.connect(terminal.path)
    client.sendall(tf.frame(tf.HELLO, tf.SIZE.pack(24, 80)))
    wake_r, wake_w = os.pipe()
    try:
        terminal.await_client(lambda: False, wake_r)
        terminal.start()
        reader = tf.Reader()
        client.sendall(tf.frame(tf.STDIN, b"one\n"))
        assert _frames_until(client, reader, tf.STDOUT) == b"one\n"  # written, and the relay is waiting again
        client.sendall(tf.frame(tf.STDIN_EOF))
        assert job.wait(timeout=10) == 0
        terminal.finish(0)
        assert tf.EXIT in [kind for kind, _ in reader.feed(client.recv(1 << 16))]
    finally:
        job.kill()
        job.wait()
        client.close()
        for fd in (wake_r, wake_w):
            os.close(fd)
