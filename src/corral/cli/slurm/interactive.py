"""`srun` and `salloc` from a login shell: an interactive job through the queue.

    srun --pty -p gpu --gres=gpu:1 -t 2:00:00 bash      a shell on a GPU, once the queue grants it
    srun -G 1 python check.py                           one command, its output streamed back
    salloc -G 2 -t 1:00:00                              an allocation and a shell in it; srun there runs steps

The job is submitted like any other (same priorities, limits, fair share, reasons), with the job options
sbatch takes, read by the server's one parser. Once it runs, this command connects to the job's terminal
socket (`corral.executor.terminal`, the job's owner's alone) and relays: keystrokes and window sizes in,
output out, and the job's exit status as its own. Ctrl-C while it waits cancels it.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import time

from corral.cli.slurm.argv import Option, parse
from corral.cli.slurm.command import Refused, answered, refusal, server
from corral.cli.slurm.descriptors import write_all
from corral.cli.slurm.sbatch import OPTIONS as SBATCH_OPTIONS
from corral.core.jobspec import terminal_frames as tf
from corral.errors import CorralError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from corral.cli.wire import Server

# sbatch's options that are batch-only (srun and salloc have none of them, or not with that meaning)
_BATCH_ONLY = frozenset({"array", "wrap", "parsable", "test_only", "wait", "batch", "export_file", "ignore_pbs",
                         "get_user_env", "requeue", "no_requeue", "open_mode"})
# srun's I/O options: a step's files, which an interactive job has none of (its I/O is the terminal)
_STEP_FILES = frozenset({"output", "error", "input"})
_CLIENT = (Option("pty"), Option("label", "l"), Option("unbuffered", "u"), Option("overlap"),
           Option("kill-on-bad-exit", "K", value=True, optional=True), Option("mpi", value=True),
           Option("cpu-bind", value=True), Option("immediate", "I", value=True, optional=True),
           Option("no-shell"), Option("bell"), Option("no-bell"))
_LOCAL = frozenset({"pty", "label", "unbuffered", "overlap", "kill_on_bad_exit", "mpi", "cpu_bind", "immediate",
                    "no_shell", "bell", "no_bell", "quiet", "verbose", "help", "usage", "version"})
OPTIONS = [option for option in SBATCH_OPTIONS if option.key not in _BATCH_ONLY] + list(_CLIENT)
_LONG = {option.key: option.long for option in OPTIONS}
_ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
                    "DEADLINE", "BOOT_FAIL"})
CONNECT_WAIT_S = 15.0  # a job's supervisor makes its socket within moments of the start being recorded
USAGE = {
    "srun": "Usage: srun [--pty] [-p PARTITION] [-G GPUS | --gres=gpu:N] [-c CPUS] [--mem=SIZE] [-t TIME] "
            "command [args...]\n",
    "salloc": "Usage: salloc [-p PARTITION] [-G GPUS | --gres=gpu:N] [-c CPUS] [--mem=SIZE] [-t TIME] "
              "[command [args...]]\n",
}


def main(argv: Sequence[str], program: str = "srun") -> int:
    given, command = parse(argv, OPTIONS, stop_at_first_operand=True)
    if answered(given, USAGE[program]):
        return 0
    for key in sorted(_STEP_FILES & given.keys()):
        raise Refused(f"--{_LONG[key]}: an interactive job's input and output are your terminal; for files, submit "
                      "with sbatch")
    if program == "srun" and str(given.get("ntasks") or "1") != "1":
        raise Refused(f"--ntasks={given['ntasks']}: srun from a login shell runs one task here; for several, "
                      "run srun -n N inside salloc or a batch script")
    if not command:
        if program == "srun":
            raise Refused("No command given to execute.")
        command = [os.environ.get("SHELL") or _login_shell()]
    terminal = sys.stdin.isatty()
    if given.get("pty") and not terminal:
        raise Refused("--pty needs a terminal on stdin (run it from an interactive shell, or leave --pty out "
                      "to stream the command's output)")
    mode = "pty" if given.get("pty") or (program == "salloc" and terminal) else "stream"
    tokens = [f"--{_LONG[key]}" if value is True else f"--{_LONG[key]}={value}"
              for key, value in given.items() if key not in _LOCAL]
    body: dict[str, object] = {"command": command, "interactive": mode, "submit_dir": os.getcwd(),
                               "environment": dict(os.environ), "umask": _umask()}
    if tokens:
        body["options"] = tokens
    service = server()
    say = _Voice(program, quiet=bool(given.get("quiet")))
    try:
        job = service.ask("POST", "/api/v1/jobs", body)
    except CorralError as exc:
        raise refusal(program, exc, "Unable to allocate resources") from None
    job_id = job["id"]
    for warning in job.get("warnings", []):
        say(f"warning: {warning}")
    if program == "salloc":
        say(f"Pending job allocation {job_id}")
    try:
        job = _await_start(service, job, say)
    except KeyboardInterrupt:
        _revoke(service, job_id, say)
        return 1
    if job["state"] != "RUNNING":
        raise Refused(f"job {job_id} ended before it started: {job['state']}"
                      + (f" ({job['reason']})" if job.get("reason") else ""))
    if program == "salloc":
        say(f"Granted job allocation {job_id}")
        say(f"Nodes {job.get('node') or 'localhost'} are ready for job")
    try:
        status = _attach(service, job_id, mode == "pty", say)
    finally:
        if program == "salloc":
            say(f"Relinquishing job allocation {job_id}")
    if status and program == "srun":
        say(f"error: {job.get('node') or 'localhost'}: task 0: Exited with exit code {status}")
    return status


class _Voice:
    """srun's and salloc's own lines, on stderr (`srun: ...`), unless --quiet."""

    def __init__(self, program: str, quiet: bool) -> None:
        self.program = program
        self.quiet = quiet
        self.raw = False  # the terminal is in raw mode: a line ends with \r\n

    def __call__(self, text: str) -> None:
        if self.quiet and not text.startswith("error:"):
            return
        end = "\r\n" if self.raw else "\n"
        os.write(2, f"{self.program}: {text}{end}".encode(errors="replace"))


def _await_start(service: Server, job: dict[str, Any], say: _Voice) -> dict[str, Any]:
    """Poll until the job runs or ends, saying so once if it has to wait."""
    job_id = job["id"]
    said = False
    pause = 0.05
    while job["state"] == "PENDING":
        if not said and pause >= 0.2:
            say(f"job {job_id} queued and waiting for resources")
            said = True
        time.sleep(pause)
        pause = min(0.5, pause * 2)
        job = service.ask("GET", f"/api/v1/jobs/{job_id}")
    if said and job["state"] == "RUNNING":
        say(f"job {job_id} has been allocated resources")
    return job


def _revoke(service: Server, job_id: int, say: _Voice) -> None:
    try:
        service.ask("POST", f"/api/v1/jobs/{job_id}/cancel")
    except CorralError as exc:
        say(f"error: could not cancel job {job_id}: {exc.message}")
        return
    say(f"Job allocation {job_id} has been revoked.")


def _attach(service: Server, job_id: int, pty: bool, say: _Voice) -> int:
    """Connect to the running job's terminal and relay until it ends; its exit status."""
    from corral.executor.terminal import reachable

    path = service.ask("GET", f"/api/v1/jobs/{job_id}/terminal")["socket"]
    deadline = time.monotonic() + CONNECT_WAIT_S
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with reachable(path) as address:
                sock.connect(address)
            break
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()  # the server records the start as its supervisor comes up: the socket follows
            if time.monotonic() > deadline:
                raise Refused(f"cannot connect to job {job_id}'s terminal: {exc.strerror}") from None
            time.sleep(0.02)
        except OSError as exc:
            sock.close()
            raise Refused(f"cannot connect to job {job_id}'s terminal: {exc.strerror or exc}") from None
    return _Relay(sock, pty, say).run()


class _Relay:
    """The client's side: stdin, signals and window sizes to the job; its output to ours."""

    def __init__(self, sock: socket.socket, pty: bool, say: _Voice) -> None:
        self.sock = sock
        self.pty = pty
        self.say = say
        self.signals: list[int] = []
        self.resized = False

    def run(self) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        previous_wakeup = signal.set_wakeup_fd(wake_w)
        handlers = self._catch_signals()
        saved = self._raw_terminal()
        try:
            self.sock.sendall(tf.frame(tf.HELLO, tf.SIZE.pack(*_window_size())))
            return self._loop(wake_r)
        finally:
            if saved is not None:
                import termios

                termios.tcsetattr(0, termios.TCSADRAIN, saved)
                self.say.raw = False
            for number, handler in handlers.items():
                signal.signal(number, handler)
            signal.set_wakeup_fd(previous_wakeup)
            for fd in (wake_r, wake_w):
                os.close(fd)
            self.sock.close()

    def _loop(self, wake_r: int) -> int:
        reader = tf.Reader()
        stdin_open = True
        sock = self.sock
        while True:
            watched = [sock, wake_r] + ([0] if stdin_open else [])
            try:
                readable, _, _ = select.select(watched, [], [])
            except InterruptedError:
                readable = []
            if wake_r in readable:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            self._pass_on_events()
            if 0 in readable:
                data = os.read(0, 1 << 16)
                if data:
                    sock.sendall(tf.frame(tf.STDIN, data))
                else:
                    sock.sendall(tf.frame(tf.STDIN_EOF))
                    stdin_open = False
            if sock in readable:
                data = sock.recv(1 << 18)
                if not data:
                    self.say("error: the job's terminal closed without its exit status")
                    return 1
                for kind, payload in reader.feed(data):
                    if kind == tf.STDOUT:
                        write_all(1, payload)
                    elif kind == tf.STDERR:
                        write_all(2, payload)
                    elif kind == tf.NOTICE:
                        text = payload.decode(errors="replace").rstrip("\n")
                        write_all(2, (text + ("\r\n" if self.say.raw else "\n")).encode())
                    elif kind == tf.EXIT:
                        return int(tf.STATUS.unpack(payload)[0])

    def _pass_on_events(self) -> None:
        if self.resized:
            self.resized = False
            self.sock.sendall(tf.frame(tf.WINSIZE, tf.SIZE.pack(*_window_size())))
        while self.signals:
            self.sock.sendall(tf.frame(tf.SIGNAL, bytes([self.signals.pop(0)])))

    def _catch_signals(self) -> dict[int, Any]:
        """Window sizes always; without a terminal, the signals a user sends srun go to the job."""
        def resized(number: int, frame: object) -> None:
            self.resized = True

        def passed(number: int, frame: object) -> None:
            self.signals.append(number)

        handlers: dict[int, Any] = {signal.SIGWINCH: signal.signal(signal.SIGWINCH, resized)}
        if not self.pty:
            for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                           signal.SIGUSR2):
                handlers[number] = signal.signal(number, passed)
        return handlers

    def _raw_terminal(self) -> list[Any] | None:
        """With --pty, our terminal passes every key through (the job's terminal does the editing)."""
        if not (self.pty and os.isatty(0)):
            return None
        import termios
        import tty

        saved = termios.tcgetattr(0)
        tty.setraw(0, termios.TCSADRAIN)
        self.say.raw = True
        return saved


def _window_size() -> tuple[int, int]:
    for fd in (0, 1, 2):
        try:
            size = os.get_terminal_size(fd)
            return size.lines, size.columns
        except OSError:
            continue
    return 24, 80



def _login_shell() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"
    except KeyError:
        return "/bin/sh"


def _umask() -> str:
    mask = os.umask(0o022)
    os.umask(mask)
    return f"{mask:04o}"
