"""A job's resource samples boiled down to the figures diagnosis and efficiency reports read.

The store computes the same summary with SQL aggregates (`MonitorStore.sample_summary`);
`summarize` is the reference it is tested against.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LOW_GPU_UTILIZATION = 30.0
"""Below this GPU utilization (%) a sample counts as one where the GPUs mostly waited."""


@dataclass(frozen=True)
class SampleSummary:
    """Means, peaks and shares over a job's samples; a figure is None when no sample had it."""

    count: int
    first_time: float
    last_time: float
    gpu_utilization_mean: float | None
    gpu_utilization_max: float | None
    gpu_memory_peak_mb: float | None
    gpu_power_mean_w: float | None
    cpu_utilization_mean: float | None
    """Of the job's allocated cores, %: 100 means all of them busy."""
    cpu_time_s: float | None
    """The last cumulative value: CPU seconds its processes used up to the last sample."""
    rss_peak_mb: float | None
    low_gpu_fraction: float | None
    """Share of the samples with GPU utilization below LOW_GPU_UTILIZATION."""

    @property
    def duration_s(self) -> float:
        """Seconds from the first sample to the last."""
        return self.last_time - self.first_time


def summarize(rows: Sequence[Mapping[str, Any]]) -> SampleSummary | None:
    """Summarize sample rows (any order); None for no rows. Missing and None values are left out."""
    if not rows:
        return None
    ordered = sorted(rows, key=lambda row: row["time"])
    gpu = _values(ordered, "gpu_utilization")
    cpu_times = _values(ordered, "cpu_time_s")
    return SampleSummary(
        count=len(ordered),
        first_time=float(ordered[0]["time"]),
        last_time=float(ordered[-1]["time"]),
        gpu_utilization_mean=_mean(gpu),
        gpu_utilization_max=max(gpu, default=None),
        gpu_memory_peak_mb=max(_values(ordered, "gpu_memory_mb"), default=None),
        gpu_power_mean_w=_mean(_values(ordered, "gpu_power_w")),
        cpu_utilization_mean=_mean(_values(ordered, "cpu_utilization")),
        cpu_time_s=cpu_times[-1] if cpu_times else None,
        rss_peak_mb=max(_values(ordered, "rss_mb"), default=None),
        low_gpu_fraction=sum(1 for u in gpu if u < LOW_GPU_UTILIZATION) / len(gpu) if gpu else None,
    )


def _values(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [float(row[key]) for row in rows if row.get(key) is not None]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
