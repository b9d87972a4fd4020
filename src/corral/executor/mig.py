"""MIG (NVIDIA Multi-Instance GPU): a GPU cut into slices, each scheduled as a GPU of its own.

With MIG mode on, NVML lists the GPU's MIG devices. Each is a GPU to corral whose type is its profile
(`1g.10gb`, `3g.40gb`: the gres type Slurm gives a MIG device), bound by its `MIG-<uuid>` in
CUDA_VISIBLE_DEVICES; the GPU they are cut from is not schedulable as a whole. A raw frame (`corral.monitor.nvml`)
carries them in NVML's own units, inside their GPU's dict::

    "mig": {"mode": 1, "devices": [{"uuid": "MIG-...", "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
                                    "memory": {"total": ..., "used": ..., "free": ...}, "gi": 1, "ci": 0,
                                    "caps": [21, 22], "utilization": null,
                                    "processes": [{"pid": 4242, "usedGpuMemory": ...}]}]}

Numbering: whole GPUs keep NVML's index (what nvidia-smi, CUDA_VISIBLE_DEVICES=N and drains name); the slices are
numbered after the last GPU, parent by parent in NVML's order, so a node's GPU indexes stay unique and every frame
numbers the slices the same way. A slice's device minor is its parent's: the job holding it must open /dev/nvidiaN,
and its instances' capabilities, /dev/nvidia-caps/nvidia-capM (`caps`: the GPU instance's, then the compute
instance's minor), which no other job may open: that, as Slurm's MultipleFiles in gres.conf, keeps it to its slice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from corral.core.scheduling.resources import Gpu

_PROFILE = re.compile(r"\bMIG\s+(\S+)\s*$")
CAPABILITIES = "/proc/driver/nvidia/capabilities"
"""Where the driver says which /dev/nvidia-caps minor grants access to each MIG instance."""


@dataclass(frozen=True)
class MigDevice:
    """One MIG device as NVML lists it: its handle and what stays fixed while the machine runs."""

    handle: Any
    uuid: str | None
    name: str | None
    gi: int | None
    ci: int | None


@dataclass(frozen=True)
class MigLayout:
    """A GPU in MIG mode: its mode, its device minor and its MIG devices, in slot order."""

    mode: int
    minor: int | None
    devices: tuple[MigDevice, ...]


def mig_layout(pynvml: Any, handle: Any) -> MigLayout | None:
    """A GPU's MIG devices, looked up through NVML; None where MIG is off or unsupported. The layout changes only
    when an administrator makes or removes instances, so a reader looks it up once, with the GPU's handle."""
    if not hasattr(pynvml, "nvmlDeviceGetMigMode"):  # a binding older than MIG
        return None
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError:  # not a MIG-capable board, or an old driver
        return None
    if current != pynvml.NVML_DEVICE_MIG_ENABLE:
        return None
    try:
        minor: int | None = int(pynvml.nvmlDeviceGetMinorNumber(handle))
    except pynvml.NVMLError:
        minor = None
    try:
        slots = int(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle))
    except pynvml.NVMLError:  # in MIG mode but not telling its instances: none to schedule (nor the GPU whole)
        slots = 0
    devices = []
    for slot in range(slots):
        try:
            device = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except pynvml.NVMLError:  # an empty slot: no instance there
            continue
        devices.append(MigDevice(
            handle=device,
            uuid=_read(pynvml, lambda: text(pynvml.nvmlDeviceGetUUID(device))),
            name=_read(pynvml, lambda: text(pynvml.nvmlDeviceGetName(device))),
            gi=_read(pynvml, lambda: int(pynvml.nvmlDeviceGetGpuInstanceId(device))),
            ci=_read(pynvml, lambda: int(pynvml.nvmlDeviceGetComputeInstanceId(device))),
        ))
    return MigLayout(int(current), minor, tuple(devices))


def mig_figures(pynvml: Any, layout: MigLayout) -> dict[str, Any]:
    """The raw `mig` field of a GPU now: its layout's fixed facts, and what each device uses read from NVML."""
    return {"mode": layout.mode, "devices": [_raw_device(pynvml, device) for device in layout.devices]}


def raw_mig(pynvml: Any, handle: Any) -> dict[str, Any] | None:
    """A GPU's MIG mode and devices from NVML as the raw `mig` field, with each device's /dev/nvidia-caps
    minors read from the driver's files (what the inventory needs); None where MIG is off or unsupported."""
    layout = mig_layout(pynvml, handle)
    if layout is None:
        return None
    mig = mig_figures(pynvml, layout)
    for raw, device in zip(mig["devices"], layout.devices):
        raw["caps"] = caps_minors(layout.minor, device.gi, device.ci)
    return mig


def caps_minors(gpu_minor: int | None, gi: int | None, ci: int | None, root: str = CAPABILITIES) -> list[int] | None:
    """The /dev/nvidia-caps minors of a MIG device's GPU instance and compute instance; None where the driver
    does not say (then its slice's devices are not kept from other jobs)."""
    if gpu_minor is None or gi is None or ci is None:
        return None
    instance = f"{root}/gpu{gpu_minor}/mig/gi{gi}"
    minors = [_device_file_minor(f"{instance}/access"), _device_file_minor(f"{instance}/ci{ci}/access")]
    return [m for m in minors if m is not None] if all(m is not None for m in minors) else None


def _device_file_minor(path: str) -> int | None:
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "DeviceFileMinor" and value.strip().isdigit():
                    return int(value)
    except OSError:
        return None
    return None


def caps_major(devices: str = "/proc/devices") -> int | None:
    """The character major of /dev/nvidia-caps (the driver picks it at load); None: no such driver here."""
    try:
        with open(devices) as f:
            for line in f:
                number, _, name = line.strip().partition(" ")
                if name.strip() == "nvidia-caps" and number.isdigit():
                    return int(number)
    except OSError:
        return None
    return None


def _raw_device(pynvml: Any, device: MigDevice) -> dict[str, Any]:
    def memory() -> dict[str, int]:
        info = pynvml.nvmlDeviceGetMemoryInfo(device.handle)
        return {"total": int(info.total), "used": int(info.used), "free": int(info.free)}

    def processes() -> list[dict[str, Any]]:
        return [{"pid": p.pid, "usedGpuMemory": p.usedGpuMemory}
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(device.handle)]

    return {
        "uuid": device.uuid,
        "name": device.name,
        "memory": _read(pynvml, memory),
        "gi": device.gi,
        "ci": device.ci,
        # NVML reports no utilization per MIG device (NOT_SUPPORTED): the reading leaves it unknown
        "utilization": None,
        "processes": _read(pynvml, processes),
    }


def _read(pynvml: Any, call: Any) -> Any:
    try:
        return call()
    except pynvml.NVMLError:
        return None


def text(value: str | bytes) -> str:
    """A string NVML gave, as str (older bindings give bytes)."""
    return value.decode() if isinstance(value, bytes) else value


def profile_of(name: str | None) -> str | None:
    """`NVIDIA A100-SXM4-80GB MIG 3g.40gb` -> `3g.40gb`; None: not a MIG device's name."""
    match = _PROFILE.search(name or "")
    return match.group(1) if match else None


def mig_devices(raw: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """A GPU's MIG devices in a raw frame; None: MIG is off on it (it is a whole GPU)."""
    mig = raw.get("mig")
    if not isinstance(mig, Mapping) or mig.get("mode") != 1:
        return None
    devices = mig.get("devices")
    return [d for d in devices if isinstance(d, Mapping)] if isinstance(devices, list) else []


def slices(frame: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each MIG device of a raw frame as a raw GPU dict of its own: its corral `index`, its `parent`'s NVML
    index and device `minor`, and its own figures (NVML's units)."""
    numbered = sorted((raw for raw in frame if isinstance(raw.get("index"), int)), key=lambda raw: int(raw["index"]))
    number = int(numbered[-1]["index"]) + 1 if numbered else 0
    out = []
    for raw in numbered:
        for device in mig_devices(raw) or ():
            out.append({**device, "index": number, "parent": raw["index"], "minor": raw.get("minor"),
                        "capability": raw.get("capability"), "mig": None})
            number += 1
    return out


def schedulable(frame: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The raw GPUs a job may hold: each whole GPU, then each MIG slice (not the GPUs in MIG mode)."""
    return [raw for raw in frame if mig_devices(raw) is None] + slices(frame)


def as_slice(raw: Mapping[str, Any], gpu: Gpu) -> Gpu:
    """The GPU read from a raw dict of `slices`: its profile as its type, and its parent; a whole GPU as it is."""
    parent = raw.get("parent")
    if not isinstance(parent, int):
        return gpu
    caps = raw.get("caps")
    minors = tuple(c for c in caps if isinstance(c, int)) if isinstance(caps, list) else ()
    return replace(gpu, type=profile_of(gpu.device_name) or gpu.type, parent=parent, caps=minors)


def with_slices(frame: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A raw frame as the monitor reads it: each whole GPU, each MIG parent without the processes (they run on
    its slices and are listed there), then each slice under its own index."""
    out = [dict(raw) if mig_devices(raw) is None else {**raw, "processes": []} for raw in frame]
    return out + slices(frame)


def cuda_visible_devices(gpu_ids: Iterable[int], uuids: Mapping[int, str]) -> str:
    """CUDA_VISIBLE_DEVICES for a job's GPUs: their indexes (PCI bus order), or, where one is a MIG slice (which
    CUDA names only by `MIG-<uuid>`), every one's UUID, as Slurm binds MIG devices."""
    ids = list(gpu_ids)
    return ",".join(by_uuid(ids, uuids) or [str(i) for i in ids])


def by_uuid(gpu_ids: Iterable[int], uuids: Mapping[int, str]) -> tuple[str, ...]:
    """A job's GPUs by UUID where one is a MIG slice (containers' runtimes pass it so too); () where their indexes
    name them all."""
    ids = list(gpu_ids)
    if any(uuids.get(i, "").startswith("MIG-") for i in ids):
        return tuple(uuids.get(i, str(i)) for i in ids)
    return ()
