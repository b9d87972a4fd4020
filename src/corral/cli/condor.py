"""What `corral submit --condor` does on the submitting side, as the user: read the files a
`queue ... from FILE` or `queue ... matching GLOB` names, and write the submit events of the
job event log (`log = job.log`)."""

from __future__ import annotations

import glob
import os
import time
from typing import Any

from corral.errors import CorralError


def resolve_items(text: str, base_dir: str) -> str:
    """The submit file with its queue's file and glob items listed inline, read from `base_dir`."""
    from corral.core.dialects.htcondor_submit_file import resolve_queue

    def read_file(name: str) -> str:
        path = os.path.join(base_dir, name)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not a text file"
            raise CorralError(f"queue ... from {name}: cannot read {path}: {reason}") from None

    def list_matching(patterns: list[str], kind: str | None) -> list[str]:
        found: set[str] = set()
        for pattern in patterns:
            for match in glob.glob(pattern, root_dir=base_dir):
                is_dir = os.path.isdir(os.path.join(base_dir, match))
                if kind is None or (kind == "dirs") == is_dir:
                    found.add(match)
        return sorted(found)

    return resolve_queue(text, read_file, list_matching)


def write_submitted(job: dict[str, Any]) -> str | None:
    """Write the submit events of a job from a submit file with `log`; a warning if that failed."""
    pattern = job.get("user_log")
    if not pattern:
        return None
    from corral.core.jobspec.arrays import parse_array
    from corral.core.jobspec.paths import expand_pattern
    from corral.executor import condor_log

    path = expand_pattern(pattern, job_id=int(job["id"]), name=str(job.get("name", "")),
                          user=str(job.get("user", "")), node="", workdir=str(job.get("workdir") or "/"))
    procs = list(parse_array(job["array"]).task_ids) if job.get("array") else [0]
    try:
        condor_log.append_submitted(path, int(job["id"]), procs, time.time())
    except OSError as exc:
        return f"cannot write the HTCondor event log {path}: {exc.strerror or exc}"
    return None
