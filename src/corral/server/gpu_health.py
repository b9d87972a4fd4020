"""The health of this machine's GPUs (`corral.core.monitoring.gpu_health`), as the monitor's samples report it.

Only the job service changes it, on the event loop thread, after each monitoring tick. It keeps each
GPU's standing (what was already seen, so an event counts once), its latest figures, and its recent
events, in memory (the last `EVENTS_PER_GPU` of each GPU, so a chatty throttle on one GPU never pushes
another's fault out): a fatal event lives on as its GPU's drain.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from corral.core.monitoring.gpu_health import (
    GpuStanding, HealthEvent, HealthFigures, assess, throttle_names,
)

EVENTS_PER_GPU = 5


class GpuHealth:
    def __init__(self, node: str | None) -> None:
        """`node`: this machine's node, which the monitor samples (None: it samples none)."""
        self.node = node
        self.standing: dict[int, GpuStanding] = {}
        self.figures: dict[int, HealthFigures] = {}
        self.events: dict[int, deque[HealthEvent]] = {}

    def update(self, figures: Mapping[int, HealthFigures], now: float) -> list[HealthEvent]:
        """Take a sample's health figures of each GPU (by index); what happened since the last."""
        if self.node is None:
            return []
        happened: list[HealthEvent] = []
        for index, health in sorted(figures.items()):
            self.standing[index], events = assess(index, self.standing.get(index), health, now)
            self.figures[index] = health
            events = [replace(event, node=self.node) for event in events]
            if events:
                self.events.setdefault(index, deque(maxlen=EVENTS_PER_GPU)).extend(events)
            happened += events
        return happened

    def of_node(self, name: str) -> dict[int, dict[str, Any]]:
        """Each GPU of the node's health as the API shows it: ECC count, throttles, lost, recent events."""
        if name != self.node:
            return {}
        out = {}
        for index in sorted(set(self.figures) | set(self.events)):
            health = self.figures.get(index, HealthFigures())
            out[index] = {
                "ecc_uncorrected": health.ecc_uncorrected,
                "throttled": throttle_names(health.throttle_reasons),
                "lost": health.lost,
                "events": [e.to_dict() for e in self.events.get(index, ())],
            }
        return out
