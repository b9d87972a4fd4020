"""Reservations as Slurm prints them: `scontrol show reservation` (slurm_sprint_reservation_info's records)
and `sinfo -T` (print_sinfo_reservation's table). Pure: the API's reservations in (each with the server's
`state`, ACTIVE or INACTIVE), text out."""

from __future__ import annotations

from corral.cli.slurm.scontrol_format import record
from corral.cli.slurm.values import full_duration, local_time, parse_iso

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

    Reservation = Mapping[str, Any]

NULL = "(null)"  # what Slurm's printf of a NULL string shows


def show_reservations(reservations: Iterable[Reservation], *, one_liner: bool = False) -> str:
    return "".join(show_reservation(r, one_liner=one_liner) for r in reservations)


def show_reservation(reservation: Reservation, *, one_liner: bool = False) -> str:
    r = reservation
    start, end = parse_iso(r["start"]) or 0.0, parse_iso(r["end"]) or 0.0
    lines = [
        f"ReservationName={r['name']} StartTime={local_time(start)} EndTime={local_time(end)} "
        f"Duration={full_duration(end - start) if end >= start else 'N/A'}",
        f"Nodes={r['node']} NodeCnt=1 CoreCnt={r['cpus']} Features={NULL} PartitionName={NULL} Flags=SPEC_NODES",
        f"TRES={tres(r)}",
        f"AllowedPartitions={NULL} QOS={NULL}",
        f"Users={','.join(r['users']) or NULL} Groups={NULL} Accounts={','.join(r['accounts']) or NULL} "
        f"Licenses={NULL} State={r['state']} BurstBuffer={NULL}",
        f"MaxStartDelay={NULL}",
    ]
    return record(lines, one_liner)


def tres(reservation: Reservation) -> str:
    """`cpu=16,gres/gpu=2`: what it holds, in Slurm's TRES words."""
    parts = [f"cpu={reservation['cpus']}"] if reservation["cpus"] else []
    return ",".join([*parts, f"gres/gpu={len(reservation['gpus'])}"])


def sinfo_reservations(reservations: Sequence[Reservation], *, header: bool = True) -> str:
    """`sinfo -T`: one row each; none: Slurm's sentence."""
    if not reservations:
        return "No reservations in the system\n"
    width = max([9, *(len(r["name"]) for r in reservations)])
    rows = [f"{'RESV_NAME':<{width}}  {'STATE':>8}  {'START_TIME':>19}  {'END_TIME':>19}  {'DURATION':>11}  NODELIST"
            ] if header else []
    for r in reservations:
        start, end = parse_iso(r["start"]) or 0.0, parse_iso(r["end"]) or 0.0
        rows.append(f"{r['name']:<{width}}  {r['state']:>8}  {local_time(start):>19}  {local_time(end):>19}  "
                    f"{full_duration(end - start):>11}  {r['node']}")
    return "\n".join(rows) + "\n"
