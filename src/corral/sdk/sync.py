"""Upload spooled runs (what `corral sync` does), exactly once however often it is run.

Each run is created by its uid (idempotent), its records are posted in order and each file is
deleted once acknowledged (metric batches are idempotent by batch_id, so a crash between the two
only means one batch is acknowledged twice), the run is finished if its process recorded an end,
and its directory goes. A run whose lock a live process holds is left alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.sdk.spool import RunSpool, SpoolLocked, post_record, read_record, run_dirs, spool_root

if TYPE_CHECKING:
    from corral.client import Client

LOCKED = "a live process is still writing this run; skipped"


@dataclass
class SyncReport:
    """What syncing one spooled run did."""

    uid: str
    run_id: int | None = None
    batches: int = 0
    """Metric batches uploaded now."""
    points: int = 0
    """Metric points in those batches (the server skips those at steps it already has)."""
    state: str | None = None
    """The run's state on the server afterwards (None when it was not reached)."""
    error: str | None = None
    """Why the run was not (entirely) uploaded; what is left stays in the spool."""


def sync_spool(spool_dir: str | None = None, *, client: Client) -> list[SyncReport]:
    """Upload every spooled run under `spool_dir` (default: `$CORRAL_SPOOL_DIR`, else `<home>/spool`)."""
    reports = []
    for path in run_dirs(spool_root(spool_dir)):
        try:
            spool = RunSpool.open(path)
        except SpoolLocked:
            reports.append(SyncReport(uid=_uid_of(path), error=LOCKED))
            continue
        except OSError as exc:
            reports.append(SyncReport(uid=_uid_of(path), error=f"cannot open {path}: {exc}"))
            continue
        if spool is not None:  # None: a directory its process has not finished creating
            reports.append(sync_run(spool, client))
    return reports


def sync_run(spool: RunSpool, client: Client) -> SyncReport:
    """Upload one locked spooled run; the spool is released (and removed when all went up)."""
    report = SyncReport(uid=spool.uid)
    try:
        run = client.create_run(**spool.request)
        report.run_id, report.state = run["id"], run.get("state")
        for path in spool.pending():
            record = read_record(path)
            points = post_record(client, run["id"], record)
            if record.get("kind") == "metrics":
                report.batches += 1
                report.points += points
            spool.remove(path)
        finish = spool.finish_record()
        if finish is not None:
            run = client.finish_run(run["id"], finish.get("state", "finished"), finish.get("end_time"))
            report.state = run.get("state")
            spool.remove_finish()
    except Exception as exc:  # noqa: BLE001 - report it and go on with the next run
        report.error = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        spool.release()
        return report
    spool.remove_all()
    return report


def _uid_of(path: str) -> str:
    return os.path.basename(path)
