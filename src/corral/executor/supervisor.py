"""The per-job supervisor: `python -m corral.executor.supervisor JOB_DIR`.

It runs one job in its own session and process group, enforces its limits
(`corral.executor.limits`: time, memory, logs, the server's marks), forwards a
cancel, and records the outcome in `result.json` itself, so the server may die
or restart at any moment without losing an exit status. It holds the job
directory's lock for its whole life; the server takes a free lock to mean "no
supervisor is alive".

Where the server found cgroups (`corral.executor.cgroups`), launch.json names the job's
cgroup: the supervisor makes it with the job's limits (memory, processes, the GPUs it may
not open), moves the job into it before it runs, signals the whole cgroup (never just a
process group a `setsid` leaves), reads the kernel's OOM kills and accounting, and writes
result.json only once the cgroup is empty, so a job's GPUs are free only when nothing of
it is left. Without cgroups it follows the job's process group and session, as before.

Only the standard library: it starts for every job and must start fast.

Under a root server (the shared service) launch.json names the job's owner in
`run_as`. The supervisor itself stays root, so it can always signal the job and
write result.json, but the job runs as its owner (groups, gid, uid, in that
order), and every path the job names (its log files and their directories) is
opened with the owner's rights, never root's: naming /etc/passwd as a log file
gets the job refused, not the file truncated.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from corral.executor import condor_log, endings, files
from corral.executor.cgroups import JobCgroup, JobLimits, counted_usage, open_job_cgroup
from corral.executor.job_owner import as_owner, exec_job
from corral.executor.launch_config import LaunchConfig, LaunchConfigError
from corral.executor.limits import (Cancel, Ending, FailMark, Limit, LogLimits, MemoryLimit, NodeFailMark,
                                    PreemptMark, TimeLimit, TimeLimitNotice, WarningSignalDue, WatchedJob,
                                    first_ending, note_memory_kill, oom_killed, read_reason)
from corral.executor.log_relay import JobLogs
from corral.executor.terminal import NoClient, Terminal
from corral.executor.warning_signal import WarningSignal

if TYPE_CHECKING:
    from corral.executor.containers.held import HeldPaths

MAX_WAIT_S = 1.0  # re-check the cancel file at least this often, even if a signal was missed


class Supervisor:
    def __init__(self, job_dir: str, config: LaunchConfig) -> None:
        self.job_dir = job_dir
        self.config = config
        self.cancel_requested = False
        self.pid = 0
        self.cgroup: JobCgroup | None = None
        self.oom_kills_before = 0
        self.terminal: Terminal | None = None  # an interactive job's (srun, salloc)
        self.abandoned: str | None = None  # why an interactive job was ended for want of its client
        self.failed: str | None = None  # the server's verdict that ended the job (its FAIL mark's reason)
        self.wake_w = -1
        self.image_pull_s: float | None = None
        self.held: HeldPaths | None = None  # a container job's host paths, as its runtime gets them
        self.logs: JobLogs | None = None  # its stdout and stderr, relayed within the server's limits

    def path(self, name: str) -> str:
        return os.path.join(self.job_dir, name)

    def run(self) -> None:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(wake_r, False)
        signal.set_wakeup_fd(wake_w)
        self.wake_w = wake_w
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_cancel_signal)
        if os.path.exists(self.path(files.CANCEL)):
            self.finish("CANCELLED", None, None)
            return
        if os.path.exists(self.path(files.PREEMPT)):
            self.finish("PREEMPTED", None, None)
            return
        if os.path.exists(self.path(files.NODE_FAIL)):
            self.finish("NODE_FAIL", None, None, read_reason(self.path(files.NODE_FAIL)))
            return
        try:
            logs = self.logs = JobLogs.open(self.config, os.path.basename(os.path.normpath(self.job_dir)),
                                            lambda: _wake(wake_w))
        except OSError as exc:
            owner = self.config.run_as
            as_whom = f" as {owner['name']}" if owner else ""
            self.finish("FAILED", None, None, error=f"cannot open log file{as_whom}: {exc}")
            return
        if self.config.container:
            from corral.executor.containers.supervision import check_container  # a container job's alone

            self.held, refused = check_container(self.config, self.job_dir)
            if refused:
                self.note_stderr(f"corral: {refused}")
                logs.close()
                self.finish("FAILED", None, None, error=refused)
                return
        try:
            self.make_cgroup()
        except OSError as exc:
            self.finish("FAILED", None, None, error=f"cannot hold the job in a cgroup: {exc}")
            return
        if self.config.interactive:
            try:
                self.terminal = self.make_terminal()
            except OSError as exc:
                if self.cgroup is not None:
                    self.cgroup.remove()
                self.finish("FAILED", None, None, error=f"cannot make the job's terminal: {exc}")
                return
        terminal = self.terminal
        start_time = time.time()
        # The child waits at this gate until started.json names it: a supervisor killed
        # in between leaves a child that never runs the job, so recovery may requeue it.
        gate_r, gate_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(gate_w)
            if self.config.lock_fd is not None:  # the lock says "a supervisor is alive": not this child's
                os.close(int(self.config.lock_fd))   # to keep held while it waits here or starts the job
            if os.read(gate_r, 1) != b"1":
                os._exit(1)
            # a container job's runtime runs it: as root with the owner's ids inside, or as the owner
            instead = (lambda: _exec_container(self.config, self.cgroup, self.job_dir, self.held)) \
                if self.config.container else None
            if terminal is not None:
                exec_job(self.config, self.cgroup, *logs.child_fds, stdio=terminal.child_fds, terminal=terminal.pty,
                         exec_instead=instead)
            exec_job(self.config, self.cgroup, *logs.child_fds, exec_instead=instead)
        if terminal is not None:
            terminal.after_fork()
        os.close(gate_r)
        logs.start()
        if self.cgroup is not None:
            try:
                # before the job runs a single instruction of its own
                self.cgroup.attach(self.pid, leaf=_runtime_leaf() if self.config.container else None)
            except OSError as exc:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                self.cgroup.remove()
                self.finish("FAILED", None, None, error=f"cannot hold the job in a cgroup: {exc}")
                return
        try:
            self.record_start(start_time)
        except OSError as exc:  # a full disk: the job never runs, and says why
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            if self.cgroup is not None:
                self.cgroup.remove()
            self.finish("FAILED", None, None, error=f"cannot record the job's start: {exc}")
            return
        if terminal is not None:
            try:
                terminal.await_client(self.stop_asked, wake_r)  # not a byte of the job's output may go unseen
            except NoClient as exc:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                if self.cgroup is not None:
                    self.cgroup.kill_until_empty(note=self.log)
                    self.cgroup.remove()
                terminal.finish(137)
                self.finish("CANCELLED", None, None, error=f"interactive job {exc}")
                return
        os.write(gate_w, b"1")
        os.close(gate_w)
        if terminal is not None:
            terminal.start()
        self.write_condor_event(lambda c, p: condor_log.executing(c, p, time.time()))
        state, status, usage = self.watch(wake_r)
        container_error = None
        if self.config.container:
            from corral.executor.containers.supervision import end_container

            container_error, self.image_pull_s = end_container(self.config, self.job_dir, status, self.log)
        # Slurm's rule: the job's leftover processes die with it, and only then are its resources free
        if self.cgroup is not None:
            self.cgroup.kill_until_empty(note=self.log)
        else:
            self.kill_session(signal.SIGKILL)
        for problem in logs.drain():  # all of its output in its logs before its end is recorded
            self.log(problem)
        if self.cgroup is not None:
            if state is None and oom_killed(self.cgroup, self.oom_kills_before):
                state = "OUT_OF_MEMORY"
                note_memory_kill(self.note_stderr, self.config.mem_limit_mb, self.job_ref, self.cgroup,
                                 self.oom_kills_before)
            usage = counted_usage(self.cgroup, usage)
            self.cgroup.remove()
        exit_code, sig = _decode(status)
        if state is None:
            state = "COMPLETED" if exit_code == 0 else "FAILED"
        if container_error and state is None:
            state = "FAILED"
        if self.image_pull_s:
            usage = {**usage, "image_pull_s": self.image_pull_s}  # time spent bringing the image in, not running
        logs.close()
        self.finish(state, exit_code, sig, usage=usage, error=self.abandoned or container_error or self.failed)
        if terminal is not None:
            terminal.finish(exit_code)  # after result.json: what the client runs next sees the job ended

    def make_terminal(self) -> Terminal:
        owner = self.config.run_as
        terminal = Terminal(self.config.interactive or {}, owner["uid"] if owner else None,
                            owner["gid"] if owner else None)
        terminal.prepare()
        terminal.on_abandoned = self.abandon
        terminal.on_signal = self.signal_job
        return terminal

    def abandon(self, why: str) -> None:
        """From the terminal's thread: the client is gone for good; stop the job as a cancel would."""
        self.abandoned = f"interactive job ended: {why}"
        self.cancel_requested = True
        try:
            os.write(self.wake_w, b"a")
        except OSError:
            pass

    def stop_asked(self) -> bool:
        return (self.cancel_requested or os.path.exists(self.path(files.CANCEL))
                or os.path.exists(self.path(files.PREEMPT)) or os.path.exists(self.path(files.NODE_FAIL)))

    def record_start(self, start_time: float) -> None:
        files.write_json_atomic(self.path(files.STARTED), {
            "supervisor_pid": os.getpid(),
            "supervisor_start": files.process_start_ticks(os.getpid()),
            "pid": self.pid,
            "pid_start": files.process_start_ticks(self.pid),
            "boot_id": files.boot_id(),
            "start_time": start_time,
            "cgroup": self.config.cgroup,
            "cgroup_procs": self.cgroup.procs_file if self.cgroup is not None else None,
        })

    def make_cgroup(self) -> None:
        """Make the job's cgroup with its limits, when the server uses cgroups.

        Raises:
            OSError: the kernel refused (the job then fails: it was promised isolation).
        """
        spec = self.config.cgroup
        if not spec:
            return
        cgroup = open_job_cgroup(spec["layout"], spec["name"])
        mem_mb = self.config.mem_limit_mb
        cgroup.create(JobLimits(
            memory_bytes=int(mem_mb) << 20 if mem_mb else None,
            max_processes=self.config.max_processes,
            deny_devices=tuple((kind, int(major), int(minor)) for kind, major, minor in spec.get("deny_devices", ())),
        ))
        self.cgroup = cgroup
        self.oom_kills_before = cgroup.oom_kills()  # a requeued job's cgroup v1 keeps its old count

    def note_stop(self, outcome: str) -> None:
        """Say in the job's stderr, as slurmstepd does, that it is being stopped and why."""
        why = {"TIMEOUT": endings.TIME_LIMIT, "PREEMPTED": endings.PREEMPTION, "REQUEUE": endings.REQUEUE,
               "NODE_FAIL": endings.NODE_FAILURE}.get(outcome, "")
        by = read_reason(self.path(files.CANCEL), "") if outcome == "CANCELLED" else None
        line = endings.cancelled_line(self.job_ref, self.config.node or os.uname().nodename, time.time(), why,
                                      by=by or None)
        self.note_stderr(line)
        if self.terminal is not None:
            self.terminal.notice(line)

    @property
    def job_ref(self) -> str:
        return str(self.config.job_ref or os.path.basename(os.path.normpath(self.job_dir)))

    def log(self, message: str) -> None:
        try:
            print(f"corral supervisor: {message}", file=sys.stderr, flush=True)  # supervisor.log, root's
        except OSError:
            pass  # a full disk: the note is lost, the supervisor carries on

    def watch(self, wake_r: int) -> tuple[str | None, int, dict[str, float]]:
        """Wait for the job to end while enforcing its limits (`corral.executor.limits`), in their order."""
        grace = float(self.config.kill_grace_s)
        began = time.monotonic()
        job = WatchedJob(self.pid, self.cgroup)
        # --signal=SIG@T: warn the job T seconds before its time limit (say, to checkpoint)
        warning = WarningSignal(self.config.warn_signal, float(self.config.warn_before_s), self.config.warn_batch)
        limits = self.limits(began, warning)
        try:
            pidfd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            pidfd = None
        kill_at: float | None = None
        while True:
            now = time.monotonic()
            waits = [MAX_WAIT_S if pidfd is not None else 0.05]
            for moment in [rule.next_look(job) for rule in limits] + [kill_at]:
                if moment is not None:
                    waits.append(max(0.0, moment - now))
            ready = [fd for fd in (pidfd, wake_r) if fd is not None]
            try:
                select.select(ready, [], [], min(waits))
            except InterruptedError:
                pass
            files.drain(wake_r)
            done, status, rusage = os.wait4(self.pid, os.WNOHANG)
            if done == self.pid:
                # The kernel's count covers the job and every descendant it waited for: exact
                # even for a job shorter than one sampling interval (what `corral eff` reports).
                usage = {"cpu_time_s": round(rusage.ru_utime + rusage.ru_stime, 3),
                         "max_rss_mb": round(rusage.ru_maxrss / 1024, 1)}
                return job.ending.state if job.ending else None, status, usage
            now = time.monotonic()
            ending = first_ending(limits, now, job)
            if ending is not None:
                job.ending = ending
                kill_at = now + grace if self.stop(ending, warning) else None
                continue
            if kill_at is not None and now >= kill_at:
                self.signal_job(signal.SIGKILL)
                kill_at = None

    def limits(self, began: float, warning: WarningSignal) -> list[Limit]:
        """The job's limits, in the order they are looked at: the first to end the job says how it ends."""
        limit = self.config.time_limit_s
        deadline = began + limit if limit else None
        return [
            TimeLimitNotice(deadline, limit, self.terminal, self.job_ref),
            WarningSignalDue(warning, deadline),
            PreemptMark(self.job_dir, warning),
            LogLimits(self.logs),
            FailMark(self.job_dir),
            NodeFailMark(self.job_dir),
            Cancel(self.job_dir, lambda: self.cancel_requested),
            TimeLimit(deadline),
            MemoryLimit(self.config.mem_limit_mb or 0, began, self.cgroup, self.oom_kills_before),
        ]

    def stop(self, ending: Ending, warning: WarningSignal) -> bool:
        """Begin to stop the job as `ending` says; whether it has its grace before the SIGKILL."""
        if ending.at_once:
            self.signal_job(signal.SIGKILL)  # first: nothing the job left behind may delay the kill
            if ending.state == "OUT_OF_MEMORY":
                note_memory_kill(self.note_stderr, self.config.mem_limit_mb, self.job_ref, self.cgroup,
                                 self.oom_kills_before)
            else:
                self.failed = ending.error
                self.note_stderr(f"corral: {self.failed}")
            return False
        self.note_stop(ending.why or ending.state)
        if not (ending.warn_first and warning.send(self.pid, self.cgroup)):  # else, or if it reached no one
            self.signal_job(signal.SIGTERM)
        return True

    def signal_job(self, sig: int) -> None:
        """Signal every process of the job: its whole cgroup, else its process group and session.

        In a container, the container's processes alone (once it has any): the runtime's own would
        pass the signal on a second time, or end before the job has used its grace."""
        if self.cgroup is None:
            self.kill_session(sig)
        elif sig == signal.SIGKILL:
            self.cgroup.kill()
        else:
            inside = self.cgroup.nested_pids(_runtime_cgroups()) if self.config.container else []
            self.cgroup.signal(sig, inside or None)

    def note_stderr(self, message: str) -> None:
        if self.logs is not None:
            self.logs.note(message)

    def kill_session(self, sig: int) -> None:
        """Signal the job's process group, then any of its session that left the group."""
        if not self.pid:
            return
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in files.session_members(self.pid):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def finish(self, state: str, exit_code: int | None, sig: int | None, error: str | None = None,
               usage: dict[str, float] | None = None) -> None:
        if self.held is not None:
            self.held.release()  # the container is gone: what it was given of the host goes too
        cpu = float((usage or {}).get("cpu_time_s") or 0.0)
        self.write_condor_event(lambda c, p: condor_log.ended(c, p, time.time(), state, exit_code, sig, error, cpu))
        # through the space the server reserved before the launch: an outcome is recordable on a full disk
        files.write_json_reserved(self.path(files.RESULT), {
            "state": state, "exit_code": exit_code, "signal": sig, "end_time": time.time(),
            "error": error[:4000] if error else error, "usage": usage,
        }, self.path(files.RESULT_RESERVED))

    def write_condor_event(self, make: Callable[[int, int], str]) -> None:
        """Append an event to the job's HTCondor event log (submit file's `log`), as its owner."""
        target = self.config.condor_log
        if not target:
            return
        try:
            text = make(int(target["cluster"]), int(target["proc"]))
            first = (int(target["cluster"]), int(target["proc"]), float(target["submit_time"]))
            as_owner(self.config, lambda: condor_log.append(target["path"], text, submitted_at=first))
        except OSError as exc:
            self.log(f"cannot write the HTCondor event log {target['path']}: {exc}")

    def _on_cancel_signal(self, signum: int, frame: object) -> None:
        self.cancel_requested = True


def _runtime_leaf() -> str:
    from corral.executor.containers import RUNTIME_LEAF  # a container job's alone: dataclasses cost a plain start

    return RUNTIME_LEAF


def _runtime_cgroups() -> tuple[str, ...]:
    from corral.executor.containers import OWN_CGROUPS

    return OWN_CGROUPS


def _exec_container(config: LaunchConfig, cgroup: JobCgroup | None, job_dir: str,
                    held: HeldPaths | None) -> NoReturn:
    from corral.executor.containers.start import exec_container  # only a container job's child loads it

    exec_container(config, cgroup, job_dir, held.launch if held is not None else None)


def _wake(fd: int) -> None:
    try:
        os.write(fd, b"l")
    except OSError:
        pass  # the pipe is full: the supervisor is awake already


def _decode(status: int) -> tuple[int, int | None]:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return 128 + sig, sig
    return os.waitstatus_to_exitcode(status), None



def main(argv: list[str]) -> int:
    job_dir = argv[1]
    data = files.read_json(os.path.join(job_dir, files.LAUNCH))
    try:
        config = LaunchConfig.from_json(data)
    except LaunchConfigError as exc:
        # the job fails with the reason, instead of a supervisor dying unexplained and the job requeued forever
        print(f"corral supervisor: {exc}", file=sys.stderr, flush=True)
        files.write_json_reserved(os.path.join(job_dir, files.RESULT), {
            "state": "FAILED", "exit_code": None, "signal": None, "end_time": time.time(), "error": str(exc),
            "usage": None,
        }, os.path.join(job_dir, files.RESULT_RESERVED))
        return 2
    assert config.lock_fd is not None, "spawn_supervisor hands every supervisor the job's lock"
    # The server took the lock and handed us the descriptor; confirm we hold it.
    fcntl.flock(config.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.set_inheritable(config.lock_fd, False)
    Supervisor(job_dir, config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
