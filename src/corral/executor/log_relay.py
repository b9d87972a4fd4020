"""A job's stdout and stderr, relayed by its supervisor into its log files within the server's limits.

Where the server caps logs (`max_log_mb` a job, `user_log_quota_mb` a user's running jobs together,
`log_reserve_mb` the last of the disk), the job does not write its log files itself: its fds 1 and 2 are
pipes, and a thread of the supervisor moves what comes out of each into its file (`os.splice`, pipe to
file inside the kernel), writing only what its budget grants first. A cap then holds to the byte however
fast the job writes; checking file sizes now and then lets `dd` run hundreds of MB past it. Slurm's
slurmstepd relays a job's I/O the same way. When stdout and stderr are one file, one pipe is both fd 1
and fd 2, so their lines keep the order they were written in; the job's steps (`srun` inside it), its
container runtime and whatever else it starts inherit the pipes, so everything it writes is counted.

A job whose budget runs out is stopped by the supervisor (`JobLogs.stopped` says why); until it is gone,
what it writes waits in the pipe. When the job's main process has ended, the supervisor kills what is
left of it and drains the pipes (`drain`): a process that got away keeps the last of its output.

Logs that are no regular file (`-o /dev/null`, a terminal) are the job's to write directly: they fill
no disk. An interactive job's output goes to its client (`corral.executor.terminal`), not to its logs.
Without limits the job writes its files directly, as before.

Per chunk the relay does one splice and an add; it blocks in `select` when the job is quiet, and naps
2 ms after a small chunk, so that a job writing in small pieces wakes it for many at once (a line reaches
the log at most that much later). A log
opened for appending (`--open-mode=append`, a requeued job) is copied through a buffer instead, since
splice cannot write to a file opened O_APPEND and appending is what lets jobs share one file.

Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import stat
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.executor.job_owner import as_owner, open_logs
from corral.executor.log_ledger import LogLedger

if TYPE_CHECKING:
    from corral.executor.launch_config import LaunchConfig

PIPE_SIZE = 1 << 20  # a fast writer's chunks: fewer wake-ups of the relay
STEP_MAX = 1 << 20  # the bytes one grant lets a stream write at most: a cap is checked this often
STEP_MIN = 64 << 10
LEASE_MAX = 64 << 20  # what a job reserves of its owner's quota at once, at most
DRAIN_IDLE_S = 2.0  # once the job is killed: how long a pipe may stay open without a byte before it is cut
DRAIN_MAX_S = 5.0  # and in all: a process that got away may not hold the job's end with a byte a second
COPY_BUFFER = 1 << 20
NAP_BELOW = 64 << 10  # a chunk smaller than this: the relay naps NAP_S before it looks again
NAP_S = 0.002


class LogBudget:
    """What a job's streams may still write, together: its own cap, its owner's quota, the disk's reserve."""

    def __init__(self, cap_mb: int | None, floor_mb: int | None, ledger: LogLedger | None, user: str,
                 wake: Callable[[], None]) -> None:
        self.cap = cap_mb << 20 if cap_mb else None
        self.cap_mb = cap_mb
        self.floor = floor_mb << 20 if floor_mb else None
        self.floor_mb = floor_mb
        self.ledger = ledger
        self.user = user
        self.wake = wake
        quota = ledger.quota_bytes if ledger is not None else None
        self.step = STEP_MAX
        for limit in (self.cap, quota):
            if limit:
                self.step = min(self.step, max(STEP_MIN, limit // 64))
        self.max_lease = min(LEASE_MAX, max(self.step, quota // 16)) if quota else 0
        self.granted = 0  # bytes the streams were allowed so far: what they wrote, but for their allowances
        self.leased = 0  # of the owner's quota, reserved in the ledger
        self.stopped: str | None = None
        self.lock = threading.Lock()

    def take(self, fd: int) -> int:
        """The next bytes a stream writing to `fd` may write (0: none more; `stopped` says why)."""
        with self.lock:
            if self.stopped:
                return 0
            want = self.step
            if self.cap is not None:
                want = min(want, self.cap - self.granted)
                if want <= 0:
                    return self._stop(f"the job's logs reached the server's limit of {self.cap_mb} MB (max_log_mb); "
                                      "the job was stopped")
            if self.floor is not None and _free_bytes(fd) < self.floor:
                # the last of the disk is the server's and every job's: the job still filling it stops
                return self._stop(f"the filesystem of the job's log has less than {self.floor_mb} MB free "
                                  "(the server's log_reserve_mb); the job writing to it was stopped")
            if self.ledger is not None:
                if self.leased - self.granted < want:
                    lease = max(want, min(self.granted, self.max_lease))  # grows as the job writes
                    if self.cap is not None:
                        lease = min(lease, self.cap - self.leased)
                    try:
                        self.leased += self.ledger.reserve(lease)
                    except OSError as exc:
                        return self._stop(f"cannot reserve room in {self.user}'s log quota: {exc}")
                want = min(want, self.leased - self.granted)
                if want <= 0:
                    return self._stop(f"{self.user}'s running jobs' logs reached the server's per-user quota of "
                                      f"{self.ledger.quota_bytes >> 20} MB (user_log_quota_mb); this job, writing "
                                      "more, was stopped")
            self.granted += want
            return want

    def _stop(self, why: str) -> int:
        self.stopped = why
        self.wake()
        return 0


class Stream:
    """One pipe out of the job and the log file it goes into, relayed by a thread of its own."""

    def __init__(self, name: str, pipe_r: int, file_fd: int, budget: LogBudget, stop_r: int, copy: bool) -> None:
        self.name = name
        self.pipe_r = pipe_r
        self.file_fd = file_fd
        self.budget = budget
        self.stop_r = stop_r
        self.copy = copy
        self.written = 0
        self.error: OSError | None = None
        self.lock = threading.Lock()  # a chunk and a note of the supervisor's share the file's offset
        self.thread = threading.Thread(target=self.run, name=f"corral-log-{name}", daemon=True)
        self.buffer: memoryview | None = None

    def run(self) -> None:
        r, w, lock, splice, nonblocking, sleep = (self.pipe_r, self.file_fd, self.lock, os.splice,
                                                  os.SPLICE_F_NONBLOCK, time.sleep)
        allowance = 0
        while True:
            if allowance == 0:
                if self._idle(watch_pipe=True):  # output first: a quiet job holds none of its owner's quota
                    return
                allowance = self.budget.take(w)
                if allowance == 0:
                    self._idle(watch_pipe=False)
                    return
            try:
                with lock:
                    n = self._copy(allowance) if self.copy else splice(r, w, allowance, flags=nonblocking)
            except BlockingIOError:
                if self._idle(watch_pipe=True):
                    return
                continue
            except OSError as exc:
                if exc.errno == errno.EINVAL and not self.copy:  # a filesystem that cannot take a splice
                    self.copy = True
                    continue
                self.error = exc  # a full disk: the rest is lost, as a write of the job's own would be
                self._discard()
                return
            if n == 0:
                return  # every writer is gone
            allowance -= n
            self.written += n
            if n < NAP_BELOW:
                sleep(NAP_S)  # a job writing in small pieces: wake for many at once (a fast one fills the pipe)

    def _copy(self, most: int) -> int:
        if self.buffer is None:
            self.buffer = memoryview(bytearray(COPY_BUFFER))
        view = self.buffer
        n = os.readv(self.pipe_r, [view[:min(most, COPY_BUFFER)]])
        done = 0
        while done < n:
            done += os.write(self.file_fd, view[done:n])
        return n

    def _idle(self, watch_pipe: bool) -> bool:
        """Wait for output (or, with `watch_pipe` false, for the end alone); whether to end."""
        watched = [self.pipe_r, self.stop_r] if watch_pipe else [self.stop_r]
        while True:
            try:
                ready, _, _ = select.select(watched, [], [])
            except InterruptedError:
                continue
            return self.stop_r in ready

    def _discard(self) -> None:
        """Read on and throw away, so that the job is not held on a full pipe for what cannot be kept."""
        while True:
            try:
                if not os.read(self.pipe_r, COPY_BUFFER):
                    return
            except BlockingIOError:
                if self._idle(watch_pipe=True):
                    return
            except OSError:
                return


class JobLogs:
    """A job's two log files, opened as its owner, and the relay into them when the server limits logs."""

    def __init__(self, out_fd: int, err_fd: int) -> None:
        self.out_fd, self.err_fd = out_fd, err_fd
        self.child_fds: tuple[int, int] = (out_fd, err_fd)  # the job's fds 1 and 2
        self.streams: list[Stream] = []
        self.budget: LogBudget | None = None
        self.stop_r = self.stop_w = -1
        self._child_ends: list[int] = []
        self._closed = False

    @classmethod
    def open(cls, config: LaunchConfig, job_key: str, wake: Callable[[], None]) -> JobLogs:
        """Open the job's logs as its owner; with limits, the pipes and the budget its output goes through.

        Call it before any thread of the supervisor runs: the owner's ledger is opened as root.

        Raises:
            OSError: a log (or the owner's ledger) cannot be opened.
        """
        out_fd, err_fd = as_owner(config, lambda: open_logs(config))
        logs = cls(out_fd, err_fd)
        try:
            logs._plan(config, job_key, wake)
        except OSError:
            logs.close()
            raise
        return logs

    def _plan(self, config: LaunchConfig, job_key: str, wake: Callable[[], None]) -> None:
        quota = config.log_quota
        if config.interactive or not (config.max_log_mb or config.log_reserve_mb or quota):
            return
        regular = [fd for fd in dict.fromkeys((self.out_fd, self.err_fd)) if stat.S_ISREG(os.fstat(fd).st_mode)]
        if not regular:
            return
        ledger = LogLedger.open(str(quota["ledger"]), job_key, int(quota["quota_mb"]) << 20) if quota else None
        owner = config.run_as
        user = str(quota["user"]) if quota else str(owner["name"] if owner else "")
        self.budget = LogBudget(config.max_log_mb, config.log_reserve_mb, ledger, user, wake)
        self.stop_r, self.stop_w = os.pipe2(os.O_CLOEXEC)
        relayed: dict[int, int] = {}
        for fd in regular:
            pipe_r, pipe_w = os.pipe2(os.O_CLOEXEC)
            try:
                fcntl.fcntl(pipe_w, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
            except OSError:
                pass  # a user past pipe-user-pages-soft keeps the default size
            os.set_blocking(pipe_r, False)  # the job's end stays blocking: a full pipe holds the job back
            self._child_ends.append(pipe_w)
            relayed[fd] = pipe_w
            name = "stdout" if fd == self.out_fd else "stderr"
            self.streams.append(Stream(name, pipe_r, fd, self.budget, self.stop_r, copy=config.append_logs))
        self.child_fds = (relayed.get(self.out_fd, self.out_fd), relayed.get(self.err_fd, self.err_fd))

    @property
    def stopped(self) -> str | None:
        """Why the job's output may go no further (it must then be stopped), or None."""
        return self.budget.stopped if self.budget is not None else None

    def start(self) -> None:
        """In the supervisor, once the job is forked: give up the job's ends and relay what comes out."""
        for fd in self._child_ends:
            os.close(fd)
        self._child_ends = []
        if self.out_fd != self.err_fd and not any(s.file_fd == self.out_fd for s in self.streams):
            os.close(self.out_fd)  # the job's own now; the supervisor notes only in stderr
            self.out_fd = -1
        for stream in self.streams:
            stream.thread.start()

    def note(self, line: str) -> None:
        """A line of the supervisor's in the job's stderr, after what the job wrote so far; through the file
        opened at the start (the job may have swapped the path for a link to a file it may not write)."""
        if self.err_fd < 0:
            return
        stream = next((s for s in self.streams if s.file_fd == self.err_fd), None)
        data = (line + "\n").encode()
        try:
            if stream is None:
                os.write(self.err_fd, data)
                return
            with stream.lock:
                os.write(self.err_fd, data)
        except OSError:
            pass  # a full disk: the note is lost, the job's end is recorded all the same

    def drain(self) -> list[str]:
        """Once the job's processes are gone: relay what its pipes still hold, then end the relay. A pipe still
        open (a process that escaped the kill: there is no cgroup) is cut after DRAIN_IDLE_S without a byte,
        or DRAIN_MAX_S in all. What went wrong, for the supervisor's log."""
        streams = [s for s in self.streams if s.thread.ident is not None]
        if self.stopped is None:
            began = last = time.monotonic()
            seen = -1
            while any(s.thread.is_alive() for s in streams):
                written, now = sum(s.written for s in streams), time.monotonic()
                if written != seen:
                    last, seen = now, written
                if now - last > DRAIN_IDLE_S or now - began > DRAIN_MAX_S:
                    break
                for s in streams:
                    s.thread.join(0.1)
        if self.stop_w >= 0:
            os.write(self.stop_w, b"x")
        for s in streams:
            s.thread.join()
        return [f"could not write the job's {s.name} to its log: {s.error}" for s in streams if s.error]

    def close(self) -> None:
        """Give back the owner's quota (the job's logs count no more) and close everything."""
        if self._closed:
            return
        self._closed = True
        if self.budget is not None and self.budget.ledger is not None:
            try:
                self.budget.ledger.release()
            except OSError:
                pass  # the server's LogQuota drops what a supervisor could not
        fds = {*self._child_ends, self.out_fd, self.err_fd, self.stop_r, self.stop_w,
               *(s.pipe_r for s in self.streams)}
        for fd in fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass


def _free_bytes(fd: int) -> float:
    """Room left for users on the filesystem holding `fd` (what a non-root writer may still use)."""
    try:
        info = os.fstatvfs(fd)
    except OSError:
        return float("inf")
    return info.f_bavail * info.f_frsize
