"""GPU readings: NVML's raw figures, one conversion to `GpuReading`, and a replay of recorded frames.

A *raw frame* is a list with one dict per GPU, in NVML's own units, exactly as pynvml
returns them::

    {"index": 0, "uuid": "GPU-...", "utilization": {"gpu": 87, "memory": 41},
     "memory": {"total": 85899345920, "used": 21474836480, "free": 64424509440},
     "power_mw": 612000, "temperature_c": 64,
     "processes": [{"pid": 4242, "usedGpuMemory": 20971520000}]}

A GPU in MIG mode adds `"mig": {"mode": 1, "devices": [...]}`, each device with its own memory and processes:
each is read as a GPU of its own, numbered after the last whole GPU (`corral.executor.mig`). Its health fields
(XID events, uncorrectable ECC errors, throttle reasons, a GPU lost) are `corral.monitor.nvml_health`'s.

A field NVML does not support on a board (power on some, per-process memory under MIG
or some drivers) is null. `NvmlReader` builds these frames from the real NVML,
`ReplayedGpus` reads recorded ones (`python -m corral.monitor.nvml --record N` records
them), and both pass through `reading_from_raw`, so what tests replay is what a GPU
machine produces.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.core.monitoring.gpu_health import HealthFigures
from corral.errors import InvalidRequest
from corral.executor.gpus import REPLAY_ENV, read_inventory
from corral.executor.mig import MigLayout, mig_figures, mig_layout, text, with_slices
from corral.monitor.nvml_health import NvmlHealth, health_from_raw

log = logging.getLogger(__name__)

_MB = 1024 * 1024
# NVML's "value not available" sentinels (pynvml maps the 64-bit one to None for usedGpuMemory,
# but a frame recorded through another binding may still carry them).
_NOT_AVAILABLE = (0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF)
_INIT_RETRY_S = 60.0


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one moment, in the units people read (percent, MB, W, °C); None where unknown."""

    index: int
    uuid: str | None
    utilization: float | None
    memory_used_mb: float | None
    memory_total_mb: float | None
    power_w: float | None
    temperature_c: float | None
    processes: tuple[tuple[int, float | None], ...]
    """(pid, GPU memory it uses in MB) of each compute process; memory None where NVML cannot tell."""
    health: HealthFigures = HealthFigures()
    """XID events, uncorrectable ECC errors, throttle reasons, lost (`corral.monitor.nvml_health`)."""


def reading_from_raw(raw: Mapping[str, Any]) -> GpuReading:
    """One GPU's raw NVML figures (bytes, milliwatts) as a `GpuReading` (MB, watts).

    A missing or null field becomes None; only `index` is required.

    Raises:
        ValueError: the dict has no integer `index`.
    """
    index = raw.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise ValueError(f"a GPU reading needs an integer index, got {index!r}")
    utilization = raw.get("utilization") or {}
    memory = raw.get("memory") or {}
    processes = []
    for entry in raw.get("processes") or ():
        pid = entry.get("pid") if isinstance(entry, Mapping) else None
        if isinstance(pid, int) and not isinstance(pid, bool):
            processes.append((pid, _number(entry.get("usedGpuMemory"), _MB)))
    uuid = raw.get("uuid")
    return GpuReading(
        index=index,
        uuid=uuid if isinstance(uuid, str) else None,
        utilization=_number(utilization.get("gpu") if isinstance(utilization, Mapping) else None),
        memory_used_mb=_number(memory.get("used") if isinstance(memory, Mapping) else None, _MB),
        memory_total_mb=_number(memory.get("total") if isinstance(memory, Mapping) else None, _MB),
        power_w=_number(raw.get("power_mw"), 1000),
        temperature_c=_number(raw.get("temperature_c")),
        processes=tuple(processes),
        health=health_from_raw(raw),
    )


def _number(value: Any, divisor: float = 1) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value in _NOT_AVAILABLE:
        return None
    return value / divisor


class NvmlReader:
    """The real NVML: initialised on the first read; the GPUs' handles, and each MIG device's handle, UUID, name
    and instance ids, looked up then and kept between reads (a sample reads only what changes).

    Where NVML cannot start (no driver, no library) `read()` returns [] and tries
    again at most once every `retry_s` seconds, so a machine without GPUs pays nothing.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, retry_s: float = _INIT_RETRY_S) -> None:
        self._clock = clock
        self._retry_s = retry_s
        self._handles: list[tuple[int, Any, str | None]] | None = None  # (index, handle, uuid)
        self._mig: dict[int, MigLayout] = {}  # index -> its MIG devices, for a GPU in MIG mode
        self._last_attempt: float | None = None
        self.unavailable_reason: str | None = None
        """Why NVML could not start, after a failed attempt; None otherwise."""
        self._health = NvmlHealth()

    def read(self) -> list[GpuReading]:
        """Every GPU now, and each MIG slice under its own index (`corral.executor.mig`); [] where NVML is unavailable."""
        return [reading_from_raw(raw) for raw in with_slices(self.read_raw())]

    def read_raw(self) -> list[dict[str, Any]]:
        """Every GPU now as a raw frame (NVML's units); [] where NVML is unavailable."""
        if not self._start():
            return []
        import pynvml

        frame = [_raw_gpu(pynvml, index, handle, uuid, self._mig.get(index))
                 for index, handle, uuid in self._handles or ()]
        self._health.add_fields(pynvml, frame, self._handles or ())
        for (index, handle, _uuid), raw in zip(self._handles or (), frame):
            # a slice that no longer answers was destroyed or remade (by an admin, or a GPU reset): look the
            # GPU's MIG devices up again for the next sample rather than read dead handles for ever
            if any(device["memory"] is None for device in (raw.get("mig") or {}).get("devices", ())):
                self._relayout(pynvml, index, handle)
        return frame

    def _relayout(self, pynvml: Any, index: int, handle: Any) -> None:
        layout = mig_layout(pynvml, handle)
        if layout is None:
            self._mig.pop(index, None)
        else:
            self._mig[index] = layout

    def close(self) -> None:
        """Shut NVML down (a later read starts it again)."""
        if self._handles is None:
            return
        self._handles = None
        self._mig = {}
        self._last_attempt = None
        import pynvml

        self._health.stop(pynvml)
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError as error:
            log.debug("nvmlShutdown failed: %s", error)

    def _start(self) -> bool:
        if self._handles is not None:
            return True
        now = self._clock()
        if self._last_attempt is not None and now - self._last_attempt < self._retry_s:
            return False
        self._last_attempt = now
        try:
            import pynvml
        except ImportError as error:
            self.unavailable_reason = f"pynvml is not installed ({error})"
            return False
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as error:
            self.unavailable_reason = str(error)
            log.debug("NVML is not available: %s", error)
            return False
        try:
            handles = []
            for index in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                handles.append((index, handle, _call(pynvml, lambda: text(pynvml.nvmlDeviceGetUUID(handle)))))
        except pynvml.NVMLError as error:
            self.unavailable_reason = f"NVML started but listing GPUs failed: {error}"
            log.warning("NVML: %s", self.unavailable_reason)
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlShutdown()
            return False
        self._handles = handles
        self._mig = {}
        for index, handle, _uuid in handles:
            self._relayout(pynvml, index, handle)
        self._health.start(pynvml, handles)
        self.unavailable_reason = None
        return True


def _raw_gpu(pynvml: Any, index: int, handle: Any, uuid: str | None, mig: MigLayout | None) -> dict[str, Any]:
    # Each figure on its own: a board that does not report power still reports the rest.
    def utilization() -> dict[str, int]:
        rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
        return {"gpu": rates.gpu, "memory": rates.memory}

    def memory() -> dict[str, int]:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return {"total": info.total, "used": info.used, "free": info.free}

    def processes() -> list[dict[str, Any]]:
        return [{"pid": p.pid, "usedGpuMemory": p.usedGpuMemory}
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]

    raw: dict[str, Any] = {
        "index": index,
        "uuid": uuid,
        "utilization": _call(pynvml, utilization),
        "memory": _call(pynvml, memory),
        "power_mw": _call(pynvml, lambda: pynvml.nvmlDeviceGetPowerUsage(handle)),
        "temperature_c": _call(pynvml, lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
        "processes": _call(pynvml, processes),
    }
    if mig is not None:  # its slices' figures, each read on its own MIG device handle
        raw["mig"] = mig_figures(pynvml, mig)
    return raw


def _call(pynvml: Any, read: Callable[[], Any]) -> Any:
    try:
        return read()
    except pynvml.NVMLError:
        return None


class ReplayedGpus:
    """Recorded raw frames (JSON lines, one frame a line), read back one per `read()`, cycling."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Load and convert every frame now, so a bad file fails here and not mid-sampling.

        Raises:
            OSError: the file cannot be read.
            ValueError: a line is not a frame, or the file holds none.
        """
        self.path = os.fspath(path)
        self._load()

    def _load(self) -> None:
        frames: list[list[GpuReading]] = []
        stamp = os.stat(self.path).st_mtime_ns
        with open(self.path) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    frame = json.loads(line)
                    if not isinstance(frame, list):
                        raise ValueError("a frame is a JSON list of per-GPU dicts")
                    frames.append([reading_from_raw(raw) for raw in with_slices(frame)])
                except (ValueError, AttributeError) as error:
                    raise ValueError(f"{self.path}, line {number}: {error}") from None
        if not frames:
            raise ValueError(f"{self.path} holds no frames")
        self._frames, self._stamp, self._next = frames, stamp, 0

    def read(self) -> list[GpuReading]:
        """The next frame (after the last, the first again); a file written anew is read again, from its first
        (a test names the processes it starts, as NVML would list them)."""
        try:
            if os.stat(self.path).st_mtime_ns != self._stamp:
                self._load()
        except (OSError, ValueError):
            pass  # half written, or gone: the frames read before go on
        frame = self._frames[self._next]
        self._next = (self._next + 1) % len(self._frames)
        return list(frame)


def gpu_source_from_env(environ: Mapping[str, str]) -> Callable[[], list[GpuReading]]:
    """Replayed frames when CORRAL_GPU_REPLAY names a file, else the real NVML's `read`.

    Raises:
        InvalidRequest: CORRAL_GPU_REPLAY names a file that cannot be read as frames.
    """
    path = environ.get(REPLAY_ENV)
    if not path:
        return NvmlReader().read
    try:
        return ReplayedGpus(path).read
    except (OSError, ValueError) as error:
        hint = "point it at a file from `python -m corral.monitor.nvml --record N`, or unset it"
        raise InvalidRequest(REPLAY_ENV, f"cannot replay GPU frames: {error}", hint) from None


def _with_facts(raw: dict[str, Any], facts: Mapping[str, Any]) -> dict[str, Any]:
    """A GPU's first recorded reading with its fixed facts; its MIG devices keep the /dev/nvidia-caps minors that
    only the inventory reads (`corral.executor.mig.raw_mig`)."""
    merged = {**facts, **raw}
    if facts.get("mig") and raw.get("mig"):
        caps = {device.get("uuid"): device.get("caps") for device in facts["mig"]["devices"]}
        merged["mig"] = {**raw["mig"], "devices": [{**device, "caps": caps.get(device.get("uuid"))}
                                                   for device in raw["mig"]["devices"]]}
    return merged


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m corral.monitor.nvml --record N [--interval S]`: print N raw frames as JSON lines."""
    parser = argparse.ArgumentParser(prog="python -m corral.monitor.nvml",
                                     description="Record raw NVML frames (JSON lines) for replay in tests.")
    parser.add_argument("--record", type=int, required=True, metavar="N", help="how many frames to print")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between frames (1)")
    args = parser.parse_args(argv)
    if args.record < 1 or args.interval < 0:
        parser.error("--record must be at least 1 and --interval not negative")
    reader = NvmlReader()
    facts = {raw["index"]: raw for raw in read_inventory()}
    try:
        for number in range(args.record):
            frame = reader.read_raw()
            if number == 0:  # the GPUs' fixed facts, once: what `corral up` replaying the file detects
                frame = [_with_facts(raw, facts.get(raw["index"], {})) for raw in frame]
            if reader.unavailable_reason is not None:
                print(f"NVML is not available here ({reader.unavailable_reason}); "
                      "record on a machine with an NVIDIA driver", file=sys.stderr)
                return 1
            print(json.dumps(frame), flush=True)
            if number + 1 < args.record:
                time.sleep(args.interval)
    finally:
        reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
