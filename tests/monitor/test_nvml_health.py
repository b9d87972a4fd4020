"""GPU health in NVML frames (`corral.monitor.nvml_health`): read back from recorded frames, and read from NVML."""

import json
import types

from corral.core.monitoring.gpu_health import HealthFigures, XidEvent
from corral.monitor.nvml import ReplayedGpus, reading_from_raw
from corral.monitor.nvml_health import NvmlHealth
from corral.server.gpu_health import GpuHealth


def test_a_frames_health_fields_reach_the_reading_and_a_frame_without_them_reads_healthy():
    raw = {"index": 1, "uuid": "GPU-1", "xid_events": [{"xid": 79, "time_us": 1_700_000_000_000_000}],
           "ecc": {"volatile_uncorrected": 2}, "throttle_reasons": 0x40, "lost": True}
    assert reading_from_raw(raw).health == HealthFigures(
        xid_events=(XidEvent(79, 1_700_000_000_000_000),), ecc_uncorrected=2, throttle_reasons=0x40, lost=True)
    assert reading_from_raw({"index": 0}).health == HealthFigures()
    odd = {"index": 0, "xid_events": [{"xid": "79"}, 5, {"xid": 79, "time_us": -1}], "ecc": 3, "lost": "yes",
           "throttle_reasons": True}
    assert reading_from_raw(odd).health == HealthFigures()


def test_replayed_frames_cycle_but_an_xid_in_them_is_acted_on_once(tmp_path):
    healthy = [{"index": 0}, {"index": 1}]
    faulty = [{"index": 0}, {"index": 1, "xid_events": [{"xid": 79, "time_us": 5}]}]
    path = tmp_path / "frames.jsonl"
    path.write_text("\n".join(json.dumps(f) for f in (healthy, faulty, healthy)) + "\n")
    replay, health = ReplayedGpus(path), GpuHealth("node1")
    seen = []
    for tick in range(9):  # three cycles
        seen += health.update({r.index: r.health for r in replay.read()}, float(tick))
    assert [(e.gpu, e.what, e.at, e.node) for e in seen] == [(1, "XID 79: GPU has fallen off the bus", 1.0, "node1")]
    shown = health.of_node("node1")[1]
    assert shown["events"][0]["what"] == "XID 79: GPU has fallen off the bus" and shown["lost"] is False
    assert health.of_node("other") == {}


class _NvmlError(Exception):
    def __init__(self, value: int) -> None:
        self.value = value


def _fake_nvml(lost_gpu: int, queued: list[tuple[str, int]]) -> types.SimpleNamespace:
    """NVML as pynvml presents it, for two GPUs: one lost, XID events queued for the others."""
    timeout, is_lost = 10, 15

    def on(handle, *args):
        if handle == lost_gpu:
            raise _NvmlError(is_lost)
        return {"ecc": 0, "throttle": 0x4}

    def wait(event_set, timeout_ms):
        assert timeout_ms == 0  # never blocks the monitor
        if not queued:
            raise _NvmlError(timeout)
        uuid, xid = queued.pop(0)
        return types.SimpleNamespace(device=uuid, eventType=0x8, eventData=xid)

    return types.SimpleNamespace(
        NVMLError=_NvmlError, NVML_ERROR_GPU_IS_LOST=is_lost, NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1, NVML_VOLATILE_ECC=0,
        NVML_TEMPERATURE_GPU=0, nvmlEventTypeXidCriticalError=0x8,
        nvmlEventSetCreate=lambda: "set", nvmlDeviceRegisterEvents=lambda handle, types_, event_set: None,
        nvmlEventSetWait=wait, nvmlDeviceGetUUID=lambda device: device.encode(),
        nvmlDeviceGetTotalEccErrors=lambda h, kind, counter: on(h)["ecc"],
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: on(h)["throttle"],
        nvmlDeviceGetTemperature=lambda h, sensor: on(h) and 40)


def test_the_reader_takes_queued_xids_by_gpu_and_marks_a_gpu_nvml_calls_lost():
    handles = [(0, 0, "GPU-a"), (1, 1, "GPU-b")]
    pynvml = _fake_nvml(lost_gpu=1, queued=[("GPU-a", 79), ("GPU-a", 13), ("GPU-zz", 48)])
    health = NvmlHealth()
    health.start(pynvml, handles)
    frame = [{"index": 0}, {"index": 1}]
    health.add_fields(pynvml, frame, handles)
    assert [e["xid"] for e in frame[0]["xid_events"]] == [79, 13]
    assert frame[0]["ecc"] == {"volatile_uncorrected": 0} and frame[0]["throttle_reasons"] == 0x4
    assert "lost" not in frame[0] and frame[1]["lost"] is True and frame[1]["xid_events"] == []
    assert reading_from_raw(frame[1]).health.lost


def test_a_gpu_that_throttles_again_and_again_never_pushes_another_gpus_fault_out_of_view():
    health = GpuHealth("node1")
    health.update({1: HealthFigures(xid_events=(XidEvent(79, 5),))}, 0.0)
    for tick in range(1, 100):
        health.update({0: HealthFigures(throttle_reasons=0x4 if tick % 2 else 0)}, float(tick))
    shown = health.of_node("node1")
    assert [e["what"] for e in shown[1]["events"]] == ["XID 79: GPU has fallen off the bus"]
    assert len(shown[0]["events"]) == 5 and shown[0]["events"][-1]["at"] == "1970-01-01T00:01:39Z"
