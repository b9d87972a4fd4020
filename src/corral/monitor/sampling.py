"""Per-job samples: GPU figures from NVML, CPU, memory and I/O of the job's process tree.

One `JobSampler.sample(jobs)` call reads the process table once and the GPUs once, for
all jobs together, so its cost grows with the jobs' processes and not with jobs × machine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from corral.core.monitoring.outside_use import OutsideProcess
from corral.monitor.nvml import GpuReading
from corral.monitor.outside import outside_processes
from corral.monitor.processes import process_usage, snapshot_processes

log = logging.getLogger(__name__)

_MB = 1024 * 1024

SAMPLE_FIELDS = ("gpu_utilization", "gpu_memory_mb", "gpu_power_w", "gpu_temperature_c", "cpu_utilization",
                 "cpu_time_s", "rss_mb", "read_mb_s", "write_mb_s", "processes")
"""The scalar fields of a `JobSample` that are stored, one column each, in this order."""


@dataclass(frozen=True)
class WatchedJob:
    """A running local job: its main pid (also its session id), GPUs by NVML index, allocated cores."""

    job_id: int
    pid: int
    gpu_ids: tuple[int, ...]
    cpus: int
    start_time: float
    procs_file: str | None = None
    """Its cgroup's process list: then its processes are exactly those, however they detached."""


@dataclass(frozen=True)
class JobSample:
    """What a job used at one moment; GPU fields are None without GPUs or GPU figures."""

    job_id: int
    time: float
    gpu_utilization: float | None
    """mean % over its GPUs"""
    gpu_memory_mb: float | None
    """its processes' memory on its GPUs where NVML lists it per process, else the GPUs' used memory"""
    gpu_power_w: float | None
    """sum over its GPUs"""
    gpu_temperature_c: float | None
    """hottest of its GPUs"""
    gpus: tuple[tuple[int, float | None, float | None, float | None], ...]
    """(index, utilization %, memory used MB, memory total MB) of each of its GPUs"""
    cpu_utilization: float | None
    """% of its allocated cores (100: all busy; more when it uses more cores than it was given)"""
    cpu_time_s: float
    """cumulative CPU seconds; never decreases"""
    rss_mb: float
    """resident memory summed over its processes (pages that forked workers share count once per process)"""
    read_mb_s: float | None
    """bytes read from storage per second since the previous sample; None on the first"""
    write_mb_s: float | None
    processes: int
    stray_gpus: tuple[int, ...]
    """GPUs not allocated to the job where NVML lists one of its processes (wrong pinning)"""
    own_gpu_memory_mb: float | None = None
    """its processes' memory on its GPUs as NVML lists it per process, never the GPUs' used memory (which
    counts the jobs it shares a GPU with); None: NVML lists none of them with a figure. What holds a sharing
    job to its budget (`corral.core.scheduling.sharing`)."""


@dataclass(frozen=True)
class _Counters:
    """A job's cumulative counters at its previous sample."""

    pid: int
    time: float
    cpu_time_s: float
    read_bytes: int
    write_bytes: int


@dataclass(frozen=True)
class _GpuFigures:
    utilization: float | None = None
    memory_mb: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    gpus: tuple[tuple[int, float | None, float | None, float | None], ...] = ()
    stray: tuple[int, ...] = ()
    own_memory_mb: float | None = None


class JobSampler:
    """Samples jobs, keeping each job's previous counters to turn them into rates.

    Args:
        gpu_source: returns every GPU's reading now (`NvmlReader().read`, `ReplayedGpus(path).read`);
            None for a machine without GPUs.
        clock: epoch seconds, the same clock as `WatchedJob.start_time`.
    """

    def __init__(self, gpu_source: Callable[[], list[GpuReading]] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._gpu_source = gpu_source
        self._clock = clock
        self._previous: dict[int, _Counters] = {}
        self.gpus: list[GpuReading] = []
        """Every GPU as last read, held or free (what the dashboard's cluster view shows)."""
        self.gpus_time: float | None = None
        self.outside: list[OutsideProcess] = []
        """The GPU processes of the last sample that belong to no job (`corral.monitor.outside`)."""

    def sample(self, jobs: Sequence[WatchedJob]) -> list[JobSample]:
        """One sample per job whose main process is alive; jobs not passed are forgotten."""
        now = self._clock()
        readings = self._read_gpus()
        if self._gpu_source is not None:
            self.gpus, self.gpus_time = readings, now
        if not jobs:
            self._previous.clear()
            self.outside = outside_processes(readings, (), now)
            return []
        table = snapshot_processes()
        by_index = {reading.index: reading for reading in readings}
        gpus_of_pid: dict[int, set[int]] = {}
        for reading in readings:
            for pid, _ in reading.processes:
                gpus_of_pid.setdefault(pid, set()).add(reading.index)

        samples, counters = [], {}
        every_job_pid: set[int] = set()
        for job in jobs:
            pids = _cgroup_pids(job.procs_file) if job.procs_file else table.job_pids(job.pid)
            every_job_pid.update(pids)
            if not pids:
                continue
            usage = process_usage(pids)
            if not usage.pids:
                continue
            previous = self._previous.get(job.job_id)
            if previous is not None and previous.pid != job.pid:  # a requeued job runs under a new pid
                previous = None
            # A worker that exits without being waited for takes its CPU time and I/O with it: keep the max.
            current = _Counters(job.pid, now, usage.cpu_time_s, usage.read_bytes, usage.write_bytes)
            if previous is not None:
                current = _Counters(job.pid, now, max(current.cpu_time_s, previous.cpu_time_s),
                                    max(current.read_bytes, previous.read_bytes),
                                    max(current.write_bytes, previous.write_bytes))
            counters[job.job_id] = current
            gpu = _gpu_figures(job.gpu_ids, usage.pids, by_index, gpus_of_pid) if readings else _GpuFigures()
            read_rate, write_rate = _io_rates(previous, current)
            samples.append(JobSample(
                job_id=job.job_id, time=now, gpu_utilization=gpu.utilization, gpu_memory_mb=gpu.memory_mb,
                gpu_power_w=gpu.power_w, gpu_temperature_c=gpu.temperature_c, gpus=gpu.gpus,
                cpu_utilization=_cpu_percent(job, previous, current), cpu_time_s=current.cpu_time_s,
                rss_mb=usage.rss_bytes / _MB, read_mb_s=read_rate, write_mb_s=write_rate,
                processes=len(usage.pids), stray_gpus=gpu.stray, own_gpu_memory_mb=gpu.own_memory_mb,
            ))
        self._previous = counters
        self.outside = outside_processes(readings, every_job_pid, now)
        return samples

    def _read_gpus(self) -> list[GpuReading]:
        if self._gpu_source is None:
            return []
        try:
            return self._gpu_source()
        except Exception:  # noqa: BLE001 - a broken GPU source must not stop CPU and memory sampling
            log.warning("reading the GPUs failed; sampling without GPU figures", exc_info=True)
            return []


def _cgroup_pids(procs_file: str) -> tuple[int, ...]:
    from corral.executor.cgroups import read_pids

    try:
        return tuple(sorted(read_pids(procs_file)))
    except OSError:
        return ()


def _cpu_percent(job: WatchedJob, previous: _Counters | None, current: _Counters) -> float | None:
    """% of the allocated cores since the previous sample, or since the job started on its first."""
    if previous is None:
        used, elapsed = current.cpu_time_s, current.time - job.start_time
    else:
        used, elapsed = current.cpu_time_s - previous.cpu_time_s, current.time - previous.time
    if elapsed <= 0:
        return None
    return 100.0 * used / elapsed / max(job.cpus, 1)


def _io_rates(previous: _Counters | None, current: _Counters) -> tuple[float | None, float | None]:
    if previous is None or current.time <= previous.time:
        return None, None
    elapsed = current.time - previous.time
    return ((current.read_bytes - previous.read_bytes) / _MB / elapsed,
            (current.write_bytes - previous.write_bytes) / _MB / elapsed)


def _gpu_figures(gpu_ids: Sequence[int], pids: Collection[int], by_index: dict[int, GpuReading],
                 gpus_of_pid: dict[int, set[int]]) -> _GpuFigures:
    """A job's share of the GPU readings: its allocated GPUs' figures, and where else its processes run."""
    held = set(gpu_ids)
    stray = sorted({index for pid in pids for index in gpus_of_pid.get(pid, ())} - held)
    mine = [by_index[index] for index in gpu_ids if index in by_index]
    if not mine:
        return _GpuFigures(stray=tuple(stray))
    pid_set = set(pids)
    utilization = [r.utilization for r in mine if r.utilization is not None]
    power = [r.power_w for r in mine if r.power_w is not None]
    temperature = [r.temperature_c for r in mine if r.temperature_c is not None]
    memory = [m for m in (_job_memory_mb(r, pid_set) for r in mine) if m is not None]
    own = [m for r in mine for pid, m in r.processes if pid in pid_set and m is not None]
    return _GpuFigures(
        utilization=sum(utilization) / len(utilization) if utilization else None,
        memory_mb=sum(memory) if memory else None,
        power_w=sum(power) if power else None,
        temperature_c=max(temperature) if temperature else None,
        gpus=tuple((r.index, r.utilization, r.memory_used_mb, r.memory_total_mb) for r in mine),
        stray=tuple(stray),
        own_memory_mb=sum(own) if own else None,
    )


def _job_memory_mb(reading: GpuReading, pids: set[int]) -> float | None:
    """The job's processes' memory on one GPU; the GPU's used memory where NVML cannot say per process.

    That includes a GPU where none of its processes is listed: inside a container NVML
    reports the host's pids, which never match the job's.
    """
    own = [memory for pid, memory in reading.processes if pid in pids]
    known = [memory for memory in own if memory is not None]
    if own and len(known) == len(own):
        return sum(known)
    return reading.memory_used_mb
