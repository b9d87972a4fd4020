"""Checking the body of a cancel of many jobs (`POST /api/v1/jobs/cancel`): `corral cancel 14 15 16`, scancel's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corral.errors import InvalidRequest

MAX_REFS = 100_000
"""Jobs one request may name: scancel -u of a user with a long queue sends all of theirs at once."""


@dataclass(frozen=True)
class CancelRequest:
    refs: tuple[str, ...]
    """What to cancel, as people name jobs: `12`, or `12_3` for task 3 of array 12 (an array: all its tasks)."""
    pending_only: bool = False
    """Leave what runs running: only pending jobs, and arrays' tasks not started (scancel --state=PENDING)."""


def parse_cancel_request(body: dict[str, Any]) -> CancelRequest:
    """Raises InvalidRequest naming the field at fault (nothing is cancelled then)."""
    unknown = sorted(set(body) - {"jobs", "pending_only"})
    if unknown:
        raise InvalidRequest(unknown[0], "unknown field", "a cancel takes jobs and pending_only")
    refs = body.get("jobs")
    if not isinstance(refs, list) or not refs:
        raise InvalidRequest("jobs", "must be a non-empty list of job ids", 'e.g. {"jobs": ["14", "15", "21_3"]}')
    if len(refs) > MAX_REFS:
        raise InvalidRequest("jobs", f"names {len(refs)} jobs, more than {MAX_REFS:,}", "cancel them in parts")
    for index, ref in enumerate(refs):
        if not _is_ref(ref):
            raise InvalidRequest(f"jobs[{index}]", f"{ref!r} is not a job id", "write 12, or 12_3 for task 3 of array 12")
    pending_only = body.get("pending_only", False)
    if not isinstance(pending_only, bool):
        raise InvalidRequest("pending_only", f"must be true or false, got {pending_only!r}")
    return CancelRequest(tuple(refs), pending_only)


def _is_ref(ref: object) -> bool:
    """`12` or `12_3`, as the single job routes take them (`corral.api.jobs.JobRef`); whether it exists is the service's."""
    if not isinstance(ref, str):
        return False
    head, underscore, task = ref.partition("_")
    return _digits(head) and (not underscore or _digits(task))


def _digits(text: str) -> bool:
    return 0 < len(text) <= 10 and text.isascii() and text.isdigit()
