"""Upload spooled runs (what `corral sync` does), exactly once however often it is run.

Each run is created by its uid (idempotent), its records are posted in order and each file is
deleted once acknowledged (metric batches are idempotent by batch_id, so a crash between the two
only means one batch is acknowledged twice), the run is finished if its process recorded an end,
or marked crashed if that process died without one, and its directory goes. A run whose lock a
live process holds is left alone. A run made in a job this server never had (another server's,
or one whose database is new) is uploaded without the link to the job: a server links a run
only to an existing job of its caller's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.core.jobspec.states import TERMINAL_STATES
from corral.errors import InvalidRequest
from corral.sdk.places import SpoolPlaces
from corral.sdk.posting import upload
from corral.sdk.spool import RunSpool, SpoolLocked, run_dirs

if TYPE_CHECKING:
    from corral.client import Client

LOCKED = "a live process is still writing this run; skipped"
TERMINAL = frozenset(state.value for state in TERMINAL_STATES)


@dataclass
class SyncReport:
    """What syncing one spooled run did."""

    uid: str
    run_id: int | None = None
    batches: int = 0
    """Metric batches uploaded now."""
    points: int = 0
    """Metric points in those batches."""
    stored: int = 0
    """Of those, the points the server stored now: none where it had every batch already (a spool
    synced a second time), fewer where it skipped steps it holds."""
    state: str | None = None
    """The run's state on the server afterwards (None when it was not reached)."""
    error: str | None = None
    """Why the run was not (entirely) uploaded; what is left stays in the spool."""


def sync_spool(spool_dir: str | None = None, *, client: Client) -> list[SyncReport]:
    """Upload every spooled run of this user's for `spool_dir` (default: `$CORRAL_SPOOL_DIR`, else
    `<home>/spool`): those in it, in its subdirectory of the user's name (a shared server's spool),
    and in the private fallbacks runs took when it could not be written (see corral.sdk.places)."""
    reports = []
    for path in run_dirs(*SpoolPlaces.resolve(spool_dir).existing()):
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
        run = _create(client, spool.request)
        report.run_id, report.state = run["id"], run.get("state")
        had_end = spool.finish_record() is not None
        done = upload(spool, client, run["id"])
        report.batches, report.points, report.stored = done.batches, done.points, done.stored
        report.state = done.state or report.state
        if done.problems:
            report.error = "; ".join(done.problems)
        if not had_end and report.state == "running" and not _job_active(client, spool.request.get("job_id")):
            # its process died without recording an end (killed, out of memory, time limit), and
            # the job-ended hook of the server has long fired: nothing else would ever end it
            report.state = client.finish_run(run["id"], "crashed").get("state")
    except Exception as exc:  # noqa: BLE001 - report it and go on with the next run
        report.error = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        spool.release()
        return report
    spool.remove_all()
    return report


def _create(client: Client, request: dict) -> dict:
    try:
        return client.create_run(**request)
    except InvalidRequest as exc:
        if exc.field != "job_id" or request.get("job_id") is None:
            raise
        return client.create_run(**{k: v for k, v in request.items() if k != "job_id"})  # no such job here


def _job_active(client: Client, job_id: object) -> bool:
    """Whether the run's corral job is still queued or running (it may yet come back to the run)."""
    if not isinstance(job_id, int):
        return False
    try:
        return client.get(job_id)["state"] not in TERMINAL
    except Exception:  # noqa: BLE001 - an unknown job (another server's) is not active
        return False


def _uid_of(path: str) -> str:
    return os.path.basename(path)
