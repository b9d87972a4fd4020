"""Training progress of a running job from its tracked run: step, rate and ETA."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TOTAL_KEYS = ("total_steps", "max_steps", "num_training_steps", "num_steps")
"""Config keys that name a run's total. A bare `steps` is not one: it is as often a logging or saving
interval, or the steps so far."""
RATE_WINDOW_S = 300.0


@dataclass(frozen=True)
class Progress:
    run_id: int
    run: str
    step: int
    last_time: float
    rate: float | None  # steps per second, over the last few minutes
    total: int | None  # from the run's config (total_steps, max_steps, ...); None once the run is past it
    eta_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "run": self.run, "step": self.step, "last_time": self.last_time,
                "rate": None if self.rate is None else round(self.rate, 4), "total": self.total,
                "eta_s": None if self.eta_s is None else round(self.eta_s)}


class ProgressTracker:
    """Remembers each job's (time, step) over the rate window: the rate is recent, not a lifetime average."""

    def __init__(self) -> None:
        self._history: dict[int, deque[tuple[float, int]]] = {}

    def update(self, job_id: int, run: Mapping[str, Any], heads: Sequence[Mapping[str, Any]]) -> Progress | None:
        """Progress of one job from its newest run and that run's series heads."""
        if not heads:
            return None
        step = max(int(h["last_step"]) for h in heads)
        last_time = max(float(h["last_time"]) for h in heads)
        history = self._history.setdefault(job_id, deque())
        if not history or history[-1] != (last_time, step):
            history.append((last_time, step))
        while len(history) > 2 and history[0][0] < last_time - RATE_WINDOW_S:
            history.popleft()
        rate = None
        if len(history) >= 2 and history[-1][0] > history[0][0]:
            rate = (history[-1][1] - history[0][1]) / (history[-1][0] - history[0][0])
        elif last_time > float(run["start_time"]) and step > 0:
            rate = step / (last_time - float(run["start_time"]))
        total = total_steps(run.get("config") or {})
        if total is not None and step > total:
            total = None  # the run went past it: whatever the config meant, it was not the run's total
        eta = (total - step) / rate if total is not None and rate and rate > 0 else None
        return Progress(int(run["id"]), str(run["name"]), step, last_time, rate, total, eta)

    def forget(self, keep: set[int]) -> None:
        for job_id in [j for j in self._history if j not in keep]:
            del self._history[job_id]


def total_steps(config: Mapping[str, Any]) -> int | None:
    """How many steps a run means to take, if its config says (first of TOTAL_KEYS, nested one level too)."""
    for source in (config, *(v for v in config.values() if isinstance(v, Mapping))):
        for key in TOTAL_KEYS:
            value = source.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return int(value)
    return None
