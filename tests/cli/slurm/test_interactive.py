"""`srun` and `salloc` from a login shell, driven through a real pseudo-terminal (pexpect): an interactive
job through the queue, its terminal relayed to the caller's."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pexpect
import pytest

from tests.helpers import wait_for

PROMPT = r"PROMPT\$ "


@pytest.fixture
def terminal(slurm_path):
    """`terminal(home, argv)`: a Slurm command in a pseudo-terminal of 30 rows and 100 columns."""
    spawned: list[pexpect.spawn] = []

    def spawn(home: str, argv: list[str], rows: int = 30, cols: int = 100) -> pexpect.spawn:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SBATCH_", "SLURM_", "CORRAL_"))}
        env.update(PATH=f"{slurm_path}:{os.environ['PATH']}", CORRAL_HOME=home, PS1="PROMPT$ ", TERM="xterm")
        child = pexpect.spawn(argv[0], argv[1:], env=env, encoding="utf-8", timeout=60, dimensions=(rows, cols))
        spawned.append(child)
        return child

    yield spawn
    for child in spawned:
        child.close(force=True)


def _home_with(short_tmp: str, config: str) -> str:
    home = os.path.join(short_tmp, "ihome")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(config)
    return home


def _shell(home: str, terminal, *options: str) -> pexpect.spawn:
    child = terminal(home, ["srun", *options, "--pty", "bash", "--norc", "--noprofile"])
    child.expect(PROMPT)
    return child


def _in_the_foreground(job_id: str, *argv: str) -> bool:
    """A process of the job runs `argv` as the foreground process group of its terminal."""
    wanted, job = ("\0".join(argv) + "\0").encode(), f"SLURM_JOB_ID={job_id}\0".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() != wanted:
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if job not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[2] == fields[5]:  # its process group is the one its terminal reads for
            return True
    return False


def test_a_pty_shell_gets_its_gpus_a_terminal_resizes_ctrl_c_and_exits_with_its_code(server_factory, terminal):
    server = server_factory(gpus=2)
    child = _shell(server.home, terminal, "-G", "1")
    child.sendline('echo "job=$SLURM_JOB_ID gpus=$CUDA_VISIBLE_DEVICES size=$(stty size)"; test -t 0 && echo tty')
    child.expect(r"job=(\d+) gpus=(\d) size=30 100\r\ntty\r\n")
    job_id, gpu = child.match.group(1), child.match.group(2)
    record = server.client().get(job_id)
    assert (record["state"], record["interactive"], record["gpu_ids"]) == ("RUNNING", "pty", [int(gpu)])
    child.setwinsize(40, 120)  # the job's terminal follows, and its foreground program hears SIGWINCH
    child.sendline("trap 'echo winched' WINCH; stty size")
    child.expect(r"40 120")
    child.sendline("sleep 300")
    wait_for(lambda: _in_the_foreground(job_id, "sleep", "300"))  # a key sent sooner would reach bash, not it
    child.sendcontrol("c")  # to the job's foreground process, not to srun
    child.expect(PROMPT)
    child.sendline("sleep 301")
    wait_for(lambda: _in_the_foreground(job_id, "sleep", "301"))
    child.sendcontrol("z")  # job control: the shell stops its foreground job and gets the terminal back
    child.expect(r"Stopped\s+sleep 301")
    child.expect(PROMPT)
    # bash hears of the stopped job's end when its SIGCHLD comes, and `wait` does not wait for a stopped job: the
    # shell would refuse the exit below ("There are stopped jobs") until then
    child.sendline("kill %1; while jobs %1 >/dev/null 2>&1; do sleep 0.1; done")
    child.expect(PROMPT)
    child.sendline("echo still here")
    child.expect("still here")
    child.sendline("exit 3")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 3
    ended = server.client().wait(job_id, timeout=30)
    assert (ended["state"], ended["exit_code"]) == ("FAILED", 3)


def test_without_pty_stdin_stdout_stderr_and_the_exit_code_pass_through(server_factory, slurm_shell):
    server = server_factory(gpus=1)
    out = slurm_shell(server.home)(
        "printf 'one\\ntwo\\n' | srun -G 1 bash -c 'tac; echo to-stderr >&2; echo gpu=$CUDA_VISIBLE_DEVICES; exit 7'")
    assert out.returncode == 7
    assert out.stdout == "two\none\ngpu=0\n"
    node = server.client().get(1)["node"]
    assert out.stderr == f"to-stderr\nsrun: error: {node}: task 0: Exited with exit code 7\n"
    refused = slurm_shell(server.home)("srun --pty true < /dev/null")
    assert (refused.returncode, refused.stderr.splitlines()[0]) == (
        1, "srun: error: --pty needs a terminal on stdin (run it from an interactive shell, or leave --pty out to "
           "stream the command's output)")
    missing = slurm_shell(server.home)("srun -G 1")
    assert (missing.returncode, missing.stderr) == (1, "srun: error: No command given to execute.\n")
    unknown = slurm_shell(server.home)("srun --frobnicate true")
    assert unknown.returncode == 1 and "frobnicate" in unknown.stderr
    server.client().wait(1, timeout=30)  # srun returns as the job's outcome is written; the server reaps it soon after
    assert [job["id"] for job in server.client().history()] == [1]  # nothing refused was submitted


def test_it_waits_in_the_queue_is_granted_and_ctrl_c_while_waiting_cancels_it(server_factory, terminal):
    server = server_factory(gpus=1)
    client = server.client()
    blocker = client.submit(["sleep", "300"], gpus=1)
    wait_for(lambda: client.get(blocker["id"])["state"] == "RUNNING", timeout=30)
    child = terminal(server.home, ["srun", "-G", "1", "--pty", "bash", "--norc", "--noprofile"])
    child.expect(r"srun: job (\d+) queued and waiting for resources")
    waiting = child.match.group(1)
    wait_for(lambda: client.get(waiting)["reason"] == "Resources")  # the reason every waiting job has
    client.cancel(blocker["id"])
    child.expect(f"srun: job {waiting} has been allocated resources")
    child.expect(PROMPT)
    child.sendline("exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    holder = client.submit(["sleep", "300"], gpus=1)
    wait_for(lambda: client.get(holder["id"])["state"] == "RUNNING", timeout=30)
    impatient = terminal(server.home, ["srun", "-G", "1", "--pty", "bash"])
    impatient.expect(r"srun: job (\d+) queued and waiting for resources")
    revoked = impatient.match.group(1)
    impatient.sendintr()
    impatient.expect(f"srun: Job allocation {revoked} has been revoked.")
    impatient.expect(pexpect.EOF)
    assert client.get(revoked)["state"] == "CANCELLED"
    client.cancel(holder["id"])


def test_the_time_limit_is_announced_then_ends_the_job(server_factory, terminal):
    server = server_factory(gpus=1)
    child = _shell(server.home, terminal, "--time=0:08")
    child.sendline("echo job=$SLURM_JOB_ID")
    child.expect(r"job=(\d+)")
    job_id = child.match.group(1)
    child.expect(rf"srun: warning: job {job_id} reaches its time limit in \d+ s", timeout=30)
    child.expect(rf"\*\*\* JOB {job_id} ON \S+ CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*", timeout=30)
    child.expect(pexpect.EOF, timeout=30)
    assert server.client().wait(job_id, timeout=30)["state"] == "TIMEOUT"


def test_a_dropped_client_ends_its_job_after_the_grace_and_frees_the_gpu(short_tmp, server_factory, terminal):
    server = server_factory(gpus=1, home=_home_with(short_tmp, "[server]\ninteractive_grace_s = 1\n"))
    child = _shell(server.home, terminal, "-G", "1")
    child.sendline("echo job=$SLURM_JOB_ID")
    child.expect(r"job=(\d+)")
    job_id = child.match.group(1)
    os.kill(child.pid, signal.SIGKILL)  # the laptop's lid closes: no goodbye
    ended = server.client().wait(job_id, timeout=30)
    assert ended["state"] == "CANCELLED"
    assert "gone for 1 s" in (ended["reason"] or "")
    after = server.client().submit(["true"], gpus=1)
    assert server.client().wait(after["id"], timeout=30)["state"] == "COMPLETED"


def test_salloc_says_slurms_lines_and_runs_the_command_in_the_allocation(server_factory, slurm_shell):
    server = server_factory(gpus=2)
    out = slurm_shell(server.home)("salloc -G 2 -J alloc bash -c 'echo id=$SLURM_JOB_ID gpus=$CUDA_VISIBLE_DEVICES'"
                                   " < /dev/null")
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.split()[0].removeprefix("id=")
    assert out.stdout == f"id={job_id} gpus=0,1\n"
    lines = out.stderr.splitlines()
    assert lines[0] == f"salloc: Pending job allocation {job_id}"
    assert lines[1] == f"salloc: Granted job allocation {job_id}"
    assert lines[-1] == f"salloc: Relinquishing job allocation {job_id}"
    record = server.client().wait(job_id, timeout=30)
    assert (record["name"], record["state"], record["interactive"]) == ("alloc", "COMPLETED", "stream")


def test_another_user_can_neither_find_nor_open_an_interactive_jobs_terminal(server_factory, os_users, shared_dir):
    from tests.cli.slurm.conftest import SYSTEM_PYTHON

    if SYSTEM_PYTHON is None:
        pytest.skip("needs /usr/bin/python3 for the accounts")
    from corral.cli.slurm.install import write_scripts

    alice, bob = os_users
    server = server_factory(gpus=1, home=os.path.join(shared_dir, "home"))
    bin_dir = os.path.join(shared_dir, "slurm-bin")
    write_scripts(bin_dir, SYSTEM_PYTHON)
    root = os.path.dirname(os.path.dirname(os.path.dirname(__import__("corral").__file__)))

    def as_user(user: str, script: str, **kw) -> subprocess.Popen | subprocess.CompletedProcess:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CORRAL_HOME": server.home, "HOME": "/tmp", "USER": user,
               "PYTHONPATH": os.path.join(root, "src")}
        argv = ["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", "-c", script]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd="/tmp", **kw)

    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CORRAL_HOME": server.home, "HOME": "/tmp", "USER": alice}
    session = pexpect.spawn("runuser", ["-u", alice, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                                        "srun", "--pty", "bash", "--norc", "--noprofile"], encoding="utf-8",
                            timeout=60, cwd="/tmp")
    try:
        session.sendline("echo job=$SLURM_JOB_ID user=$(id -un) home=$HOME umask=$(umask)")
        session.expect(r"job=(\d+) user=(\S+) home=(\S+) umask=(\d+)\r")
        job_id = session.match.group(1)
        assert session.match.group(2) == alice
        assert session.match.group(3) == os.path.expanduser(f"~{alice}")  # the owner's, as for a batch job
        peek = (f"{SYSTEM_PYTHON} -S -c \"import socket,sys; from corral.cli.wire import Server; "
                f"print(Server(None, '{server.home}').ask('GET', '/api/v1/jobs/{job_id}/terminal'))\"")
        refused = as_user(bob, peek)
        assert refused.returncode == 1 and "only its owner" in refused.stderr, refused.stderr
        path = server.client()._request("GET", f"/api/v1/jobs/{job_id}/terminal")["socket"]
        knock = as_user(bob, f"{SYSTEM_PYTHON} -S -c \"import socket; socket.socket(socket.AF_UNIX)"
                             f".connect('{path}')\"")
        assert knock.returncode == 1 and "PermissionError" in knock.stderr, knock.stderr
        session.sendline("echo unharmed")
        session.expect("unharmed")
        session.sendline("exit 0")
        session.expect(pexpect.EOF)
    finally:
        session.close(force=True)
    assert server.client().wait(job_id, timeout=30)["state"] == "COMPLETED"


def test_no_output_is_lost_when_the_job_exits_right_after_writing_it(server_factory, slurm_shell, terminal):
    server = server_factory(gpus=1)
    streamed = slurm_shell(server.home)("srun bash -c 'seq 1 300000; seq 1 1000 >&2' < /dev/null | sha256sum; "
                                        "seq 1 300000 | sha256sum")
    assert streamed.returncode == 0, streamed.stderr
    through_srun, direct = streamed.stdout.splitlines()
    assert through_srun == direct
    assert streamed.stderr.split() == [str(i) for i in range(1, 1001)]
    child = terminal(server.home, ["srun", "--pty", "bash", "-c", "seq 1 50000; exit 4"])
    child.expect(pexpect.EOF)
    child.close()
    lines = child.before.replace("\r\n", "\n").split("\n")
    assert lines[lines.index("1"):lines.index("50000") + 1] == [str(i) for i in range(1, 50001)]
    assert child.exitstatus == 4



def test_a_client_that_stops_reading_cannot_keep_its_job_past_the_time_limit(server_factory, slurm_path):
    server = server_factory(gpus=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SBATCH_", "SLURM_", "CORRAL_"))}
    env.update(PATH=f"{slurm_path}:{os.environ['PATH']}", CORRAL_HOME=server.home)
    # srun's stdout is a pipe nobody reads: srun blocks, the socket fills, the relay's sends block
    stalled = subprocess.Popen(["srun", "--time=0:04", "yes", "flood"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    try:
        client = server.client()
        job_id = None
        deadline = time.monotonic() + 30
        while job_id is None and time.monotonic() < deadline:
            running = [job for job in client.queue() if job["state"] == "RUNNING"]
            job_id = running[0]["id"] if running else None
            time.sleep(0.1)
        ended = client.wait(job_id, timeout=60)
        assert ended["state"] == "TIMEOUT"  # the time limit held, though its client had stopped reading
        supervisor = os.path.join(server.home, "jobs", str(job_id), "lock")
        from corral.executor.files import lock_held

        deadline = time.monotonic() + 20
        while lock_held(supervisor):  # and its supervisor let go of the client and ended
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        stalled.kill()
        stalled.wait()
