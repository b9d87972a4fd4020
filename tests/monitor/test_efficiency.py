"""Sample summaries and seff-like efficiency reports (local and Slurm), with their advice."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from corral.backends.slurm import efficiency as slurm_efficiency
from corral.backends.slurm.parse import SEP
from corral.cli.format_monitoring import format_efficiency
from corral.core.monitoring.efficiency_advice import advice
from corral.monitor.efficiency import local_efficiency
from corral.core.monitoring.samples import SampleSummary, summarize

T0 = 1_718_000_000.0


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def job(**changes: Any) -> dict[str, Any]:
    """A finished local job as the API shows it (times as ISO text)."""
    view = {"id": 7, "ref": "7", "name": "train", "state": "COMPLETED", "exit_code": 0, "signal": None,
            "gpus": 2, "gpu_type": "A100", "gpu_mem_mb": 40960, "cpus": 8, "mem_mb": 65536,
            "time_limit_s": 3600, "backend_id": None,
            "start_time": iso(T0), "end_time": iso(T0 + 1000)}
    view.update(changes)
    return view


def summary(**changes: Any) -> SampleSummary:
    fields = dict(count=100, first_time=T0 + 5, last_time=T0 + 995, gpu_utilization_mean=80.0,
                  gpu_utilization_max=99.0, gpu_memory_peak_mb=30000.0, gpu_power_mean_w=300.0,
                  cpu_utilization_mean=60.0, cpu_time_s=4000.0, rss_peak_mb=20000.0, low_gpu_fraction=0.05)
    fields.update(changes)
    return SampleSummary(**fields)


# -- summarize --------------------------------------------------------------------------------------


def test_no_samples_summarize_to_none():
    assert summarize([]) is None


def test_summary_means_peaks_and_the_last_cumulative_cpu_time_in_time_order():
    rows = [  # out of order, as a store may return them
        {"time": T0 + 20, "gpu_utilization": 10.0, "gpu_memory_mb": 9000.0, "gpu_power_w": 100.0,
         "cpu_utilization": 90.0, "cpu_time_s": 30.0, "rss_mb": 1500.0},
        {"time": T0, "gpu_utilization": 50.0, "gpu_memory_mb": 8000.0, "gpu_power_w": 200.0,
         "cpu_utilization": 50.0, "cpu_time_s": 10.0, "rss_mb": 2500.0},
        {"time": T0 + 10, "gpu_utilization": 20.0, "gpu_memory_mb": None, "gpu_power_w": None,
         "cpu_utilization": 70.0, "cpu_time_s": 20.0, "rss_mb": 2000.0},
    ]
    s = summarize(rows)
    assert (s.count, s.first_time, s.last_time, s.duration_s) == (3, T0, T0 + 20, 20.0)
    assert s.gpu_utilization_mean == pytest.approx(80 / 3) and s.gpu_utilization_max == 50.0
    assert s.gpu_memory_peak_mb == 9000.0 and s.gpu_power_mean_w == 150.0  # the None row left out
    assert s.cpu_utilization_mean == 70.0 and s.cpu_time_s == 30.0  # the latest, not the first listed
    assert s.rss_peak_mb == 2500.0
    assert s.low_gpu_fraction == pytest.approx(2 / 3)  # 10 and 20 are below 30 %; 50 is not


def test_summary_of_a_cpu_job_has_no_gpu_figures():
    rows = [{"time": T0 + i, "gpu_utilization": None, "cpu_utilization": 100.0, "cpu_time_s": float(i),
             "rss_mb": 100.0 + i} for i in range(3)]
    rows.append({"time": T0 + 3, "cpu_utilization": 100.0})  # a row without the GPU keys at all
    s = summarize(rows)
    assert (s.gpu_utilization_mean, s.gpu_utilization_max, s.gpu_memory_peak_mb, s.gpu_power_mean_w,
            s.low_gpu_fraction) == (None, None, None, None, None)
    assert s.cpu_time_s == 2.0 and s.rss_peak_mb == 102.0


def test_a_single_sample_is_its_own_mean_and_peak():
    s = summarize([{"time": T0, "gpu_utilization": 31.0, "gpu_memory_mb": 512.0, "rss_mb": 64.0}])
    assert (s.count, s.duration_s, s.gpu_utilization_mean, s.gpu_utilization_max) == (1, 0.0, 31.0, 31.0)
    assert s.low_gpu_fraction == 0.0 and s.cpu_utilization_mean is None and s.cpu_time_s is None


# -- local_efficiency -------------------------------------------------------------------------------


def test_local_report_from_samples_alone():
    report = local_efficiency(job(), summary(), None)
    assert (report["state"], report["elapsed_s"], report["cpus"]) == ("COMPLETED", 1000.0, 8)
    assert report["cpu_time_s"] == 4000.0 and report["cpu_efficiency"] == 0.5  # 4000 / (1000 s x 8)
    assert (report["max_rss_mb"], report["mem_requested_mb"]) == (20000.0, 65536)
    assert report["mem_efficiency"] == round(20000 / 65536, 4)
    assert report["source"] == "samples"
    assert (report["gpus"], report["gpu_utilization_mean"], report["gpu_memory_peak_mb"]) == (2, 80.0, 30000.0)
    assert report["gpu_memory_requested_mb"] == 81920  # 40 GB on each of 2 GPUs
    assert report["gpu_memory_total_mb"] is None


def test_rusage_is_preferred_for_cpu_time_and_the_larger_peak_wins():
    report = local_efficiency(job(), summary(cpu_time_s=4000.0, rss_peak_mb=20000.0),
                              {"cpu_time_s": 6000.0, "max_rss_mb": 18000.0}, gpu_memory_total_mb=163840)
    assert report["cpu_time_s"] == 6000.0 and report["cpu_efficiency"] == 0.75
    assert report["max_rss_mb"] == 20000.0  # the samples saw more than the kernel's peak of the main process
    assert report["source"] == "samples+rusage" and report["gpu_memory_total_mb"] == 163840
    higher = local_efficiency(job(), summary(rss_peak_mb=20000.0), {"cpu_time_s": 6000.0, "max_rss_mb": 24000.0})
    assert higher["max_rss_mb"] == 24000.0


def test_a_job_shorter_than_one_sample_is_measured_by_rusage():
    short = job(cpus=2, mem_mb=1024, gpus=0, gpu_mem_mb=None, start_time=iso(T0), end_time=iso(T0 + 4))
    report = local_efficiency(short, None, {"cpu_time_s": 6.0, "max_rss_mb": 256.0})
    assert report["source"] == "rusage"
    assert (report["elapsed_s"], report["cpu_efficiency"]) == (4.0, 0.75)  # 6 / (4 s x 2)
    assert (report["max_rss_mb"], report["mem_efficiency"]) == (256.0, 0.25)
    assert report["gpu_utilization_mean"] is None and report["gpu_memory_requested_mb"] is None


def test_a_running_job_is_measured_up_to_now():
    running = job(state="RUNNING", end_time=None)
    report = local_efficiency(running, summary(cpu_time_s=1200.0), None, now=T0 + 300)
    assert report["elapsed_s"] == 300.0 and report["cpu_efficiency"] == 0.5  # 1200 / (300 s x 8)


def test_epoch_seconds_are_accepted_as_well_as_iso_text():
    report = local_efficiency(job(start_time=T0, end_time=T0 + 1000), summary(), None)
    assert report["elapsed_s"] == 1000.0


def test_no_memory_request_means_no_memory_efficiency():
    report = local_efficiency(job(mem_mb=0), summary(), None)
    assert report["mem_requested_mb"] is None and report["mem_efficiency"] is None
    assert "Memory Efficiency: - (no memory was requested)" in format_efficiency(job(mem_mb=0), report)


# -- advice -----------------------------------------------------------------------------------------


def base_report(**changes: Any) -> dict[str, Any]:
    """A report that needs no advice; each test spoils one figure."""
    report = {"state": "COMPLETED", "elapsed_s": 1000, "cpus": 8, "cpu_time_s": 4000.0, "cpu_efficiency": 0.5,
              "max_rss_mb": 40000.0, "mem_requested_mb": 65536, "mem_efficiency": 0.6104, "source": "samples",
              "gpus": 2, "gpu_utilization_mean": 80.0, "gpu_utilization_max": 99.0,
              "gpu_memory_peak_mb": 30000.0}
    report.update(changes)
    return report


def test_a_job_that_fits_its_request_gets_no_advice():
    assert advice(base_report()) == []


def test_memory_advice_names_the_request_the_peak_and_a_smaller_mem():
    peak = 3.1 * 1024
    tips = advice(base_report(max_rss_mb=peak, mem_efficiency=peak / 65536))
    assert tips == ["Memory: asked for 64 GB, peaked at 3.10 GB: --mem 4G would do (29% headroom)."]


def test_a_tiny_peak_is_one_figure_in_eff_and_its_advice_and_the_advice_is_a_request_one_can_make():
    report = base_report(max_rss_mb=0.5, mem_requested_mb=8192, mem_efficiency=0.5 / 8192)
    text = format_efficiency({"id": 3}, report)
    assert "Memory Utilized: 0.5 MB\n" in text
    assert text.splitlines()[-1] == "  - Memory: asked for 8.0 GB, peaked at 0.5 MB: --mem 128M would do (the least worth asking for)."
    sizeable = format_efficiency({"id": 4}, base_report(max_rss_mb=300.0, mem_requested_mb=8192, mem_efficiency=300 / 8192))
    assert "Memory Utilized: 300.0 MB\n" in sizeable
    assert "peaked at 300.0 MB: --mem 384M would do (28% headroom)." in sizeable


@pytest.mark.parametrize(("requested", "used", "advised"), [
    (65536, 0.2499 * 65536, True), (65536, 0.25 * 65536, False),  # the 25 % line
    (2048, 100.0, True), (2047, 100.0, False),                    # requests under 2 GB are left alone
])
def test_memory_advice_thresholds(requested: int, used: float, advised: bool):
    tips = advice(base_report(max_rss_mb=used, mem_requested_mb=requested, mem_efficiency=used / requested))
    assert any(tip.startswith("Memory:") for tip in tips) is advised


def test_cpu_advice_suggests_the_cores_it_kept_busy_with_headroom():
    tips = advice(base_report(cpus=16, cpu_efficiency=0.1))
    assert tips == ["CPU: 16 cores allocated, 1.6 busy on average (10%): -c/--cpus-per-task 2 would do."]


@pytest.mark.parametrize(("cpus", "eff", "advised"), [(4, 0.24, True), (4, 0.25, False), (3, 0.05, False)])
def test_cpu_advice_thresholds(cpus: int, eff: float, advised: bool):
    assert any(tip.startswith("CPU:") for tip in advice(base_report(cpus=cpus, cpu_efficiency=eff))) is advised


@pytest.mark.parametrize(("mean", "advised"), [(29.9, True), (30.0, False)])
def test_low_gpu_utilization_points_at_diagnose(mean: float, advised: bool):
    tips = advice(base_report(gpu_utilization_mean=mean), job_ref="42")
    assert any("corral diagnose 42" in tip for tip in tips) is advised


def test_gpus_never_used_get_their_own_advice_and_not_the_low_utilization_one():
    tips = advice(base_report(gpu_utilization_mean=0.0, gpu_utilization_max=0.0, gpu_memory_peak_mb=0.0))
    assert len(tips) == 1
    assert "never used its 2 GPUs" in tips[0] and "CUDA_VISIBLE_DEVICES" in tips[0] and ".to('cuda')" in tips[0]


def test_a_report_without_gpu_samples_gets_no_gpu_advice():
    assert advice(base_report(gpu_utilization_mean=None, gpu_utilization_max=None, gpu_memory_peak_mb=None)) == []


# -- format_efficiency ------------------------------------------------------------------------------


def sacct(*rows: tuple[str, ...]) -> str:
    return "\n".join(SEP.join(row) for row in rows) + "\n"


def test_slurm_report_keeps_its_seff_lines():
    report = slurm_efficiency.efficiency(sacct(
        ("123", "COMPLETED", "00:01:40", "00:02:30", "2", "", "1024M"),
        ("123.batch", "COMPLETED", "00:01:40", "00:02:30", "2", "524288K", ""),
    ))
    text = format_efficiency({"id": 5, "backend_id": "123"}, report)
    assert text == "\n".join([
        "Job ID: 5 (Slurm 123)", "State: COMPLETED", "Cores: 2", "CPU Utilized: 150.0 s",
        "CPU Efficiency: 75.00% of 200 core-seconds", "Job Wall-clock time: 100 s",
        "Memory Utilized: 512.0 MB", "Memory Efficiency: 50.00% of 1024 MB",
    ])


def test_slurm_report_gets_advice_without_gpu_keys():
    report = slurm_efficiency.efficiency(sacct(
        ("124", "COMPLETED", "01:00:00", "00:30:00", "16", "", "64G"),
        ("124.batch", "COMPLETED", "01:00:00", "00:30:00", "16", "1048576K", ""),
    ))
    text = format_efficiency({"id": 6, "backend_id": "124"}, report)
    assert "GPU" not in text
    assert text.splitlines()[-3:] == [
        "Advice:",
        "  - Memory: asked for 64 GB, peaked at 1.00 GB: --mem 2G would do (100% headroom).",
        "  - CPU: 16 cores allocated, 0.5 busy on average (3%): -c/--cpus-per-task 1 would do.",
    ]


def test_local_report_formats_gpu_lines_and_advice():
    running = job(id=9, ref="9", state="RUNNING", end_time=None)
    report = local_efficiency(running, summary(gpu_utilization_mean=12.34, gpu_utilization_max=41.0,
                                               cpu_time_s=2400.0, rss_peak_mb=16000.0), None,
                              now=T0 + 600, gpu_memory_total_mb=163840)
    text = format_efficiency(running, report)
    lines = text.splitlines()
    assert lines[0] == "Job ID: 9"
    assert "CPU Efficiency: 50.00% of 4800 core-seconds" in lines
    assert "Job Wall-clock time: 600 s" in lines
    assert "GPUs: 2 (A100)" in lines
    assert "GPU Utilization: 12.3% mean, 41% max" in lines
    assert "GPU Memory Utilized: 30000 MB (of 81920 MB requested, 163840 MB on its GPUs)" in lines
    assert lines[lines.index("Advice:") + 1:] == [
        "  - Memory: asked for 64 GB, peaked at 15.62 GB: --mem 20G would do (28% headroom).",
        "  - GPU: utilization averaged 12% over its 2 GPUs: `corral diagnose 9` says what they wait for.",
    ]


def test_a_report_with_nothing_measured_still_formats():
    report = local_efficiency(job(gpus=0, gpu_mem_mb=None), None, None)
    text = format_efficiency(job(), report)
    assert report["source"] is None
    assert "CPU Utilized: -" in text and "CPU Efficiency: -" in text and "Memory Utilized: -" in text
    assert "Advice:" not in text


def test_a_container_jobs_time_bringing_in_its_image_is_said_apart():
    report = local_efficiency(job(), summary(), {"cpu_time_s": 10.0, "max_rss_mb": 100.0, "image_pull_s": 41.2})
    assert report["image_pull_s"] == 41.2
    text = format_efficiency(job(), report)
    line = next(line for line in text.splitlines() if line.startswith("Job Wall-clock time: "))
    assert line.endswith(" s (of which 41.2 s bringing in its image)")
    assert "bringing in" not in format_efficiency(job(), local_efficiency(job(), summary(), None))
