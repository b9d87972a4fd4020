"""The machine's inventory: GPUs from NVML where there are any, else as declared; CPUs and memory."""

from __future__ import annotations

import json
import os
import platform
import re
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from corral.core.jobspec.features import gpu_type_features
from corral.core.scheduling.resources import DeclaredInventory, Gpu, Node, capability_of
from corral.core.units.units import parse_memory_mb
from corral.executor.mig import as_slice, raw_mig, schedulable, text
from corral.errors import InvalidRequest
from corral.executor.gpu_topology import add_topology, node_topology

_BRANDS = {"NVIDIA", "GeForce", "Tesla", "Quadro"}
_MB = 1024 * 1024
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


REPLAY_ENV = "CORRAL_GPU_REPLAY"
"""Names a file of recorded NVML frames (`python -m corral.monitor.nvml --record N`): the GPUs are the first
frame's, and the monitor samples the frames (`corral.monitor.nvml`). What tests replay is what a GPU machine has."""


def detected_facts(environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The GPUs' raw facts: the first replayed frame's (CORRAL_GPU_REPLAY), else NVML's (`read_inventory`)."""
    path = (os.environ if environ is None else environ).get(REPLAY_ENV)
    return first_replayed_frame(path) if path else read_inventory()


def read_inventory() -> list[dict[str, Any]]:
    """Each GPU's fixed facts from NVML, as raw frame fields (`name`, `uuid`, `minor`, `capability`, `memory`);
    [] where there is no driver. The recorder adds them to the first frame it writes."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - any NVML failure means "no usable GPUs here"
        return []
    try:
        facts = [_raw_facts(pynvml, index) for index in range(pynvml.nvmlDeviceGetCount())]
        add_topology(pynvml, facts)
        return facts
    finally:
        pynvml.nvmlShutdown()


def _raw_facts(pynvml: Any, index: int) -> dict[str, Any]:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    facts: dict[str, Any] = {
        "index": index,
        "name": text(pynvml.nvmlDeviceGetName(handle)),
        "uuid": text(pynvml.nvmlDeviceGetUUID(handle)),
        "memory": {"total": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)},
    }
    try:
        facts["minor"] = int(pynvml.nvmlDeviceGetMinorNumber(handle))
    except Exception:  # noqa: BLE001 - not every device has one (MIG, some platforms): assume its index
        facts["minor"] = None
    try:
        facts["capability"] = [int(part) for part in pynvml.nvmlDeviceGetCudaComputeCapability(handle)]
    except Exception:  # noqa: BLE001 - an old driver: the table by type stands in
        facts["capability"] = None
    mig = raw_mig(pynvml, handle)
    if mig is not None:  # its slices are the GPUs to schedule (`corral.executor.mig`)
        facts["mig"] = mig
    return facts


def gpus_from_raw(frame: Sequence[Mapping[str, Any]]) -> list[Gpu]:
    """GPUs from raw NVML facts (what `read_inventory` returns, or a recorded frame): a field a frame lacks is
    left unknown (its name: `GPU`; its memory: 0). A GPU in MIG mode gives its slices instead (`corral.executor.mig`)."""
    gpus = []
    for raw in schedulable(frame):
        name = raw.get("name") if isinstance(raw.get("name"), str) else None
        gpu_type = short_gpu_type(name) if name else "GPU"
        memory = raw.get("memory")
        total = memory.get("total") if isinstance(memory, Mapping) else None
        capability = raw.get("capability")
        if isinstance(capability, list) and len(capability) == 2 and all(isinstance(c, int) for c in capability):
            cc: float | None = float(f"{capability[0]}.{capability[1]}")
        else:
            cc = capability_of(gpu_type)
        minor, uuid = raw.get("minor"), raw.get("uuid")
        gpus.append(as_slice(raw, Gpu(
            index=int(raw["index"]), type=gpu_type, mem_mb=int(total) // _MB if isinstance(total, int) else 0,
            uuid=uuid if isinstance(uuid, str) else None, minor=minor if isinstance(minor, int) else None,
            capability=cc, device_name=name)))
    return gpus


def first_replayed_frame(path: str) -> list[dict[str, Any]]:
    """The first frame of a replay file (JSON lines, one frame a line).

    Raises:
        InvalidRequest: it cannot be read, or its first line is not a list of GPUs with integer indexes.
    """
    hint = "point it at a file from `python -m corral.monitor.nvml --record N`, or unset it"
    try:
        with open(path) as f:
            line = next((line for line in f if line.strip()), "")
        frame = json.loads(line) if line else None
    except (OSError, ValueError) as error:
        raise InvalidRequest(REPLAY_ENV, f"cannot replay GPU frames: {error}", hint) from None
    if not isinstance(frame, list) or not all(
            isinstance(raw, dict) and isinstance(raw.get("index"), int) for raw in frame):
        raise InvalidRequest(REPLAY_ENV, f"cannot replay GPU frames: {path}'s first line is not a list of GPUs "
                             "each with an integer index", hint)
    return frame


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
        facts: list[dict[str, Any]] = []
    else:
        facts = detected_facts()
        gpus = gpus_from_raw(facts)
        if declared.gpu_type or declared.gpu_mem:
            raise InvalidRequest("gpu_type", "--gpu-type and --gpu-mem describe declared GPUs", "add --gpus N")
    cpus = declared.cpus if declared.cpus is not None else len(os.sched_getaffinity(0))
    if cpus < 1:
        raise InvalidRequest("cpus", f"must be at least 1, got {cpus}")
    mem_mb = parse_memory_mb(declared.mem, field="mem") if declared.mem else machine_memory_mb()
    features, type_gpus = type_features(gpus, declared)
    return Node(name=socket.gethostname(), cpus=cpus, mem_mb=mem_mb, gpus=tuple(gpus), arch=condor_arch(),
                features=features, topology=node_topology(facts, declared, [g.index for g in gpus], type_gpus))


def type_features(gpus: Sequence[Gpu], declared: DeclaredInventory) -> tuple[tuple[str, ...], dict[str, frozenset[int]]]:
    """The node's features with its GPU types among them (`--constraint=a100` on a node of A100s): a node of one
    type has it as a node feature; a node of several, each as the feature of its GPUs, so that the constraint picks
    them. A name the admin declares already stays theirs."""
    families = {g.index: short_gpu_type(g.device_name) if g.parent is not None and g.device_name else g.type
                for g in gpus}
    taken = {name.lower() for name in declared.features} | {name.lower() for name, _ in declared.gpu_features}
    by_type = {name: ids for name, ids in gpu_type_features(families).items() if name not in taken}
    if len(by_type) == 1:
        return (*declared.features, *by_type), {}
    return declared.features, by_type


def condor_arch(machine: str | None = None) -> str:
    """This machine's processors as HTCondor's Arch names them: `X86_64`, `aarch64`, ..."""
    machine = (machine or platform.machine()).lower()
    return {"x86_64": "X86_64", "amd64": "X86_64", "aarch64": "aarch64", "arm64": "aarch64",
            "ppc64le": "ppc64le"}.get(machine, machine.upper())
