"""When a run's next checkpoint is due: every interval, and once more just before the job's end time."""

from __future__ import annotations

from collections.abc import Callable

FINAL_CHECKPOINT_MARGIN_S = 300.0


class CheckpointSchedule:
    def __init__(self, interval_s: float, end_time: float | None, clock: Callable[[], float]) -> None:
        self.interval_s = interval_s
        self._end_time = end_time
        self._clock = clock
        self._last_save = clock()

    def saved(self) -> None:
        self._last_save = self._clock()

    def due(self) -> bool:
        now = self._clock()
        if now - self._last_save >= self.interval_s:
            return True
        if self._end_time is None:
            return False
        last_call = self._end_time - min(FINAL_CHECKPOINT_MARGIN_S, self.interval_s / 4)
        return now >= last_call > self._last_save
