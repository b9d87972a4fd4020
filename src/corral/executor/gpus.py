"""The machine's inventory: GPUs from NVML where there are any, else as declared; CPUs and memory."""

from __future__ import annotations

import os
import platform
import re
import socket
from dataclasses import dataclass

from corral.core.resources import Gpu, Node, capability_of
from corral.core.units import parse_memory_mb
from corral.errors import InvalidRequest

_BRANDS = {"NVIDIA", "GeForce", "Tesla", "Quadro"}
_VARIANT = re.compile(r"^(\d+GB|HBM\d*e?|PCIe|SXM\d*|NVL|MIG)$", re.IGNORECASE)


@dataclass(frozen=True)
class DeclaredInventory:
    """What `corral up` (or the config file) declares; None fields are detected."""

    gpus: int | None = None
    gpu_type: str | None = None
    gpu_mem: str | None = None
    cpus: int | None = None
    mem: str | None = None


def short_gpu_type(nvml_name: str) -> str:
    """`NVIDIA A100-SXM4-80GB` -> `A100`; `NVIDIA H100 80GB HBM3` -> `H100`; `NVIDIA GeForce RTX 4090` -> `RTX-4090`."""
    tokens = [t for t in nvml_name.replace("-", " ").split() if t not in _BRANDS]
    kept = []
    for token in tokens:
        if _VARIANT.match(token):
            break
        kept.append(token)
    return "-".join(kept) or nvml_name.strip()


def detect_gpus() -> list[Gpu]:
    """GPUs as NVML numbers them (PCI bus order); empty where there is no driver."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - any NVML failure means "no usable GPUs here"
        return []
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
            mem_mb = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            try:
                minor: int | None = int(pynvml.nvmlDeviceGetMinorNumber(handle))
            except Exception:  # noqa: BLE001 - not every device has one (MIG, some platforms): assume its index
                minor = None
            try:
                major, minor_cc = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
                capability: float | None = float(f"{int(major)}.{int(minor_cc)}")
            except Exception:  # noqa: BLE001 - an old driver: fall back on the table by type
                capability = capability_of(short_gpu_type(name))
            gpus.append(Gpu(index=index, type=short_gpu_type(name), mem_mb=int(mem_mb), uuid=uuid, minor=minor,
                            capability=capability, device_name=name))
        return gpus
    finally:
        pynvml.nvmlShutdown()


def machine_memory_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 0


def build_node(declared: DeclaredInventory) -> Node:
    """This machine as a node: declared values win, the rest is detected.

    Raises:
        InvalidRequest: a declared value that makes no sense.
    """
    if declared.gpus is not None:
        if declared.gpus < 0 or declared.gpus > 1024:
            raise InvalidRequest("gpus", f"must be between 0 and 1024, got {declared.gpus}")
        gpu_type = declared.gpu_type or "GPU"
        mem_mb = parse_memory_mb(declared.gpu_mem, field="gpu_mem") if declared.gpu_mem else 0
        capability = capability_of(gpu_type)
        gpus = [Gpu(index=i, type=gpu_type, mem_mb=mem_mb, capability=capability) for i in range(declared.gpus)]
    else:
        gpus = detect_gpus()
        if declared.gpu_type or declared.gpu_mem:
            raise InvalidRequest("gpu_type", "--gpu-type and --gpu-mem describe declared GPUs", "add --gpus N")
    cpus = declared.cpus if declared.cpus is not None else len(os.sched_getaffinity(0))
    if cpus < 1:
        raise InvalidRequest("cpus", f"must be at least 1, got {cpus}")
    mem_mb = parse_memory_mb(declared.mem, field="mem") if declared.mem else machine_memory_mb()
    return Node(name=socket.gethostname(), cpus=cpus, mem_mb=mem_mb, gpus=tuple(gpus), arch=condor_arch())


def condor_arch(machine: str | None = None) -> str:
    """This machine's processors as HTCondor's Arch names them: `X86_64`, `aarch64`, ..."""
    machine = (machine or platform.machine()).lower()
    return {"x86_64": "X86_64", "amd64": "X86_64", "aarch64": "aarch64", "arm64": "aarch64",
            "ppc64le": "ppc64le"}.get(machine, machine.upper())
