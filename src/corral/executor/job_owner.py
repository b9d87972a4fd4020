"""Acting as the job's owner: for a moment, to open the files the job names (`as_owner`), and for
good, in the forked child that becomes the job (`exec_job`).

Only the standard library: the supervisor imports this, and it starts for every job.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

if TYPE_CHECKING:
    from corral.executor.cgroups import JobCgroup
    from corral.executor.launch_config import LaunchConfig

T = TypeVar("T")


def as_owner(config: LaunchConfig, action: Callable[[], T]) -> T:
    """Run `action` with the job's owner's rights over files, and its umask; then be root again.

    Why switch the effective ids rather than open in a forked child and pass the
    descriptors back: the supervisor is single-threaded, so nothing else runs while
    it wears the owner's ids; the real and saved uid stay 0, so switching back
    cannot fail, and the owner (who may signal only processes whose real or saved
    uid is theirs) cannot signal or trace it meanwhile; and the kernel then checks
    every path component, symlink target and O_CREAT as the owner, exactly as for
    the job itself, at the cost of a few system calls instead of a fork. (An interactive job's
    terminal thread runs meanwhile, but it only moves bytes between descriptors already open.)
    """
    owner = config.run_as
    umask = config.umask
    old_umask = os.umask(umask) if umask is not None else None
    if not owner:
        try:
            return action()
        finally:
            if old_umask is not None:
                os.umask(old_umask)
    euid, egid, groups = os.geteuid(), os.getegid(), os.getgroups()
    try:
        os.setgroups(owner["groups"])
        os.setresgid(-1, owner["gid"], -1)
        os.setresuid(-1, owner["uid"], -1)
        return action()
    finally:
        # undo only what was done (a half-done switch may have failed); the uid first:
        # changing the gid and groups back needs root's rights again
        if os.geteuid() != euid:
            os.setresuid(-1, euid, -1)
        if os.getegid() != egid:
            os.setresgid(-1, egid, -1)
        if os.getgroups() != groups:
            os.setgroups(groups)
        if old_umask is not None:
            os.umask(old_umask)


def open_logs(config: LaunchConfig) -> tuple[int, int]:
    """Open the job's stdout and stderr (one descriptor when they are one file); call it under `as_owner`."""
    # a requeued job appends: the earlier runs' output is part of its story
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if config.append_logs else os.O_TRUNC)
    stdout, stderr = config.stdout, config.stderr
    os.makedirs(os.path.dirname(stdout), exist_ok=True)
    out_fd = open_for_writing(stdout, flags)
    if stderr == stdout:
        return out_fd, out_fd
    os.makedirs(os.path.dirname(stderr), exist_ok=True)
    return out_fd, open_for_writing(stderr, flags)


def open_for_writing(path: str, flags: int, create: bool = True) -> int:
    """A log opened for the job: never blocking on a FIFO the job planted there (the supervisor would
    hang, and with it every limit and cancel); a file, or a device such as /dev/null, is fine.

    Raises:
        OSError: it cannot be opened, or it is a FIFO or a socket.
    """
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_CREAT if create else 0), 0o644)
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"{path} is a FIFO or a socket, not a file")
    os.set_blocking(fd, True)
    return fd


def exec_job(config: LaunchConfig, cgroup: JobCgroup | None, out_fd: int, err_fd: int,
             stdio: tuple[int, int, int] | None = None, terminal: bool = False,
             exec_instead: Callable[[], NoReturn] | None = None) -> NoReturn:
    """In the forked child: become the job. Never returns.

    `stdio`: an interactive job's stdin, stdout and stderr (its pseudo-terminal's end three times, or
    pipes) in place of /dev/null and the log files; `terminal`: that end becomes its controlling terminal;
    `exec_instead`: what becomes the job once its stdio is in place (a container runtime, which takes the
    owner's identity its own way), in place of the owner's argv.
    """
    try:
        os.setsid()
        # and what Python ignores, which an exec would pass on: `yes | head` ends quietly, as under Slurm
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        if stdio is None:
            stdio = (os.open(os.devnull, os.O_RDONLY), out_fd, err_fd)
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        if terminal:
            import fcntl
            import termios

            fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # a session leader's first terminal: job control works
        os.closerange(3, 65536)  # the lock and the wake pipe stay with the supervisor
        if exec_instead is not None:
            exec_instead()
        env = become_owner(config, cgroup)
        try:
            os.chdir(config.cwd)
        except OSError as exc:
            os.write(2, f"corral: cannot enter the working directory {config.cwd}: {exc.strerror}\n".encode())
            os._exit(1)
        argv = config.argv
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        code = 127 if exc.errno in (errno.ENOENT, errno.EACCES, errno.ENOEXEC) else 1
        os.write(2, f"corral: cannot run {config.argv[0]!r}: {exc.strerror}\n".encode())
        os._exit(code)
    except BaseException:  # noqa: BLE001 - nothing may escape the child back into the supervisor
        os._exit(1)


def become_owner(config: LaunchConfig, cgroup: JobCgroup | None) -> dict[str, str]:
    """In the forked child: take the job's process limit, owner and umask for good; return its environment."""
    env = dict(config.env)
    max_processes = config.max_processes
    owner = config.run_as
    if cgroup is not None and cgroup.holds_processes:
        max_processes = None  # pids.max caps this job alone; RLIMIT_NPROC would count all of the owner's
    elif not owner:
        max_processes = None  # root is exempt from RLIMIT_NPROC anyway
    try:
        if max_processes:
            import resource

            # Set while still root: an unprivileged process may only lower its hard limit.
            # RLIMIT_NPROC caps the processes (threads too) of the job's real uid across the
            # machine, checked at each fork; root is exempt, so it guards non-root owners only.
            resource.setrlimit(resource.RLIMIT_NPROC, (int(max_processes), int(max_processes)))
        if owner:
            os.setgroups(owner["groups"])  # while root: after setuid it is no longer allowed
            os.setgid(owner["gid"])
            os.setuid(owner["uid"])
    except OSError as exc:
        who = f" to user {owner['name']}" if owner else ""
        os.write(2, f"corral: cannot switch{who} to run the job: {exc}\n".encode())
        os._exit(1)
    if owner:
        if os.getuid() == 0 or os.geteuid() == 0:
            os.write(2, f"corral: refusing to run a job of {owner['name']} as root\n".encode())
            os._exit(1)
        env.update(HOME=owner["home"], USER=owner["name"], LOGNAME=owner["name"], SHELL=owner["shell"])
    if config.umask is not None:
        os.umask(int(config.umask))
    return env
