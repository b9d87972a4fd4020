"""One reading of a job's usage (`corral.monitor.usage`): the kernel's count at the end over the samples."""

from __future__ import annotations

from corral.core.monitoring.samples import summarize
from corral.core.monitoring.usage_sources import source_words
from corral.monitor.usage import job_usage

T0 = 1_700_000_000.0


def rows(rss: float, cpu: float, gpu: float | None = None) -> list[dict]:
    return [{"time": T0 + i, "rss_mb": rss, "cpu_time_s": cpu * (i + 1) / 3, "gpu_utilization": gpu,
             "gpu_memory_mb": None} for i in range(3)]


def test_the_cgroups_peak_wins_over_samples_that_missed_the_growth():
    usage = job_usage(summarize(rows(42.0, 0.3)), {"cpu_time_s": 0.9, "max_rss_mb": 508.3, "memory_source": "cgroup"})
    assert (usage.peak_rss_mb, usage.memory_source, usage.cpu_time_s, usage.cpu_source) == (508.3, "cgroup", 0.9, "cgroup")
    # forked workers' shared pages counted again in each sample: the kernel's count is the truth, even when lower
    shared = job_usage(summarize(rows(900.0, 0.3)), {"max_rss_mb": 600.0, "memory_source": "cgroup"})
    assert (shared.peak_rss_mb, shared.memory_source) == (600.0, "cgroup")
    assert source_words("cgroup") == "the kernel's count for its cgroup when it ended"


def test_wait4_counts_one_process_so_larger_samples_win_and_say_so():
    usage = job_usage(summarize(rows(900.0, 0.3)), {"cpu_time_s": 0.1, "max_rss_mb": 600.0})
    assert (usage.peak_rss_mb, usage.memory_source) == (900.0, "rusage+samples")
    assert (usage.cpu_time_s, usage.cpu_source) == (0.3, "rusage+samples")
    assert job_usage(None, {"cpu_time_s": 2.0, "max_rss_mb": 64.0}).memory_source == "rusage"


def test_a_running_job_is_its_samples_and_gpu_figures_only_ever_are():
    usage = job_usage(summarize(rows(100.0, 3.0, gpu=40.0)), None)
    assert (usage.peak_rss_mb, usage.memory_source, usage.gpu_utilization_mean, usage.gpu_source) == (
        100.0, "samples", 40.0, "samples")
    assert job_usage(summarize(rows(100.0, 3.0)), None).gpu_source is None  # no GPU figures: not checked
    nothing = job_usage(None, None)
    assert (nothing.peak_rss_mb, nothing.memory_source, nothing.samples) == (None, None, 0)
