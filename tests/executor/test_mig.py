"""MIG slices as GPUs: from a replayed A100 frame in MIG mode to the inventory, the readings, the binding
(CUDA_VISIBLE_DEVICES=MIG-<uuid>) and the devices a job may open."""

from __future__ import annotations

import json
from types import SimpleNamespace

from corral.core.jobspec.job import Job
from corral.core.scheduling.resources import Allocation
from corral.core.jobspec.states import JobState
from corral.backends.local.settings import LaunchSettings
from corral.executor.environment import job_environment
from corral.executor.gpus import detected_facts, gpus_from_raw
from corral.executor.mig import caps_major, caps_minors, cuda_visible_devices, profile_of, raw_mig
from corral.monitor.nvml import ReplayedGpus

from tests.helpers import make_spec

GIB = 1 << 30
A100 = "NVIDIA A100-SXM4-80GB"
MIG_3G = "MIG-3c2e1f9a-0000-5a7b-9c1d-000000000003"
MIG_1G = ("MIG-1a2b3c4d-0000-5e6f-8a9b-000000000001", "MIG-1a2b3c4d-0000-5e6f-8a9b-000000000002")


def mig_frame(*, pid: int | None = None) -> list[dict]:
    """What `python -m corral.monitor.nvml --record` writes first on an A100 box: GPU 0 in MIG mode cut into
    one 3g.40gb and two 1g.10gb (the first 1g.10gb running `pid`, with 3 GiB), GPU 1 whole."""
    def device(uuid: str, profile: str, total_gib: int, gi: int, used_gib: int, processes: list) -> dict:
        return {"uuid": uuid, "name": f"{A100} MIG {profile}", "gi": gi, "ci": 0, "utilization": None,
                "caps": [gi * 9 + 3, gi * 9 + 4],  # the driver's /dev/nvidia-caps minors for gi, then its ci 0
                "memory": {"total": total_gib * GIB, "used": used_gib * GIB, "free": (total_gib - used_gib) * GIB},
                "processes": processes}

    running = [{"pid": pid, "usedGpuMemory": 3 * GIB}] if pid else []
    return [
        {"index": 0, "name": A100, "uuid": "GPU-aaaa", "minor": 0, "capability": [8, 0],
         "utilization": None, "memory": {"total": 80 * GIB, "used": 5 * GIB, "free": 75 * GIB},
         "power_mw": 90000, "temperature_c": 38, "processes": running,
         "mig": {"mode": 1, "devices": [
             device(MIG_3G, "3g.40gb", 40, 2, 1, []),
             device(MIG_1G[0], "1g.10gb", 10, 9, 4 if pid else 1, running),
             device(MIG_1G[1], "1g.10gb", 10, 10, 0, []),
         ]}},
        {"index": 1, "name": A100, "uuid": "GPU-bbbb", "minor": 1, "capability": [8, 0],
         "utilization": {"gpu": 12, "memory": 3}, "memory": {"total": 80 * GIB, "used": 2 * GIB, "free": 78 * GIB},
         "power_mw": 70000, "temperature_c": 35, "processes": [], "mig": {"mode": 0, "devices": []}},
    ]


def replay(tmp_path, frame: list[dict]) -> str:
    path = tmp_path / "frames.jsonl"
    path.write_text(json.dumps(frame) + "\n")
    return str(path)


def test_a_gpu_in_mig_mode_gives_its_slices_as_gpus_typed_by_profile_after_the_whole_gpus(tmp_path):
    gpus = gpus_from_raw(detected_facts({"CORRAL_GPU_REPLAY": replay(tmp_path, mig_frame())}))
    assert [(g.index, g.type, g.mem_mb, g.uuid, g.parent, g.minor, g.capability) for g in gpus] == [
        (1, "A100", 81920, "GPU-bbbb", None, 1, 8.0),  # the whole GPU keeps NVML's index
        (2, "3g.40gb", 40960, MIG_3G, 0, 0, 8.0),  # slices: after the last GPU, on their parent's /dev/nvidia0
        (3, "1g.10gb", 10240, MIG_1G[0], 0, 0, 8.0),
        (4, "1g.10gb", 10240, MIG_1G[1], 0, 0, 8.0),
    ]
    assert gpus[1].device_name == f"{A100} MIG 3g.40gb"
    assert [g.caps for g in gpus] == [(), (21, 22), (84, 85), (93, 94)]


def test_each_slice_is_sampled_on_its_own_index_with_its_memory_and_no_utilization(tmp_path):
    readings = {r.index: r for r in ReplayedGpus(replay(tmp_path, mig_frame(pid=4242))).read()}
    assert sorted(readings) == [0, 1, 2, 3, 4]
    assert (readings[3].memory_used_mb, readings[3].memory_total_mb, readings[3].utilization) == (4096, 10240, None)
    assert readings[3].processes == ((4242, 3072),)
    assert readings[1].utilization == 12
    # the parent: its temperature and power, but its processes are its slices' (a job holding slice 3 is not
    # running on a GPU it does not hold, nor is its process outside corral)
    assert (readings[0].temperature_c, readings[0].processes) == (38, ())


def test_mig_profiles_come_from_nvmls_device_names():
    assert profile_of(f"{A100} MIG 1g.10gb") == "1g.10gb"
    assert profile_of("NVIDIA H100 80GB HBM3 MIG 3g.40gb") == "3g.40gb"
    assert profile_of(A100) is None


def test_a_job_holding_slices_is_bound_by_their_mig_uuids():
    uuids = {1: "GPU-bbbb", 2: MIG_3G, 3: MIG_1G[0]}
    assert cuda_visible_devices((3,), uuids) == MIG_1G[0]
    assert cuda_visible_devices((2, 3), uuids) == f"{MIG_3G},{MIG_1G[0]}"
    assert cuda_visible_devices((1, 3), uuids) == f"GPU-bbbb,{MIG_1G[0]}"  # CUDA reads UUIDs or indexes, not both
    assert cuda_visible_devices((1,), uuids) == "1"  # whole GPUs: their index, as before


def test_a_local_jobs_environment_names_its_slice_by_uuid_and_slurm_by_index():
    spec = make_spec(script="#!/bin/sh\ntrue\n", command=None, gpus=1)
    job = Job(id=7, spec=spec, state=JobState.RUNNING, submit_time=0.0, start_time=1.0)
    env = job_environment(job, Allocation(job_id=7, node="n1", gpu_ids=(3,), cpus=1, mem_mb=0), server_env={},
                          checkpoint_dir="/c", server_url=None, gpu_uuids={1: "GPU-bbbb", 3: MIG_1G[0]})
    assert env["CUDA_VISIBLE_DEVICES"] == MIG_1G[0]
    assert env["SLURM_JOB_GPUS"] == env["CORRAL_GPUS"] == "3"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_a_job_on_a_slice_may_open_its_parents_device_and_no_other_gpus():
    settings = LaunchSettings(kill_grace_s=1, server_env={}, server_url=lambda: None,
                              cgroup_layout={"devices": True}, gpu_minors={1: 1, 2: 0, 3: 0, 4: 0})
    job = SimpleNamespace(id=7)
    on_slice = settings.cgroup_of(job, Allocation(job_id=7, node="n1", gpu_ids=(3,), cpus=1, mem_mb=0))
    assert on_slice is not None and on_slice["deny_devices"] == [["c", 195, 1]]
    on_whole = settings.cgroup_of(job, Allocation(job_id=7, node="n1", gpu_ids=(1,), cpus=1, mem_mb=0))
    assert on_whole is not None and on_whole["deny_devices"] == [["c", 195, 0]]


def test_a_job_on_a_slice_may_open_its_own_mig_instances_and_not_the_other_slices():
    settings = LaunchSettings(kill_grace_s=1, server_env={}, server_url=lambda: None, cgroup_layout={"devices": True},
                              gpu_minors={1: 1, 2: 0, 3: 0, 4: 0}, caps_major=236,
                              gpu_caps={2: (21, 22), 3: (84, 85), 4: (93, 94)})
    job = SimpleNamespace(id=7)
    on_slice = settings.cgroup_of(job, Allocation(job_id=7, node="n1", gpu_ids=(3,), cpus=1, mem_mb=0))
    assert on_slice is not None and on_slice["deny_devices"] == [
        ["c", 195, 1], ["c", 236, 21], ["c", 236, 22], ["c", 236, 93], ["c", 236, 94]]


def test_the_drivers_capability_files_give_each_instances_minor(tmp_path):
    def access(path, minor):
        path.mkdir(parents=True, exist_ok=True)
        (path / "access").write_text(f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")

    access(tmp_path / "gpu0" / "mig" / "gi9", 84)
    access(tmp_path / "gpu0" / "mig" / "gi9" / "ci0", 85)
    assert caps_minors(0, 9, 0, root=str(tmp_path)) == [84, 85]
    assert caps_minors(0, 9, 1, root=str(tmp_path)) is None  # no such compute instance
    assert caps_minors(None, 9, 0, root=str(tmp_path)) is None
    devices = tmp_path / "devices"
    devices.write_text("Character devices:\n195 nvidia-frontend\n236 nvidia-caps\n508 nvidia-uvm\n")
    assert caps_major(str(devices)) == 236
    assert caps_major(str(tmp_path / "none")) is None


class _Nvml:
    """pynvml's MIG calls, answering as an A100 in MIG mode with two instances (slot 1 empty)."""

    NVML_DEVICE_MIG_ENABLE = 1

    class NVMLError(Exception):
        pass

    def __init__(self, mig_mode: int) -> None:
        self.mode = mig_mode
        self.devices = {0: ("MIG-a", "3g.40gb", 2), 2: ("MIG-b", "1g.10gb", 9)}

    def nvmlDeviceGetMigMode(self, handle):
        if self.mode < 0:
            raise self.NVMLError("Not Supported")
        return [self.mode, self.mode]

    def nvmlDeviceGetMinorNumber(self, handle):
        return 0

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, slot):
        if slot not in self.devices:
            raise self.NVMLError("Not Found")
        return slot

    def nvmlDeviceGetUUID(self, device):
        return self.devices[device][0].encode()

    def nvmlDeviceGetName(self, device):
        return f"{A100} MIG {self.devices[device][1]}"

    def nvmlDeviceGetMemoryInfo(self, device):
        return SimpleNamespace(total=10 * GIB, used=GIB, free=9 * GIB)

    def nvmlDeviceGetGpuInstanceId(self, device):
        return self.devices[device][2]

    def nvmlDeviceGetComputeInstanceId(self, device):
        return 0

    def nvmlDeviceGetComputeRunningProcesses(self, device):
        raise self.NVMLError("Not Supported")


def test_nvmls_mig_devices_are_recorded_in_the_raw_frame_shape():
    mig = raw_mig(_Nvml(1), handle=object())
    assert mig is not None and mig["mode"] == 1
    assert [(d["uuid"], d["name"], d["gi"], d["ci"], d["memory"]["total"], d["processes"]) for d in mig["devices"]] == [
        ("MIG-a", f"{A100} MIG 3g.40gb", 2, 0, 10 * GIB, None),
        ("MIG-b", f"{A100} MIG 1g.10gb", 9, 0, 10 * GIB, None),
    ]
    assert raw_mig(_Nvml(0), handle=object()) is None  # MIG off: a whole GPU
    assert raw_mig(_Nvml(-1), handle=object()) is None  # a board without MIG
