"""Where a job's usage figure comes from (`corral.monitor.usage` decides which), and how a report says it."""

from __future__ import annotations

CGROUP = "cgroup"
"""The kernel's count for the job's cgroup when it ended: exact, whatever its processes did."""
RUSAGE = "rusage"
"""wait4's count of the processes the supervisor waited for, when the job ended."""
SAMPLES = "samples"
"""The job's samples: what its processes used at each sample, nothing between two."""

SOURCE_WORDS = {
    CGROUP: "the kernel's count for its cgroup when it ended",
    RUSAGE: "the kernel's count (wait4) when it ended",
    SAMPLES: "its samples",
    f"{RUSAGE}+{SAMPLES}": "the larger of the kernel's count (wait4) when it ended and its samples",
}


def source_words(source: str | None) -> str:
    """Where a figure came from, in words: `the kernel's count for its cgroup when it ended`."""
    return SOURCE_WORDS.get(source or "", "nothing: no samples and no accounting")
