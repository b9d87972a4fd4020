"""How the SDK sends a run's records to the server: one at a time as the run makes them (the sender), or a
spool's, in order (the sender once the server is back, and `corral sync`). One way for both, so a record the
server refuses, or points it skips, mean the same wherever they are sent from.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral.errors import Conflict, InvalidRequest
from corral.sdk.spool import read_record

if TYPE_CHECKING:
    from corral.client import Client
    from corral.sdk.spool import RunSpool

REJECTED = (InvalidRequest, Conflict)  # the server will never take such a record
SKIPPED_WHY = ("whose steps were not above the steps already stored for their keys (a resumed run logging "
               "steps again, or steps going backwards); steps only move forward")
_skipped_warned = False  # the process's first skipped points are warned about, once


@dataclass
class Uploaded:
    """What `upload` sent."""

    batches: int = 0
    points: int = 0
    stored: int = 0
    """Of `points`, those the server stored now (not those it had: a batch sent again, steps it holds)."""
    problems: list[str] = field(default_factory=list)
    """Records left out: unreadable ones, and those the server refused (they can never go up)."""
    state: str | None = None
    """The run's state if its end was uploaded."""


def upload(spool: RunSpool, client: Client, run_id: int | str) -> Uploaded:
    """Post a run's spooled records in order, each file removed once acknowledged, then its end.

    One policy for the live sender and `corral sync`: an unreadable record or one the server
    refuses is left out and reported (keeping it would block the run for ever); any other
    error stops the upload with the rest kept, raised to the caller.
    """
    done = Uploaded()
    for path in spool.pending():
        try:
            record = read_record(path)
        except ValueError:
            done.problems.append(f"unreadable record {os.path.basename(path)} left out")
            spool.remove(path)
            continue
        try:
            stored = post_record(client, run_id, record)
        except REJECTED as exc:
            done.problems.append(f"the server refused a {record.get('kind')} record: {exc}")
        else:
            if record.get("kind") == "metrics":
                done.batches += 1
                done.points += int(record.get("points", 0))
                done.stored += stored
        spool.remove(path)
    finish = spool.finish_record()
    if finish is not None:
        run = client.finish_run(run_id, finish.get("state", "finished"), finish.get("end_time"))
        done.state = run.get("state")
        spool.remove_finish()
    return done


def post_record(client: Client, run_id: int | str, record: dict[str, Any],
                on_skipped: Callable[[int], None] | None = None) -> int:
    """Send one record to the server; returns the metric points it stored now.

    A batch it had already (the same batch_id: a spool synced again) stores none, and says so.
    `on_skipped` hears how many points of a metrics record the server skipped (steps not above
    those it holds); by default the first such record of the process is warned about."""
    kind = record.get("kind")
    if kind == "metrics":
        answer = client.log_metrics(run_id, record["batch"])
        carried = int(record.get("points", 0))
        if not isinstance(answer, dict):
            return carried
        if answer.get("skipped"):
            (on_skipped or _warn_skipped)(int(answer["skipped"]))
        return 0 if answer.get("duplicate") else int(answer.get("accepted", carried))
    if kind == "params":
        client.log_params(run_id, record["params"])
    elif kind == "tags":
        client.tag_run(run_id, add=record.get("add", ()), remove=record.get("remove", ()))
    elif kind == "artifacts":
        client.log_artifacts(run_id, record["artifacts"])
    elif kind == "upload":
        try:
            client.upload_artifact(run_id, record["source"], record["name"], type=record.get("type", "file"),
                                   sha256=record.get("sha256"), step=record.get("step"), caption=record.get("caption"))
        except FileNotFoundError:
            raise InvalidRequest("source", f"{record['source']} is gone; artifact {record['name']!r} cannot be uploaded") from None
    else:
        raise ValueError(f"unknown spool record kind {kind!r}")
    return 0


def _warn_skipped(count: int) -> None:
    global _skipped_warned
    if not _skipped_warned:
        _skipped_warned = True
        logging.getLogger("corral.sdk").warning("corral: the server skipped %d points %s", count, SKIPPED_WHY)
