"""What a job writes and how its user reaches it (`JobOutput`): windows of its stdout and stderr, read only
from its owner's regular files (`corral.server.log_window`), and the socket of an interactive job's terminal.
"""

from __future__ import annotations

from corral.backends.base import Backend
from corral.core.jobspec.job import Job
from corral.core.jobspec.states import JobState
from corral.errors import Conflict, Forbidden, InvalidRequest
from corral.server.accounts import uid_of
from corral.server.log_window import read_log_window
from corral.server.queries import JobQueries


class JobOutput:
    def __init__(self, backend: Backend, queries: JobQueries, *, server_user: str) -> None:
        """`server_user`: the server's own user, whose jobs' files are read unchecked."""
        self.backend = backend
        self.queries = queries
        self.server_user = server_user

    def owner_uid(self, job: Job) -> int | None:
        """Whose a job's log files must be for the server to show them (None: its own user's job, no check)."""
        if job.spec.user == self.server_user:
            return None
        uid = uid_of(job.spec.user)
        return -1 if uid is None else uid  # an account that is gone owns no file: show nothing

    def read_log(self, ref: str, stream: str, offset: int, limit: int, tail: int | None) -> tuple[bytes, int, Job]:
        """A chunk of a job's stdout or stderr from `offset` (or its last `tail` lines); returns the next offset."""
        if stream not in ("stdout", "stderr"):
            raise InvalidRequest("stream", f"must be stdout or stderr, got {stream!r}")
        if offset < 0:
            raise InvalidRequest("offset", "must not be negative")
        job = self.queries.resolve(ref)
        if job.state is JobState.PENDING:
            return b"", 0, job
        data, end = read_log_window(job, stream, offset, limit, tail, self.owner_uid(job), ref)
        return data, end, job

    def terminal(self, ref: str, user: str, admin: bool) -> str:
        """Where the client of interactive job `ref` (srun, salloc) connects: its owner, or an admin.

        Raises:
            NotFound; Forbidden: another user; Conflict: not interactive, or not running.
        """
        job = self.queries.resolve(ref)
        if user != job.spec.user and not admin:
            raise Forbidden(f"job {ref} is {job.spec.user}'s: only its owner (or an admin) may connect to its terminal")
        terminals = self.backend.terminals
        if job.spec.interactive is None or terminals is None:
            raise Conflict(f"job {ref} is a batch job; it has no terminal (follow its output with corral logs -f)")
        if job.state is not JobState.RUNNING:
            raise Conflict(f"job {ref} is {job.state.value}; its terminal is open only while it runs")
        return terminals.terminal_socket(job.id)
