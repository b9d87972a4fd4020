"""Recording a MIG machine (`python -m corral.monitor.nvml --record`): NVML's MIG devices go into the frame in
its own shape, and replaying that frame gives the same slices as GPUs and per-slice readings (issue 22, point 7).
Sampling one (NvmlReader) looks its slices up once and reads what they use on every sample."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, NoReturn

import pynvml

from corral.executor.gpus import detected_facts, gpus_from_raw
from corral.monitor.nvml import NvmlReader, ReplayedGpus, main

GIB = 1 << 30
A100 = "NVIDIA A100-SXM4-80GB"
# GPU 0 in MIG mode with a 4g.40gb in slot 0 and a 3g.40gb in slot 1; GPU 1 without MIG (an older board).
MIG = {1000: ("MIG-4g", "4g.40gb", 1, 12), 1001: ("MIG-3g", "3g.40gb", 2, 3)}


def fake_mig_machine(monkeypatch) -> tuple[Counter[Any], dict[int, int]]:
    """pynvml answering as GPU 0 in MIG mode (the slices in MIG) and GPU 1 without MIG. Returns the calls made
    (by name, and by name and handle) and each slice's memory in use in GiB, which a test may change between reads."""
    calls: Counter[Any] = Counter()
    used_gib = {handle: device[3] for handle, device in MIG.items()}

    def not_supported(*_: object) -> NoReturn:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def mig_handle(handle: int, slot: int) -> int:
        return 1000 + slot if handle == 0 and 1000 + slot in MIG else not_supported()

    def memory(handle: int) -> SimpleNamespace:
        used = used_gib[handle] * GIB if handle in MIG else 2 * GIB
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

    def counted(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            calls[name] += 1
            if args:
                calls[name, args[0]] += 1
            return function(*args)
        return call

    for name, function in fake.items():
        monkeypatch.setattr(pynvml, name, counted(name, function))
    return calls, used_gib


def test_a_recorded_mig_machine_replays_as_its_slices(monkeypatch, capsys, tmp_path):
    fake_mig_machine(monkeypatch)

    assert main(["--record", "1", "--interval", "0"]) == 0
    recorded = tmp_path / "frames.jsonl"
    recorded.write_text(capsys.readouterr().out)

    gpus = gpus_from_raw(detected_facts({"CORRAL_GPU_REPLAY": str(recorded)}))
    assert [(g.index, g.type, g.mem_mb, g.uuid, g.parent, g.minor) for g in gpus] == [
        (1, "A100", 81920, "GPU-1", None, 1), (2, "4g.40gb", 40960, "MIG-4g", 0, 0), (3, "3g.40gb", 40960, "MIG-3g", 0, 0)]
    readings = {r.index: r for r in ReplayedGpus(str(recorded)).read()}
    assert (readings[3].memory_used_mb, readings[3].utilization, readings[3].processes) == (3072, None, ((77, 3072),))
    assert (readings[2].memory_used_mb, readings[2].processes) == (12288, ())
    assert readings[1].utilization == 40 and readings[0].processes == ()


def test_the_monitor_looks_up_mig_devices_once_and_reads_their_memory_on_every_sample(monkeypatch):
    calls, used_gib = fake_mig_machine(monkeypatch)
    reader = NvmlReader()
    samples = []
    for sample in range(4):
        used_gib[1001] = 3 + sample
        samples.append({r.index: r for r in reader.read()})
    reader.close()

    # the slices are the same GPUs on every sample, and what they use is read anew each time
    assert [(r[2].uuid, r[3].uuid) for r in samples] == [("MIG-4g", "MIG-3g")] * 4
    assert [r[3].memory_used_mb for r in samples] == [3072, 4096, 5120, 6144]
    assert [r[2].memory_used_mb for r in samples] == [12288] * 4
    assert [r[3].processes for r in samples] == [((77, 3072),)] * 4
    assert calls["nvmlDeviceGetMemoryInfo", 1001] == calls["nvmlDeviceGetComputeRunningProcesses", 1001] == 4
    # which slices there are, and their names, UUIDs and instances, are asked of NVML once, with the GPUs' handles
    assert {name: calls[name] for name in ("nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
                                           "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetGpuInstanceId",
                                           "nvmlDeviceGetComputeInstanceId")} == {
        "nvmlDeviceGetMigMode": 2, "nvmlDeviceGetMaxMigDeviceCount": 1,
        "nvmlDeviceGetMigDeviceHandleByIndex": 7, "nvmlDeviceGetGpuInstanceId": 2, "nvmlDeviceGetComputeInstanceId": 2}
    assert [calls[name, handle] for name in ("nvmlDeviceGetUUID", "nvmlDeviceGetName") for handle in MIG] == [1] * 4


def test_a_slice_remade_while_the_monitor_runs_is_looked_up_again(monkeypatch):
    calls, used_gib = fake_mig_machine(monkeypatch)
    reader = NvmlReader()
    assert {r.index: r.uuid for r in reader.read()}[3] == "MIG-3g"
    # an admin destroys the 3g.40gb slice and makes a 2g.20gb in its slot: the old handle answers no more
    remade = {1000: MIG[1000], 1002: ("MIG-2g", "2g.20gb", 3, 5)}
    used_gib[1002] = 5
    gone = pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def memory(handle: int) -> SimpleNamespace:
        if handle == 1001:
            raise gone
        used = used_gib[handle] * GIB if handle in remade else 2 * GIB
        total = 40 * GIB if handle in remade else 80 * GIB
        return SimpleNamespace(total=total, used=used, free=total - used)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetMemoryInfo", memory)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetMigDeviceHandleByIndex",
                        lambda handle, slot: {0: 1000, 1: 1002}.get(slot) if handle == 0 and slot < 2 else
                        (_ for _ in ()).throw(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)))
    monkeypatch.setattr(pynvml, "nvmlDeviceGetUUID",
                        lambda handle: (remade[handle][0] if handle in remade else f"GPU-{handle}").encode())
    monkeypatch.setattr(pynvml, "nvmlDeviceGetName",
                        lambda handle: f"{A100} MIG {remade[handle][1]}" if handle in remade else A100)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetGpuInstanceId", lambda handle: remade[handle][2])
    assert {r.index: r.memory_used_mb for r in reader.read()}.get(3) is None  # the sample that finds it gone
    after = {r.index: r for r in reader.read()}
    assert (after[3].uuid, after[3].memory_used_mb) == ("MIG-2g", 5120)
    reader.close()
