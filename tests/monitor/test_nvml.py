"""GPU readings: NVML's units converted, recorded frames replayed, and no GPU handled quietly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import NoReturn

import pynvml
import pytest

from corral.errors import InvalidRequest
from corral.monitor.nvml import GpuReading, NvmlReader, ReplayedGpus, gpu_source_from_env, reading_from_raw

FIXTURE = Path(__file__).parent / "data" / "nvml_8gpu.jsonl"


def raw_frames() -> list[list[dict]]:
    return [json.loads(text) for text in FIXTURE.read_text().splitlines()]


def test_raw_nvml_units_become_megabytes_and_watts():
    reading = reading_from_raw(raw_frames()[0][1])
    assert reading == GpuReading(
        index=1, uuid="GPU-3f0c5a1e-8b7d-4c2a-9e61-0d2b7a4c1101", utilization=90.0,
        memory_used_mb=20992.0,  # 21 474 836 480 + 536 870 912 bytes
        memory_total_mb=81920.0,  # 85 899 345 920 bytes: an 80 GB H100
        power_w=650.5,  # 650 500 mW
        temperature_c=71.0, processes=((5000001, 20480.0),),
    )


def test_what_nvml_does_not_support_becomes_none():
    first = raw_frames()[0]
    assert reading_from_raw(first[7]).power_w is None  # NotSupported for power on that board
    assert reading_from_raw(first[6]).processes == ((5000004, None),)  # per-process memory unknown (MIG)
    assert reading_from_raw(raw_frames()[2][5]).utilization is None
    bare = reading_from_raw({"index": 3})
    assert bare == GpuReading(index=3, uuid=None, utilization=None, memory_used_mb=None, memory_total_mb=None,
                              power_w=None, temperature_c=None, processes=())
    # NVML's "value not available" sentinel, as another binding might record it.
    sentinel = reading_from_raw({"index": 0, "processes": [{"pid": 12, "usedGpuMemory": 2**64 - 1}]})
    assert sentinel.processes == ((12, None),)


def test_a_reading_without_an_index_is_refused():
    with pytest.raises(ValueError, match="index"):
        reading_from_raw({"uuid": "GPU-x"})


def test_replay_returns_the_recorded_frames_in_turn_then_starts_over():
    replay = ReplayedGpus(FIXTURE)
    frames = [replay.read() for _ in range(4)]
    assert [len(frame) for frame in frames] == [8, 8, 8, 8]
    assert [frame[1].utilization for frame in frames] == [90.0, 100.0, 86.0, 90.0]
    frames[0].clear()  # a caller's list is its own
    assert len(replay.read()) == 8


def test_the_replay_variable_picks_the_gpu_source(tmp_path):
    assert len(gpu_source_from_env({"CORRAL_GPU_REPLAY": str(FIXTURE)})()) == 8
    assert isinstance(gpu_source_from_env({}), type(NvmlReader().read))  # the real NVML
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(raw_frames()[0]) + "\n{not json\n")
    with pytest.raises(InvalidRequest, match="line 2") as refused:
        gpu_source_from_env({"CORRAL_GPU_REPLAY": str(bad)})
    assert refused.value.field == "CORRAL_GPU_REPLAY"
    with pytest.raises(InvalidRequest, match="cannot replay"):
        gpu_source_from_env({"CORRAL_GPU_REPLAY": str(tmp_path / "missing.jsonl")})
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(InvalidRequest, match="no frames"):
        gpu_source_from_env({"CORRAL_GPU_REPLAY": str(empty)})


def test_nvml_reader_on_a_machine_without_a_driver_returns_nothing():
    reader = NvmlReader()
    readings = reader.read()
    if reader.unavailable_reason is None:  # a GPU machine: then it reads every GPU in NVML's order
        assert [r.index for r in readings] == list(range(len(readings)))
    else:
        assert readings == []
        assert reader.read() == []
    reader.close()


def test_nvml_reader_tries_to_start_nvml_at_most_once_a_minute(monkeypatch):
    attempts = []

    def failing_init() -> None:
        attempts.append(1)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    monkeypatch.setattr(pynvml, "nvmlInit", failing_init)
    now = [0.0]
    reader = NvmlReader(clock=lambda: now[0])
    for now[0] in (0.0, 10.0, 59.0):
        assert reader.read() == []
    assert len(attempts) == 1
    assert "Driver Not Loaded" in reader.unavailable_reason
    now[0] = 61.0
    assert reader.read() == []
    assert len(attempts) == 2


def test_nvml_reader_turns_each_failing_nvml_call_into_none(monkeypatch):
    # A stand-in for a 2-GPU machine, answering through pynvml's own function names.
    calls = {"init": 0, "shutdown": 0}
    gib = 1 << 30

    def not_supported(*_: object) -> NoReturn:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def power(handle: int) -> int:
        return 412345 if handle == 0 else not_supported()

    def processes(handle: int) -> list:
        return [SimpleNamespace(pid=4242, usedGpuMemory=4 * gib if handle == 0 else None)]

    fake = {
        "nvmlInit": lambda: calls.__setitem__("init", calls["init"] + 1),
        "nvmlShutdown": lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1),
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": lambda index: index,
        "nvmlDeviceGetUUID": lambda handle: f"GPU-{handle}".encode(),
        "nvmlDeviceGetUtilizationRates": lambda handle: SimpleNamespace(gpu=55, memory=20),
        "nvmlDeviceGetMemoryInfo": lambda handle: SimpleNamespace(total=80 * gib, used=5 * gib, free=75 * gib),
        "nvmlDeviceGetPowerUsage": power,
        "nvmlDeviceGetTemperature": lambda handle, sensor: (not_supported() if handle == 1 else 48),
        "nvmlDeviceGetComputeRunningProcesses": processes,
    }
    for name, function in fake.items():
        monkeypatch.setattr(pynvml, name, function)

    reader = NvmlReader()
    first, second = reader.read()
    reader.read()

    assert first == GpuReading(index=0, uuid="GPU-0", utilization=55.0, memory_used_mb=5120.0,
                               memory_total_mb=81920.0, power_w=412.345, temperature_c=48.0,
                               processes=((4242, 4096.0),))
    assert (second.uuid, second.power_w, second.temperature_c, second.processes) == ("GPU-1", None, None,
                                                                                    ((4242, None),))
    assert calls["init"] == 1  # handles are kept between reads
    reader.close()
    assert calls["shutdown"] == 1
    assert reader.read_raw()[0]["power_mw"] == 412345  # what `--record` prints: NVML's own units


def test_recording_without_nvml_says_so_and_exits_1():
    probe = NvmlReader()
    probe.read_raw()
    has_nvml = probe.unavailable_reason is None
    probe.close()
    done = subprocess.run([sys.executable, "-m", "corral.monitor.nvml", "--record", "1"], capture_output=True,
                          text=True, timeout=60)
    if has_nvml:  # a GPU machine: one frame, as JSON
        assert done.returncode == 0
        assert isinstance(json.loads(done.stdout), list)
        return
    assert done.returncode == 1
    assert done.stdout == ""
    assert "NVML is not available here" in done.stderr
