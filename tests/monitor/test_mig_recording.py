"""Recording a MIG machine (`python -m corral.monitor.nvml --record`): NVML's MIG devices go into the frame in
its own shape, and replaying that frame gives the same slices as GPUs and per-slice readings (issue 22, point 7)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import NoReturn

import pynvml

from corral.executor.gpus import detect_gpus
from corral.monitor.nvml import ReplayedGpus, main

GIB = 1 << 30
A100 = "NVIDIA A100-SXM4-80GB"
# GPU 0 in MIG mode with a 4g.40gb in slot 0 and a 3g.40gb in slot 1; GPU 1 without MIG (an older board).
MIG = {1000: ("MIG-4g", "4g.40gb", 1, 12), 1001: ("MIG-3g", "3g.40gb", 2, 3)}


def test_a_recorded_mig_machine_replays_as_its_slices(monkeypatch, capsys, tmp_path):
    def not_supported(*_: object) -> NoReturn:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def mig_handle(handle: int, slot: int) -> int:
        return 1000 + slot if handle == 0 and 1000 + slot in MIG else not_supported()

    def memory(handle: int) -> SimpleNamespace:
        used = MIG[handle][3] * GIB if handle in MIG else 2 * GIB
        total = 40 * GIB if handle in MIG else 80 * GIB
        return SimpleNamespace(total=total, used=used, free=total - used)

    fake = {
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": lambda index: index,
        "nvmlDeviceGetUUID": lambda handle: (MIG[handle][0] if handle in MIG else f"GPU-{handle}").encode(),
        "nvmlDeviceGetName": lambda handle: f"{A100} MIG {MIG[handle][1]}" if handle in MIG else A100,
        "nvmlDeviceGetMinorNumber": lambda handle: handle,
        "nvmlDeviceGetCudaComputeCapability": lambda handle: (8, 0),
        # under MIG, NVML tells no utilization of the GPU or of a slice
        "nvmlDeviceGetUtilizationRates": lambda handle: (SimpleNamespace(gpu=40, memory=9) if handle == 1
                                                         else not_supported()),
        "nvmlDeviceGetMemoryInfo": memory,
        "nvmlDeviceGetPowerUsage": lambda handle: 100000,
        "nvmlDeviceGetTemperature": lambda handle, sensor: 40,
        "nvmlDeviceGetComputeRunningProcesses": lambda handle: (
            [SimpleNamespace(pid=77, usedGpuMemory=3 * GIB)] if handle in (0, 1001) else []),
        "nvmlDeviceGetMigMode": lambda handle: [1, 1] if handle == 0 else not_supported(),
        "nvmlDeviceGetMaxMigDeviceCount": lambda handle: 7,
        "nvmlDeviceGetMigDeviceHandleByIndex": mig_handle,
        "nvmlDeviceGetGpuInstanceId": lambda handle: MIG[handle][2],
        "nvmlDeviceGetComputeInstanceId": lambda handle: 0,
    }
    for name, function in fake.items():
        monkeypatch.setattr(pynvml, name, function)

    assert main(["--record", "1", "--interval", "0"]) == 0
    recorded = tmp_path / "frames.jsonl"
    recorded.write_text(capsys.readouterr().out)

    gpus = detect_gpus({"CORRAL_GPU_REPLAY": str(recorded)})
    assert [(g.index, g.type, g.mem_mb, g.uuid, g.parent, g.minor) for g in gpus] == [
        (1, "A100", 81920, "GPU-1", None, 1), (2, "4g.40gb", 40960, "MIG-4g", 0, 0), (3, "3g.40gb", 40960, "MIG-3g", 0, 0)]
    readings = {r.index: r for r in ReplayedGpus(str(recorded)).read()}
    assert (readings[3].memory_used_mb, readings[3].utilization, readings[3].processes) == (3072, None, ((77, 3072),))
    assert (readings[2].memory_used_mb, readings[2].processes) == (12288, ())
    assert readings[1].utilization == 40 and readings[0].processes == ()
