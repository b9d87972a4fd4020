"""The cgroup drivers on the real kernel: a job's processes are held, limited, counted and killed whole.

This machine (and CI) has the v1 controllers mounted one per directory, and cgroup2 at
/sys/fs/cgroup/unified with no controller of its own (a hybrid layout): the v1 driver is
tested with every controller, the v2 driver with what the unified hierarchy offers here
(membership, freeze, cgroup.kill, cpu.stat and the BPF device filter). Needs root.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from corral.executor.cgroups import JobCgroup, JobLimits, open_job_cgroup
from corral.executor.cgroups.placement import _mounts, find_layout, home_key
from tests.helpers import alive, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making cgroups needs root (CI runs as root)")

V1_MOUNTS, V2_MOUNT = _mounts("/proc/self/mountinfo")
needs_v1 = pytest.mark.skipif("memory" not in V1_MOUNTS, reason="no cgroup v1 memory hierarchy on this machine")
needs_v2 = pytest.mark.skipif(V2_MOUNT is None, reason="no cgroup2 hierarchy on this machine")


@pytest.fixture
def v1_job():
    """A job cgroup in every v1 hierarchy, removed afterwards (its processes killed first)."""
    base = f"corral-test-{uuid.uuid4().hex[:8]}"
    layout = {"version": 1, "paths": {c: os.path.join(V1_MOUNTS[c], base) for c in
                                      ("freezer", "memory", "pids", "devices", "cpuacct") if c in V1_MOUNTS}}
    cgroup = open_job_cgroup(layout, "job_1")
    yield cgroup
    _tear_down(cgroup, list(layout["paths"].values()))


@pytest.fixture
def v2_job():
    base = os.path.join(V2_MOUNT, f"corral-test-{uuid.uuid4().hex[:8]}")
    cgroup = open_job_cgroup({"version": 2, "path": base}, "job_1")
    yield cgroup
    _tear_down(cgroup, [base])


def _tear_down(cgroup: JobCgroup, bases: list[str]) -> None:
    cgroup.kill_until_empty()
    cgroup.remove()
    for base in bases:
        os.rmdir(base)


def spawn_in(cgroup: JobCgroup, code: str) -> subprocess.Popen:
    """A Python process that waits until it is in the cgroup, then runs `code` (as the supervisor's gate does)."""
    gate_r, gate_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", f"import os; os.read({gate_r}, 1)\n" + textwrap.dedent(code)],
                            pass_fds=(gate_r,), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(gate_r)
    cgroup.attach(proc.pid)
    os.write(gate_w, b"1")
    os.close(gate_w)
    return proc


DETACH = """
    import subprocess, time
    # a grandchild in a session of its own: it has left the process group and the session
    subprocess.Popen(["sleep", "600"], start_new_session=True)
    print("detached", flush=True)
    time.sleep(600)
"""


def held_by_cgroup_but_not_session(cgroup: JobCgroup) -> int:
    proc = spawn_in(cgroup, DETACH)
    assert proc.stdout.readline() == "detached\n"
    members = wait_for(lambda: len(cgroup.pids()) >= 2 and cgroup.pids())
    escaped = [pid for pid in members if pid != proc.pid and os.getsid(pid) != os.getsid(proc.pid)]
    assert escaped, "the setsid grandchild left the session"
    return escaped[0]


@needs_v1
def test_v1_holds_a_setsid_grandchild_and_kills_it_with_the_job(v1_job):
    v1_job.create(JobLimits())
    escapee = held_by_cgroup_but_not_session(v1_job)
    v1_job.kill_until_empty()
    assert v1_job.pids() == []
    assert not alive(escapee)
    v1_job.remove()
    assert not any(os.path.exists(path) for path in v1_job.paths())


@needs_v1
def test_v1_memory_limit_is_the_kernels_and_its_oom_kill_is_counted(v1_job):
    v1_job.create(JobLimits(memory_bytes=64 << 20))
    assert v1_job.oom_kills() == 0
    proc = spawn_in(v1_job, "a = bytearray(256 << 20)\nprint('survived')")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL and "survived" not in out
    assert v1_job.oom_kills() == 1
    assert 60 <= v1_job.usage().peak_memory_mb <= 65


@needs_v1
def test_v1_caps_the_processes_of_one_job(v1_job):
    v1_job.create(JobLimits(max_processes=20))
    proc = spawn_in(v1_job, """
        import subprocess
        started = 0
        try:
            for _ in range(50):
                subprocess.Popen(["sleep", "30"])
                started += 1
        except OSError as exc:
            print(started, exc.errno, flush=True)
    """)
    started, error = proc.stdout.readline().split()
    assert int(started) < 20 and int(error) == errno.EAGAIN


@needs_v1
def test_v1_counts_the_cpu_time_of_processes_nobody_waited_for(v1_job):
    v1_job.create(JobLimits())
    burn = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass"
    proc = spawn_in(v1_job, f"""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", {burn!r}], start_new_session=True)  # never waited for
    """)
    proc.wait(timeout=30)
    wait_for(lambda: not v1_job.pids(), timeout=30)
    assert v1_job.usage().cpu_time_s >= 0.6


def open_errors(cgroup: JobCgroup, devices_dir: str, count: int) -> dict[int, int]:
    """errno of opening each /dev/nvidiaN look-alike from inside the cgroup."""
    proc = spawn_in(cgroup, f"""
        import os
        for n in range({count}):
            try:
                os.close(os.open(os.path.join({devices_dir!r}, f"nvidia{{n}}"), os.O_RDWR))
                print(n, 0)
            except OSError as exc:
                print(n, exc.errno)
    """)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return {int(n): int(code) for n, code in (line.split() for line in out.splitlines())}


@pytest.fixture
def nvidia_nodes(short_tmp):
    """Device files 195:0..3, as /dev/nvidia0..3 are: with no driver behind them, an allowed open is ENXIO."""
    for n in range(4):
        os.mknod(os.path.join(short_tmp, f"nvidia{n}"), 0o666 | 0o020000, os.makedev(195, n))
    return short_tmp


@needs_v1
def test_v1_job_cannot_open_gpus_that_are_not_its_own(v1_job, nvidia_nodes):
    v1_job.create(JobLimits(deny_devices=(("c", 195, 0), ("c", 195, 2), ("c", 195, 3))))
    errors = open_errors(v1_job, nvidia_nodes, 4)
    assert errors[1] == errno.ENXIO  # its own: the kernel let it through to the (absent) driver
    assert {errors[0], errors[2], errors[3]} == {errno.EPERM}


@needs_v2
def test_v2_bpf_filter_denies_other_gpus(v2_job, nvidia_nodes):
    v2_job.create(JobLimits(deny_devices=(("c", 195, 1), ("c", 195, 3))))
    errors = open_errors(v2_job, nvidia_nodes, 4)
    assert errors[0] == errors[2] == errno.ENXIO
    assert errors[1] == errors[3] == errno.EPERM


@needs_v2
def test_v2_holds_a_setsid_grandchild_and_kills_it_with_the_job(v2_job):
    v2_job.create(JobLimits())
    escapee = held_by_cgroup_but_not_session(v2_job)
    v2_job.freeze()
    assert "frozen 1" in open(os.path.join(v2_job.paths()[0], "cgroup.events")).read()
    v2_job.thaw()
    v2_job.kill_until_empty()
    assert not alive(escapee) and v2_job.pids() == []



HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
PURE_V2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"


def test_mounts_are_read_from_mountinfo(tmp_path):
    hybrid, pure = tmp_path / "hybrid", tmp_path / "pure"
    hybrid.write_text(HYBRID)
    pure.write_text(PURE_V2)
    v1, v2 = _mounts(str(hybrid))
    assert v1["cpuacct"] == v1["cpu"] == "/sys/fs/cgroup/cpu,cpuacct" and v1["memory"] == "/sys/fs/cgroup/memory"
    assert v2 == "/sys/fs/cgroup/unified"
    assert _mounts(str(pure)) == ({}, "/sys/fs/cgroup")


@needs_v1
def test_placement_on_this_machine_and_its_fallback(short_tmp):
    placement = find_layout(short_tmp)
    try:
        assert placement.mode in ("cgroup v1", "cgroup v2")
        assert "dies with it" in placement.summary
        if placement.layout["version"] == 1:
            assert all(path.endswith(f"/corral/{home_key(short_tmp)}") for path in placement.layout["paths"].values())
    finally:
        placement.release()
    off = find_layout(short_tmp, "off")
    assert off.layout is None and "setsid escapes" in off.summary
    assert home_key(short_tmp) != home_key(short_tmp + "x")


def _spawn_nested(cgroup_dirs: list[str], code: str) -> subprocess.Popen:
    """A process put in a cgroup nested in the job's, as a container runtime puts a container's."""
    gate_r, gate_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", f"import os; os.read({gate_r}, 1)\n" + textwrap.dedent(code)],
                            pass_fds=(gate_r,), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(gate_r)
    for path in cgroup_dirs:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(proc.pid))
    os.write(gate_w, b"1")
    os.close(gate_w)
    return proc


@needs_v1
def test_v1_counts_an_oom_kill_in_a_nested_cgroup_the_runtime_removed(v1_job):
    """Podman runs a container in a cgroup under the job's and removes it as the container ends; v1 keeps the
    kill's count there, so the job's own memory event is what says it ran out of memory."""
    v1_job.create(JobLimits(memory_bytes=64 << 20))
    inner = [os.path.join(path, "libpod-test") for path in v1_job.paths()]
    proc = _spawn_nested(inner, "x = bytearray(300 * 2**20)")
    assert proc.wait(timeout=30) == -signal.SIGKILL
    for path in inner:
        os.rmdir(path)
    assert v1_job.oom_kills() >= 1


@needs_v2
def test_v2_runtime_leaf_and_a_nested_container_are_the_jobs_and_removed_with_it(v2_job):
    v2_job.create(JobLimits())
    gate_r, gate_w = os.pipe()
    client = subprocess.Popen([sys.executable, "-c", f"import os, time; os.read({gate_r}, 1); time.sleep(600)"],
                              pass_fds=(gate_r,))
    os.close(gate_r)
    v2_job.attach(client.pid, leaf="runtime")  # v2: the job's cgroup itself holds no process
    os.write(gate_w, b"1")
    os.close(gate_w)
    container = _spawn_nested([os.path.join(v2_job.paths()[0], "libpod-test")], "import time; time.sleep(600)")
    wait_for(lambda: sorted(v2_job.pids()) == sorted([client.pid, container.pid]))
    assert v2_job.nested_pids(("runtime", "conmon")) == [container.pid]  # what a signal for the program reaches
    v2_job.kill_until_empty()
    assert client.wait(timeout=10) == -signal.SIGKILL and container.wait(timeout=10) == -signal.SIGKILL
    v2_job.remove()
    assert not os.path.exists(v2_job.paths()[0])
