"""A window of a job's stdout or stderr, read with the server's rights but only from its owner's regular files."""

from __future__ import annotations

from corral.core.jobspec.job import Job
from corral.errors import Forbidden
from corral.executor import logs


def read_log_window(job: Job, stream: str, offset: int, limit: int, tail: int | None, owner_uid: int | None,
                    ref: str) -> tuple[bytes, int]:
    """The bytes from `offset` (at most `limit`), or the last `tail` lines, and the offset after them.

    Args:
        owner_uid: whose the file must be (None: no check, the server's own job).
        ref: the job as the caller named it, for the error.

    Raises:
        Forbidden: the log is not a regular file of the job's owner.
    """
    path = job.log_path(stream)
    try:
        if tail is not None:
            return logs.read_last_lines(path, owner_uid, tail)
        return logs.read_range(path, owner_uid, offset, limit)
    except PermissionError:
        # The server reads with its own rights: a job may not name someone else's file (or a link
        # to /etc/shadow, or a FIFO that would hang the server) as its log and have it handed over.
        raise Forbidden(f"the {stream} of job {ref} ({path}) is not a regular file that belongs "
                        f"to {job.spec.user}; corral shows only logs the job's owner owns") from None
    except FileNotFoundError:
        return b"", offset
