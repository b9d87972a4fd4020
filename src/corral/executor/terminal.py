"""An interactive job's end of the line (`srun`, `salloc`): its socket, its pseudo-terminal or pipes, and
the relay between them and the one client allowed in.

The supervisor makes the socket before the job runs, in the job's directory, owned by the job's owner and
0600: no one else may connect, and the peer's credentials are checked again on accept (the owner or
root). The job waits at its start gate until the client has said hello (so not a byte of its output is
lost); a client that never comes within `connect_timeout_s`, or one gone for longer than `grace_s`, ends
the job, so an abandoned shell never holds GPUs.

With a terminal (`srun --pty`) the job gets a pseudo-terminal as its controlling terminal: the line
discipline does the rest (Ctrl-C, Ctrl-Z and window sizes reach its foreground process group, as with
ssh). Without one it gets pipes, and the client's signals are passed on.

Only the standard library: the supervisor imports this, and it starts for every job.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from corral.core.jobspec import terminal_frames as tf
from corral.executor import files

READ_SIZE = 1 << 16
FINAL_SEND_S = 5.0  # the exit status's send to a client that may have stopped reading
BURST = 1 << 18
PEER_CRED = struct.Struct("3i")  # pid, uid, gid: struct ucred


class NoClient(Exception):
    """The client did not come (or was not allowed in) before the job had to give up waiting."""


class Terminal:
    """One interactive job's socket and stdio, and the thread that relays between them."""

    def __init__(self, spec: Mapping[str, Any], owner_uid: int | None, owner_gid: int | None) -> None:
        self.path = str(spec["socket"])
        self.pty = spec.get("mode") == "pty"
        self.grace_s = float(spec.get("grace_s", 30.0))
        self.connect_timeout_s = float(spec.get("connect_timeout_s", 120.0))
        self.owner_uid = owner_uid
        self.owner_gid = owner_gid
        self.listener: socket.socket | None = None
        self.conn: socket.socket | None = None
        self.send_lock = threading.Lock()
        self.child_fds: tuple[int, int, int] = (-1, -1, -1)
        self.input_fd: int | None = None  # the job's stdin (the pty's master, or a pipe)
        self.output_fds: list[int] = []  # the pty's master, or the stdout and stderr pipes
        self.thread: threading.Thread | None = None
        self.stop_r, self.stop_w = -1, -1  # wakes the relay: b"n" a notice is queued, b"x" stop
        self.notices: collections.deque[bytes] = collections.deque()
        self.on_abandoned: Callable[[str], None] = lambda why: None
        self.on_signal: Callable[[int], None] = lambda signum: None
        self.size = (24, 80)

    def prepare(self) -> None:
        """Make the socket and the job's stdio (before the fork: the child takes its ends).

        Raises:
            OSError: the socket or the pseudo-terminal could not be made.
        """
        try:
            os.unlink(self.path)  # a requeued job's, or a dead supervisor's
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            with reachable(self.path) as address:
                listener.bind(address)
        finally:
            os.umask(old)
        if self.owner_uid is not None:
            os.chown(self.path, self.owner_uid, -1)
        os.chmod(self.path, 0o600)
        listener.listen(2)
        self.listener = listener
        if self.pty:
            master, slave = os.openpty()
            if self.owner_uid is not None:
                # as sshd does: the owner's terminal is the owner's (tty(1), programs that reopen it by name)
                os.fchown(slave, self.owner_uid, _tty_group(self.owner_gid))
                os.fchmod(slave, 0o620)
            self.child_fds = (slave, slave, slave)
            self.input_fd = master
            self.output_fds = [master]
        else:
            stdin_r, stdin_w = os.pipe()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            self.child_fds = (stdin_r, out_w, err_w)
            self.input_fd = stdin_w
            self.output_fds = [out_r, err_r]
        for fd in (self.input_fd, *self.output_fds):
            os.set_inheritable(fd, False)
            os.set_blocking(fd, False)  # bursts are read until the descriptor is empty; input is written as it drains
        self.stop_r, self.stop_w = os.pipe()
        os.set_blocking(self.stop_w, False)

    def after_fork(self) -> None:
        """In the supervisor, once the child holds its ends: close ours of them."""
        for fd in set(self.child_fds):
            os.close(fd)
        self.child_fds = (-1, -1, -1)

    def await_client(self, should_stop: Callable[[], bool], wake_fd: int) -> None:
        """Wait for the job's client to connect and say hello; then the job may start.

        Raises:
            NoClient: none came in time, or `should_stop` (a cancel) said to give up.
        """
        assert self.listener is not None
        deadline = time.monotonic() + self.connect_timeout_s
        while True:
            left = deadline - time.monotonic()
            if should_stop():
                raise NoClient("cancelled before its terminal connected")
            if left <= 0:
                raise NoClient(f"no client connected to its terminal within {self.connect_timeout_s:g} s")
            ready, _, _ = select.select([self.listener, wake_fd], [], [], min(left, 1.0))
            if wake_fd in ready:
                files.drain(wake_fd)
            if self.listener in ready and self._accept(deadline):
                return

    def _accept(self, deadline: float) -> bool:
        """Take one connection: kept if it is the owner's (or root's) and says hello in time."""
        assert self.listener is not None
        conn, _ = self.listener.accept()
        _, uid, _ = PEER_CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEER_CRED.size))
        if uid not in (0, os.geteuid() if self.owner_uid is None else self.owner_uid):
            conn.close()
            return False
        conn.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
        reader = tf.Reader()
        try:
            while True:
                data = conn.recv(READ_SIZE)
                if not data:
                    conn.close()
                    return False
                frames = reader.feed(data)
                if frames:
                    break
        except (OSError, ValueError):
            conn.close()
            return False
        kind, payload = frames[0]
        if kind != tf.HELLO or len(payload) != tf.SIZE.size:
            conn.close()
            return False
        conn.settimeout(None)
        self.conn = conn
        self._resize(payload)
        self.pending = frames[1:]
        self.reader = reader
        return True

    def start(self) -> None:
        """Relay between the client and the job from now on, in a thread of its own."""
        self.thread = threading.Thread(target=self._relay, name="terminal", daemon=True)
        self.thread.start()

    def notice(self, text: str) -> None:
        """A line for the client's stderr (a warning, the job's stop), if it is still there. Queued for the
        relay thread: the supervisor's own thread must never wait on a client that stopped reading (it
        enforces the job's time limit)."""
        self.notices.append(tf.frame(tf.NOTICE, (text.rstrip("\n") + "\n").encode(errors="replace")))
        try:
            os.write(self.stop_w, b"n")
        except (BlockingIOError, OSError):
            pass  # a wake-up is already pending

    def finish(self, status: int, timeout: float = 5.0) -> None:
        """The job has ended: pass on the rest of its output, then its exit status; close."""
        if self.thread is not None:
            self.thread.join(timeout)  # the outputs end once the job's last process is gone
            if self.thread.is_alive():  # blocked on a client that does not read: cut it off
                with contextlib.suppress(OSError):
                    os.write(self.stop_w, b"x")
                conn = self.conn
                if conn is not None:
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)
                self.thread.join(1.0)
        if self.conn is not None:
            self.conn.settimeout(FINAL_SEND_S)
        while self.notices:
            self._send_frame(self.notices.popleft())
        self._send(tf.EXIT, tf.STATUS.pack(status))
        self._close()

    def _relay(self) -> None:
        conn = self.conn
        assert conn is not None
        outputs = list(self.output_fds)
        kinds = {fd: kind for fd, kind in zip(self.output_fds, (tf.STDOUT, tf.STDERR))}
        to_job = bytearray()
        eof_asked = False
        lost_at: float | None = None
        for kind, payload in getattr(self, "pending", []):
            eof_asked |= self._from_client(kind, payload, to_job)
        while outputs:
            # before waiting: an end of input that came in a read of its own (after the data it follows was
            # written) must not wait for the job, which waits for it
            if eof_asked and not to_job:
                self._end_input()
                eof_asked = False
            reading: list[Any] = [*outputs, self.stop_r, *([conn] if conn is not None else [])]
            writing = [self.input_fd] if to_job and self.input_fd is not None else []
            timeout = None if lost_at is None else max(0.0, lost_at + self.grace_s - time.monotonic())
            try:
                readable, writable, _ = select.select(reading, writing, [], timeout)
            except InterruptedError:
                continue
            if self.stop_r in readable:
                if b"x" in _read_wakeups(self.stop_r):
                    return
                while self.notices and conn is not None:
                    if not self._send_frame(self.notices.popleft()):
                        conn, lost_at = None, time.monotonic()
            if lost_at is not None and time.monotonic() >= lost_at + self.grace_s:
                self.on_abandoned(f"its terminal's client has been gone for {self.grace_s:g} s")
                lost_at = float("inf")  # said once; the relay drains the job's output until it ends
            if writable:
                try:
                    del to_job[:os.write(self.input_fd, to_job)]  # type: ignore[arg-type]
                except BlockingIOError:
                    pass  # select said it had room; another writer may have taken it
                except OSError:
                    to_job.clear()  # the job closed its stdin
            for fd in [fd for fd in outputs if fd in readable]:
                data, ended = _read_burst(fd)
                if ended:
                    outputs.remove(fd)
                if data and conn is not None and not self._send(kinds.get(fd, tf.STDOUT), data):
                    conn, lost_at = None, time.monotonic()
            if conn is not None and conn in readable:
                try:
                    data = conn.recv(READ_SIZE)
                    frames = self.reader.feed(data) if data else None
                except (OSError, ValueError):
                    frames = None
                if frames is None:
                    conn, lost_at = None, time.monotonic()
                    with self.send_lock:
                        self.conn = None
                    continue
                for kind, payload in frames:
                    eof_asked |= self._from_client(kind, payload, to_job)

    def _from_client(self, kind: int, payload: bytes, to_job: bytearray) -> bool:
        """Act on one client frame; True when it asks to end the job's input."""
        if kind == tf.STDIN:
            to_job += payload
        elif kind == tf.WINSIZE and len(payload) == tf.SIZE.size:
            self._resize(payload)
        elif kind == tf.SIGNAL and len(payload) == 1 and payload[0] in _PASSED_SIGNALS:
            self.on_signal(payload[0])
        elif kind == tf.STDIN_EOF:
            return True
        return False

    def _end_input(self) -> None:
        if self.pty:
            self.to_pty_eof()
        elif self.input_fd is not None:
            os.close(self.input_fd)
            self.input_fd = None

    def to_pty_eof(self) -> None:
        try:
            os.write(self.output_fds[0], b"\x04")  # the terminal's end-of-file character
        except OSError:
            pass

    def _resize(self, payload: bytes) -> None:
        rows, cols = tf.SIZE.unpack(payload)
        self.size = (rows, cols)
        if self.pty and rows and cols:
            import fcntl
            import termios

            # the kernel then sends SIGWINCH to the terminal's foreground process group
            fcntl.ioctl(self.output_fds[0], termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def _send(self, kind: int, payload: bytes) -> bool:
        return self._send_frame(tf.frame(kind, payload))

    def _send_frame(self, frame: bytes) -> bool:
        with self.send_lock:
            if self.conn is None:
                return False
            try:
                self.conn.sendall(frame)
                return True
            except OSError:
                self.conn = None
                return False

    def _close(self) -> None:
        with self.send_lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        for fd in {*self.output_fds, *([self.input_fd] if self.input_fd is not None else []),
                   self.stop_r, self.stop_w}:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _read_wakeups(fd: int) -> bytes:
    try:
        return os.read(fd, 512)
    except OSError:
        return b""


def _read_burst(fd: int) -> tuple[bytes, bool]:
    """What `fd` holds now, up to BURST bytes, and whether it has ended. A pseudo-terminal hands out a few
    KB per read: one frame per burst instead of per read spares a send and a wake-up of the client each."""
    chunks: list[bytes] = []
    size = 0
    while size < BURST:
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            break
        except OSError as exc:  # EIO: the pty's last holder closed it
            if exc.errno != errno.EIO:
                raise
            data = b""
        if not data:
            return b"".join(chunks), True
        chunks.append(data)
        size += len(data)
    return b"".join(chunks), False


@contextlib.contextmanager
def reachable(path: str) -> Iterator[str]:
    """An address for the socket at `path` that fits a sockaddr_un (108 bytes): the path itself, or the
    same file through a descriptor of its directory (a job's directory may lie deep)."""
    if len(os.fsencode(path)) < 100:
        yield path
        return
    fd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{os.path.basename(path)}"
    finally:
        os.close(fd)


# what a client without a terminal may send its job (srun passes these on, as Slurm's does)
_PASSED_SIGNALS = frozenset({1, 2, 3, 10, 12, 15, 18, 19, 20})


def _tty_group(default: int | None) -> int:
    import grp

    try:
        return grp.getgrnam("tty").gr_gid
    except KeyError:
        return -1 if default is None else default

