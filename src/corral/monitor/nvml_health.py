"""A GPU's health figures (`corral.core.monitoring.gpu_health`) in a raw NVML frame: read from the real NVML, and read back.

The raw fields, beside a GPU's other figures in `corral.monitor.nvml`'s frames::

    "xid_events": [{"xid": 79, "time_us": 1795600000000000}],   # nvmlEventSetWait, XidCriticalError
    "ecc": {"volatile_uncorrected": 0},                         # nvmlDeviceGetTotalEccErrors
    "throttle_reasons": 64,                                     # nvmlDeviceGetCurrentClocksThrottleReasons
    "lost": true                                                # NVML_ERROR_GPU_IS_LOST

Each is left out (or null) where NVML cannot tell; a recorded frame without them reads as a healthy GPU.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from corral.core.monitoring.gpu_health import HealthFigures, XidEvent

log = logging.getLogger(__name__)

_MAX_EVENTS_PER_READ = 256  # a storm of XIDs is read over several ticks, not in one endless loop


def health_from_raw(raw: Mapping[str, Any]) -> HealthFigures:
    """The health figures of one GPU's raw dict; what is missing or malformed counts as unknown."""
    events = []
    for entry in raw.get("xid_events") or ():
        if not isinstance(entry, Mapping):
            continue
        xid, at = entry.get("xid"), entry.get("time_us")
        if isinstance(xid, int) and isinstance(at, int) and _is_int(xid) and _is_int(at):
            events.append(XidEvent(xid, at))
    ecc = raw.get("ecc")
    uncorrected = ecc.get("volatile_uncorrected") if isinstance(ecc, Mapping) else None
    throttle = raw.get("throttle_reasons")
    return HealthFigures(
        xid_events=tuple(events),
        ecc_uncorrected=uncorrected if _is_int(uncorrected) else None,
        throttle_reasons=throttle if _is_int(throttle) else None,
        lost=raw.get("lost") is True,
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class NvmlHealth:
    """The XID event set of one NVML session, and the health fields of each read."""

    def __init__(self) -> None:
        self._events: Any = None

    def start(self, pynvml: Any, handles: Sequence[tuple[int, Any, str | None]]) -> None:
        """Register every GPU for critical XID events (a board that cannot report them is left out)."""
        try:
            self._events = pynvml.nvmlEventSetCreate()
        except pynvml.NVMLError as error:
            log.info("NVML: no XID events on this machine (%s)", error)
            return
        for index, handle, _uuid in handles:
            try:
                pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, self._events)
            except pynvml.NVMLError as error:
                log.info("NVML: GPU %d reports no XID events (%s)", index, error)

    def stop(self, pynvml: Any) -> None:
        if self._events is not None:
            try:
                pynvml.nvmlEventSetFree(self._events)
            except pynvml.NVMLError as error:
                log.debug("nvmlEventSetFree failed: %s", error)
            self._events = None

    def add_fields(self, pynvml: Any, frame: list[dict[str, Any]], handles: Sequence[tuple[int, Any, str | None]]) -> None:
        """Add each GPU's health fields to a raw frame, in place: the XIDs waiting since the last read, its ECC
        count, its throttle reasons, and whether it is lost."""
        xids = self._drain_events(pynvml, handles)
        for raw, (index, handle, _uuid) in zip(frame, handles):
            lost = False

            def read(call: Any, *args: Any) -> Any:
                nonlocal lost
                try:
                    return call(handle, *args)
                except pynvml.NVMLError as error:
                    if getattr(error, "value", None) == pynvml.NVML_ERROR_GPU_IS_LOST:
                        lost = True
                    return None

            uncorrected = read(pynvml.nvmlDeviceGetTotalEccErrors, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                               pynvml.NVML_VOLATILE_ECC)
            raw["ecc"] = {"volatile_uncorrected": uncorrected} if uncorrected is not None else None
            # every board answers this one, with GPU_IS_LOST once the GPU is gone
            raw["throttle_reasons"] = read(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons)
            raw["xid_events"] = xids.get(index, [])
            if lost:
                raw["lost"] = True

    def _drain_events(self, pynvml: Any, handles: Sequence[tuple[int, Any, str | None]]) -> dict[int, list[dict[str, int]]]:
        """The XID events NVML queued since the last read (a wait of 0 ms: never blocks), by GPU index."""
        out: dict[int, list[dict[str, int]]] = {}
        if self._events is None:
            return out
        by_uuid = {uuid: index for index, _handle, uuid in handles if uuid is not None}
        for _ in range(_MAX_EVENTS_PER_READ):
            try:
                data = pynvml.nvmlEventSetWait(self._events, 0)
            except pynvml.NVMLError:  # NVML_ERROR_TIMEOUT: none waiting (or the set broke: tried again next read)
                break
            if not data.eventType & pynvml.nvmlEventTypeXidCriticalError:
                continue
            try:
                uuid = pynvml.nvmlDeviceGetUUID(data.device)
                index = by_uuid.get(uuid.decode() if isinstance(uuid, bytes) else uuid)
            except pynvml.NVMLError:
                index = None
            if index is None:
                continue
            out.setdefault(index, []).append({"xid": int(data.eventData), "time_us": time.time_ns() // 1000})
        return out
