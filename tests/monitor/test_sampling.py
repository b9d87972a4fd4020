"""Per-job samples from real processes (each started in its own session, like a job) and recorded GPU frames."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from corral.monitor import processes
from corral.monitor.nvml import gpu_source_from_env
from corral.monitor.processes import process_usage, snapshot_processes
from corral.monitor.sampling import SAMPLE_FIELDS, JobSample, JobSampler, WatchedJob
from tests.helpers import wait_for

FIXTURE = Path(__file__).parent / "data" / "nvml_8gpu.jsonl"
# The fixture's pids are above Linux's PID_MAX_LIMIT (4,194,304), so they can never be real;
# tests swap them for their own processes' pids.
PLACEHOLDER_MAIN, PLACEHOLDER_CHILD, PLACEHOLDER_STRAY, PLACEHOLDER_MIG = 5000001, 5000002, 5000003, 5000004

SLEEP = "import time; time.sleep(120)"
PARENT_OF_SLEEPER = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(120)\n"
)


class Jobs:
    """Real job-like processes (each the leader of its own session), all killed at teardown."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []
        self.escaped: list[int] = []

    def start(self, code: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, **kwargs)
        self.started.append(proc)
        return proc

    def started_with_output(self, code: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        return self.start(code, stdout=subprocess.PIPE, **kwargs)

    def kill_all(self) -> None:
        for proc in self.started:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the job's pid is its process group
            except ProcessLookupError:
                pass
        for pid in self.escaped:  # processes that left the job's process group
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.started:
            proc.wait(timeout=10)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


@pytest.fixture
def jobs() -> Iterator[Jobs]:
    started = Jobs()
    try:
        yield started
    finally:
        started.kill_all()


def line(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stdout is not None
    text = proc.stdout.readline().decode().strip()
    assert text, f"process {proc.pid} ended without saying anything (exit {proc.poll()})"
    return text


def watch(proc: subprocess.Popen[bytes], *, job_id: int = 1, gpu_ids: tuple[int, ...] = (), cpus: int = 1,
          start_time: float) -> WatchedJob:
    return WatchedJob(job_id=job_id, pid=proc.pid, gpu_ids=gpu_ids, cpus=cpus, start_time=start_time)


def by_job(samples: list[JobSample]) -> dict[int, JobSample]:
    return {s.job_id: s for s in samples}


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.serial  # measures a job's CPU share or a live view's pace: alone on the machine
def test_a_busy_job_uses_all_of_one_allocated_core_and_half_of_two(jobs):
    started = time.time()
    busy = jobs.start("while True: pass")
    sampler = JobSampler()
    one_core, two_cores = watch(busy, job_id=1, cpus=1, start_time=started), watch(busy, job_id=2, cpus=2,
                                                                                  start_time=started)
    time.sleep(1.0)
    first = by_job(sampler.sample([one_core, two_cores]))  # first sample: CPU time over the time since start
    time.sleep(1.0)
    second = by_job(sampler.sample([one_core, two_cores]))  # then: over the time since the previous sample
    for sample in (first, second):
        assert 60 <= sample[1].cpu_utilization <= 140
        assert 30 <= sample[2].cpu_utilization <= 70
    assert second[1].cpu_time_s >= first[1].cpu_time_s + 0.6
    assert second[1].processes == 1


def test_memory_a_child_touches_counts_toward_its_job(jobs):
    allocate = "x = b'x' * (500 << 20); print('ready', flush=True); import time; time.sleep(120)"
    parent = jobs.started_with_output(f"import subprocess, sys; subprocess.run([sys.executable, '-c', {allocate!r}])")
    assert line(parent) == "ready"

    [sample] = JobSampler().sample([watch(parent, start_time=time.time())])

    assert sample.rss_mb >= 450
    assert sample.processes == 2
    assert process_usage([parent.pid]).rss_bytes < 200 << 20  # the parent alone is small: the child was counted


def test_a_daemon_that_stays_in_the_session_is_attributed_and_one_that_left_it_is_not(jobs):
    # Each daemon double-forks, so its parent dies and it leaves the job's process tree;
    # the second also calls setsid() and so leaves the session too. Each line is one os.write(): the three
    # processes write concurrently, and print() may split a line into several writes.
    code = (
        "import os, time\n"
        "def daemon(tag, new_session):\n"
        "    main = os.getpid()\n"
        "    first = os.fork()\n"
        "    if first == 0:\n"
        "        if new_session:\n"
        "            os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            os.write(1, f'{tag} {os.getpid()}\\n'.encode())\n"
        "            while True:  # until the job's main process is gone, even if the test never kills it\n"
        "                time.sleep(0.2)\n"
        "                os.kill(main, 0)\n"
        "        os._exit(0)\n"
        "    os.waitpid(first, 0)\n"
        "daemon('stayed', False)\n"
        "daemon('left', True)\n"
        "os.write(1, b'ready\\n')\n"
        "time.sleep(120)\n"
    )
    main = jobs.started_with_output(code)
    said = dict(line(main).partition(" ")[::2] for _ in range(3))
    stayed, left = int(said["stayed"]), int(said["left"])
    jobs.escaped.append(left)  # killpg on the job's group does not reach it
    assert psutil.Process(stayed).ppid() != main.pid  # really out of the tree

    assert set(snapshot_processes().job_pids(main.pid)) == {main.pid, stayed}
    [sample] = JobSampler().sample([watch(main, start_time=time.time())])
    assert sample.processes == 2


def test_a_process_name_with_parentheses_does_not_confuse_the_table(jobs):
    # /proc/<pid>/stat puts the name in parentheses; a name may itself hold ") 1 1 1".
    code = ("import ctypes, subprocess, sys, time\n"
            "ctypes.CDLL(None).prctl(15, b'evil) 1 1 1', 0, 0, 0)\n"  # PR_SET_NAME
            f"{PARENT_OF_SLEEPER}")
    main = jobs.started_with_output(code)
    child = int(line(main))
    assert psutil.Process(main.pid).name() == "evil) 1 1 1"
    assert snapshot_processes().job_pids(main.pid) == tuple(sorted((main.pid, child)))


def test_the_psutil_fallback_sees_the_same_parents_and_sessions(jobs):
    main = jobs.started_with_output(PARENT_OF_SLEEPER)
    child = int(line(main))
    from_proc, from_psutil = processes._scan_proc(), processes._scan_psutil()
    for pid in (main.pid, child):
        assert from_proc[pid] == from_psutil[pid]
    assert from_proc[child] == (main.pid, main.pid)


def test_writing_to_disk_shows_a_write_rate(jobs, tmp_path):
    target = tmp_path / "written.bin"
    code = (
        "import os, sys, time\n"
        "sys.stdin.readline()\n"
        f"with open({str(target)!r}, 'wb') as f:\n"
        "    for _ in range(50):\n"
        "        f.write(os.urandom(1 << 20))\n"
        "    f.flush()\n"
        "    os.fsync(f.fileno())\n"
        "print('done', flush=True)\n"
        "time.sleep(120)\n"
    )
    writer = jobs.start(code, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    clock = FakeClock(1000.0)
    sampler = JobSampler(clock=clock)
    job = watch(writer, start_time=999.0)

    [before] = sampler.sample([job])
    writer.stdin.write(b"go\n")
    writer.stdin.flush()
    assert line(writer) == "done"
    clock.now = 1001.0
    [after] = sampler.sample([job])

    assert before.write_mb_s is None and before.read_mb_s is None  # no rate without a previous sample
    assert 45 <= after.write_mb_s <= 80  # 50 MB over the clock's 1 s
    assert after.read_mb_s is not None and after.read_mb_s >= 0


@pytest.mark.serial  # measures a job's CPU share or a live view's pace: alone on the machine
def test_cpu_time_of_a_worker_that_came_and_went_still_counts(jobs):
    burn = "import time\\nwhile time.process_time() < 0.5: pass"  # CPU time, not wall time: a loaded machine slows it
    main = jobs.started_with_output(
        f"import subprocess, sys, time; subprocess.run([sys.executable, '-c', '{burn}']); print('waited', flush=True); "
        "time.sleep(120)")
    assert line(main) == "waited"
    [sample] = JobSampler().sample([watch(main, start_time=time.time())])
    assert sample.processes == 1
    assert sample.cpu_time_s >= 0.4  # the worker's 0.5 s, through its parent's children times


@pytest.mark.serial  # measures a job's CPU share or a live view's pace: alone on the machine
def test_cpu_time_never_goes_back_when_a_worker_ends_unwaited(jobs):
    # With SIGCHLD ignored the kernel reaps the worker itself, and its CPU time is added to no one.
    code = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        "worker = os.fork()\n"
        "if worker == 0:\n"
        "    while time.process_time() < 0.5:  # half a second of CPU, however long the machine takes to give it\n"
        "        pass\n"
        "    os.write(1, b'spun\\n')\n"
        "    os.read(0, 1)  # then ends when the test says\n"
        "    os._exit(0)\n"
        "print(worker, flush=True)\n"
        "time.sleep(120)\n"
    )
    main = jobs.started_with_output(code, stdin=subprocess.PIPE)
    said = {line(main), line(main)}  # its pid, and the worker's word that it spun (in either order)
    said.remove("spun")
    worker = int(said.pop())
    sampler = JobSampler()
    job = watch(main, start_time=time.time())
    [during] = sampler.sample([job])
    assert during.processes == 2 and during.cpu_time_s >= 0.3
    assert main.stdin is not None
    main.stdin.write(b"x")
    main.stdin.flush()
    wait_for(lambda: not psutil.pid_exists(worker), timeout=10)
    assert not psutil.pid_exists(worker)

    [after] = sampler.sample([job])

    assert process_usage([main.pid]).cpu_time_s < during.cpu_time_s  # the worker's time really is gone
    assert after.cpu_time_s >= during.cpu_time_s
    assert after.cpu_utilization is not None and after.cpu_utilization >= 0
    assert after.processes == 1


def replay_with_pids(tmp_path: Path, pids: dict[int, int]) -> str:
    """The recorded frames with placeholder pids swapped for real ones."""
    path = tmp_path / "frames.jsonl"
    with open(FIXTURE) as source, open(path, "w") as out:
        for text in source:
            frame = json.loads(text)
            for gpu in frame:
                for proc in gpu["processes"]:
                    proc["pid"] = pids.get(proc["pid"], proc["pid"])
            out.write(json.dumps(frame) + "\n")
    return str(path)


def test_gpu_figures_are_attributed_to_the_job_that_holds_the_gpus(jobs, tmp_path):
    two_gpus = jobs.started_with_output(PARENT_OF_SLEEPER)
    child = int(line(two_gpus))
    pinned_wrong, mig, cpu_only = jobs.start(SLEEP), jobs.start(SLEEP), jobs.start(SLEEP)
    frames = replay_with_pids(tmp_path, {PLACEHOLDER_MAIN: two_gpus.pid, PLACEHOLDER_CHILD: child,
                                         PLACEHOLDER_STRAY: pinned_wrong.pid, PLACEHOLDER_MIG: mig.pid})
    sampler = JobSampler(gpu_source=gpu_source_from_env({"CORRAL_GPU_REPLAY": frames}))
    now = time.time()
    watched = [watch(two_gpus, job_id=1, gpu_ids=(1, 2), start_time=now),
               watch(pinned_wrong, job_id=2, gpu_ids=(4,), start_time=now),
               watch(mig, job_id=3, gpu_ids=(6,), start_time=now),
               watch(cpu_only, job_id=4, start_time=now)]

    first = by_job(sampler.sample(watched))

    # GPU 1: the main process, 20 GiB, 90 %, 650.5 W, 71 °C; GPU 2: its child, 30 GiB, 70 %, 540.25 W, 63 °C.
    job = first[1]
    assert job.gpu_utilization == 80.0
    assert job.gpu_memory_mb == 20480 + 30720  # its processes' memory, not the devices' 20992 + 31232
    assert job.gpu_power_w == 650.5 + 540.25
    assert job.gpu_temperature_c == 71
    assert job.gpus == ((1, 90.0, 20992.0, 81920.0), (2, 70.0, 31232.0, 81920.0))
    assert job.stray_gpus == ()
    # Holds GPU 4 but a process of it also runs on GPU 5.
    assert first[2].stray_gpus == (5,)
    assert first[2].gpu_memory_mb == 12288
    # NVML cannot tell per-process memory (MIG): the device's used memory stands in.
    assert first[3].gpu_memory_mb == 6656
    # No GPUs: no GPU figures.
    cpu_job = first[4]
    assert (cpu_job.gpu_utilization, cpu_job.gpu_memory_mb, cpu_job.gpu_power_w, cpu_job.gpu_temperature_c) == (
        None, None, None, None)
    assert (cpu_job.gpus, cpu_job.stray_gpus) == ((), ())

    second = by_job(sampler.sample(watched))  # one GPU read per call: the next frame
    assert second[1].gpu_utilization == (100 + 64) / 2


def test_without_gpu_figures_the_gpu_fields_are_none_and_the_rest_still_comes(jobs):
    def broken() -> list:
        raise RuntimeError("NVML fell over")

    proc = jobs.start(SLEEP)
    job = watch(proc, gpu_ids=(0, 1), start_time=time.time())
    for source in (lambda: [], broken):
        [sample] = JobSampler(gpu_source=source).sample([job])
        assert (sample.gpu_utilization, sample.gpu_memory_mb, sample.gpu_power_w, sample.gpu_temperature_c,
                sample.gpus, sample.stray_gpus) == (None, None, None, None, (), ())
        assert sample.processes == 1 and sample.rss_mb > 0


def test_a_job_whose_process_is_gone_gives_no_sample_and_a_job_left_out_is_forgotten(jobs):
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    alive = jobs.start(SLEEP)
    clock = FakeClock(500.0)
    sampler = JobSampler(clock=clock)
    gone = WatchedJob(job_id=7, pid=finished.pid, gpu_ids=(), cpus=1, start_time=499.0)
    job = watch(alive, job_id=8, start_time=499.0)

    assert [s.job_id for s in sampler.sample([gone, job])] == [8]
    clock.now = 501.0
    assert sampler.sample([job])[0].read_mb_s is not None  # a rate: there was a previous sample
    clock.now = 502.0
    sampler.sample([watch(alive, job_id=9, start_time=499.0)])
    clock.now = 503.0
    [again] = sampler.sample([job])
    assert again.read_mb_s is None  # job 8 was left out once, so this is its first sample again
    assert again.cpu_utilization == pytest.approx(100 * again.cpu_time_s / (503.0 - 499.0))


def test_sample_fields_name_the_stored_scalars_in_order():
    assert SAMPLE_FIELDS == ("gpu_utilization", "gpu_memory_mb", "gpu_power_w", "gpu_temperature_c",
                             "cpu_utilization", "cpu_time_s", "rss_mb", "read_mb_s", "write_mb_s", "processes")
    assert set(SAMPLE_FIELDS) <= set(JobSample.__dataclass_fields__)


def test_a_gpu_process_of_no_job_is_outside_corral_with_its_user_and_a_job_tree_s_is_not(jobs, tmp_path):
    import getpass

    job = jobs.started_with_output(PARENT_OF_SLEEPER)
    child = int(line(job))
    notebook = jobs.start(SLEEP)  # a session of its own, watched by nobody: outside corral
    frames = replay_with_pids(tmp_path, {PLACEHOLDER_MAIN: job.pid, PLACEHOLDER_CHILD: child,
                                         PLACEHOLDER_STRAY: notebook.pid})
    sampler = JobSampler(gpu_source=gpu_source_from_env({"CORRAL_GPU_REPLAY": frames}))
    sampler.sample([watch(job, job_id=1, gpu_ids=(1, 2), start_time=time.time())])
    # the fixture's other pids (above PID_MAX_LIMIT) are seen nowhere here: not counted
    me = getpass.getuser()
    assert [(p.gpu, p.pid, p.user, p.mem_mb) for p in sampler.outside] == [(4, notebook.pid, me, 12288.0),
                                                                            (5, notebook.pid, me, 2048.0)]

    sampler.sample([])  # no job at all: every visible GPU process is outside corral
    assert sorted((p.gpu, p.pid) for p in sampler.outside) == [(1, job.pid), (2, child), (4, notebook.pid),
                                                               (5, notebook.pid)]
