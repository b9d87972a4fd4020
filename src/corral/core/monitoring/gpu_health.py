"""GPU health: what NVML says is wrong with a GPU, which of it takes the GPU out of service, and why.

The monitor reads each GPU's health figures with its other figures (`corral.monitor.nvml_health`):
the XID errors the driver reported since the last read, the volatile count of uncorrectable ECC
errors, the clock throttle reasons, and whether the GPU is lost (NVML_ERROR_GPU_IS_LOST: fallen off
the bus). `assess` compares them with the GPU's previous standing and says what happened:

- *fatal*: an XID that means the GPU needs a reset or is broken (`FATAL_XIDS`), an uncorrectable ECC
  count that went up, a GPU lost. The GPU is drained with the fault as its reason and the jobs on it
  end NODE_FAIL (or are requeued); an admin resumes it once it is fixed.
- *recorded*: an XID that is usually the application's own fault (13, 31, 43, 45, ...), a thermal or
  power throttle that starts. Shown, nothing else.

Every finding is an edge, never a level: an XID event counts once (by its GPU, number and time, as
NVML's event queue hands each out once), an ECC count only when it rises, a lost GPU when it is lost
anew. So a GPU an admin resumed is not drained again by what was already known about it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from corral.core.units.iso_times import iso_utc

FATAL_XIDS: Mapping[int, str] = {
    48: "double-bit ECC error",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping event",
    64: "ECC page retirement or row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}
"""XIDs after which the GPU is not to be trusted with a new job until an admin looked (NVIDIA's XID catalog:
"reset the GPU" or worse)."""

RECORDED_XIDS: Mapping[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup, due to previous errors",
    61: "internal micro-controller breakpoint/warning",
}
"""XIDs that are most often the application's own fault (a bad kernel, an illegal address): recorded only."""

THROTTLE_REASONS: Mapping[int, str] = {
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake",
}
"""NVML's clock throttle reasons (nvmlClocksThrottleReason*) that say the GPU is too hot or drawing too much;
idle, application clocks, sync boost and display clocks are not trouble."""
_TROUBLE = sum(THROTTLE_REASONS)  # their bits together

FATAL, RECORDED = "fatal", "recorded"


@dataclass(frozen=True, slots=True)
class XidEvent:
    xid: int
    time_us: int
    """When the reader took it from NVML's event queue (epoch microseconds): with the GPU and the XID, its identity."""


@dataclass(frozen=True, slots=True)
class HealthFigures:
    """One GPU's health at one read; None where NVML cannot tell (no ECC on the board, an old driver)."""

    xid_events: tuple[XidEvent, ...] = ()
    ecc_uncorrected: int | None = None
    """Volatile (since the driver loaded) uncorrectable ECC errors, NVML_VOLATILE_ECC."""
    throttle_reasons: int | None = None
    """nvmlDeviceGetCurrentClocksThrottleReasons' bitmask."""
    lost: bool = False
    """NVML answered NVML_ERROR_GPU_IS_LOST for it."""


@dataclass(frozen=True, slots=True)
class HealthEvent:
    """Something that happened to a GPU, as `corral nodes` and the API list it."""

    gpu: int
    severity: str
    """FATAL (drained) or RECORDED (shown only)."""
    what: str
    """`XID 79: GPU has fallen off the bus`, `uncorrectable ECC errors: 2 (was 0)`, `throttled: thermal (hardware)`."""
    at: float
    node: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"gpu": self.gpu, "severity": self.severity, "what": self.what, "at": iso_utc(self.at)}

    def describe(self) -> str:
        """`GPU 1 of node7: XID 79: GPU has fallen off the bus`."""
        return f"GPU {self.gpu} of {self.node}: {self.what}" if self.node else f"GPU {self.gpu}: {self.what}"


@dataclass(frozen=True, slots=True)
class GpuStanding:
    """What is already known about a GPU: what `assess` compares a new read with."""

    ecc_uncorrected: int | None = None
    lost: bool = False
    throttle_reasons: int = 0
    seen_xids: frozenset[tuple[int, int]] = field(default_factory=frozenset)
    """(xid, time_us) of the XID events already counted."""


MAX_SEEN_XIDS = 1000  # a flood of XIDs must not grow the standing without bound


def assess(gpu: int, before: GpuStanding | None, now_figures: HealthFigures,
           now: float) -> tuple[GpuStanding, list[HealthEvent]]:
    """The GPU's new standing and what happened since `before` (None: its first read).

    A first read sets the ECC count's baseline: errors from before the server started were not
    seen happening, and are shown in the GPU's health, not acted on.
    """
    events: list[HealthEvent] = []
    known: frozenset[tuple[int, int]] = before.seen_xids if before is not None else frozenset()
    added: set[tuple[int, int]] = set()
    for event in sorted(now_figures.xid_events, key=lambda e: e.time_us):
        key = (event.xid, event.time_us)
        if key in known or key in added:
            continue
        added.add(key)
        severity = FATAL if event.xid in FATAL_XIDS else RECORDED
        events.append(HealthEvent(gpu, severity, xid_text(event.xid), now))
    ecc = now_figures.ecc_uncorrected
    if ecc is not None and before is not None and before.ecc_uncorrected is not None and ecc > before.ecc_uncorrected:
        events.append(HealthEvent(gpu, FATAL, f"uncorrectable ECC errors: {ecc} (was {before.ecc_uncorrected})", now))
    if now_figures.lost and not (before is not None and before.lost):
        events.append(HealthEvent(gpu, FATAL, "GPU is lost (fallen off the bus; NVML: GPU is lost)", now))
    throttle = troubling(now_figures.throttle_reasons)
    started = throttle & ~(before.throttle_reasons if before is not None else 0)
    if started:
        events.append(HealthEvent(gpu, RECORDED, f"throttled: {', '.join(throttle_names(started))}", now))
    seen = known | added if added else known
    if len(seen) > MAX_SEEN_XIDS:
        seen = frozenset(sorted(seen, key=lambda k: k[1])[-MAX_SEEN_XIDS:])
    standing = GpuStanding(
        ecc_uncorrected=ecc if ecc is not None else (before.ecc_uncorrected if before is not None else None),
        lost=now_figures.lost, throttle_reasons=throttle, seen_xids=seen)
    return standing, events


def xid_text(xid: int) -> str:
    """`XID 79: GPU has fallen off the bus` (an XID corral has no words for: `XID 154`)."""
    meaning = FATAL_XIDS.get(xid) or RECORDED_XIDS.get(xid)
    return f"XID {xid}: {meaning}" if meaning else f"XID {xid}"


def troubling(reasons: int | None) -> int:
    """The thermal and power bits of a throttle-reason mask."""
    if reasons is None:
        return 0
    return reasons & _TROUBLE


def throttle_names(reasons: int | None) -> list[str]:
    """The thermal and power throttle reasons in a mask, by name."""
    bits = troubling(reasons)
    return [name for bit, name in THROTTLE_REASONS.items() if bits & bit]


def fatal(events: Iterable[HealthEvent]) -> list[HealthEvent]:
    return [event for event in events if event.severity == FATAL]


def drain_reason(events: Iterable[HealthEvent]) -> str:
    """A drain's reason for a GPU's fatal events: `XID 79: GPU has fallen off the bus` (several: joined by `; `)."""
    return "; ".join(dict.fromkeys(event.what for event in events))
