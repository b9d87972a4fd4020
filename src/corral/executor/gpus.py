"""The machine's inventory: GPUs from NVML where there are any, else as declared; CPUs and memory."""

from __future__ import annotations

import os
import platform
import re
import socket

from corral.core.resources import DeclaredInventory, Gpu, Node, capability_of
from corral.core.units import parse_memory_mb
from corral.errors import InvalidRequest

_BRANDS = {"NVIDIA", "GeForce", "Tesla", "Quadro"}
_VARIANT = re.compile(r"^(\d+GB|HBM\d*e?|PCIe|SXM\d*|NVL|MIG)$", re.IGNORECASE)


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


def declared_types(text: str, count: int) -> list[str]:
    """`A100` -> that type for every GPU; `T4:2,A100:2` -> the first two T4s and the next two A100s.

    Raises:
        InvalidRequest: a list whose counts do not add up to the GPUs declared.
    """
    if ":" not in text and "," not in text:
        return [text] * count
    types: list[str] = []
    for part in text.split(","):
        name, _, number = part.strip().partition(":")
        if not name or (number and not number.isdigit()):
            raise InvalidRequest("gpu_type", f"cannot read {part.strip()!r}", "write TYPE or TYPE:N,TYPE:N")
        types += [name] * (int(number) if number else 1)
    if len(types) != count:
        raise InvalidRequest("gpu_type", f"{text!r} lists {len(types)} GPUs, but {count} are declared",
                             "make the counts add up to --gpus")
    return types


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
        mem_mb = parse_memory_mb(declared.gpu_mem, field="gpu_mem") if declared.gpu_mem else 0
        types = declared_types(declared.gpu_type or "GPU", declared.gpus)
        gpus = [Gpu(index=i, type=t, mem_mb=mem_mb, capability=capability_of(t)) for i, t in enumerate(types)]
    else:
        gpus = detect_gpus()
        if declared.gpu_type or declared.gpu_mem:
            raise InvalidRequest("gpu_type", "--gpu-type and --gpu-mem describe declared GPUs", "add --gpus N")
    cpus = declared.cpus if declared.cpus is not None else len(os.sched_getaffinity(0))
    if cpus < 1:
        raise InvalidRequest("cpus", f"must be at least 1, got {cpus}")
    mem_mb = parse_memory_mb(declared.mem, field="mem") if declared.mem else machine_memory_mb()
    return Node(name=socket.gethostname(), cpus=cpus, mem_mb=mem_mb, gpus=tuple(gpus), arch=condor_arch(),
                features=declared.features)


def condor_arch(machine: str | None = None) -> str:
    """This machine's processors as HTCondor's Arch names them: `X86_64`, `aarch64`, ..."""
    machine = (machine or platform.machine()).lower()
    return {"x86_64": "X86_64", "amd64": "X86_64", "aarch64": "aarch64", "arm64": "aarch64",
            "ppc64le": "ppc64le"}.get(machine, machine.upper())
