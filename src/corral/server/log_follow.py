"""Following a job's logs as they grow (the event stream's `log` events), through the one log-window reader
(`corral.executor.logs`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from corral.executor.logs import MAX_FOLLOW, LogText, follow, size_of

if TYPE_CHECKING:
    from corral.core.jobspec.job import Job
    from corral.server.service import JobService

MAX_LOG_TEXT = MAX_FOLLOW  # bytes of log text one read returns at most


class LogFollower:
    """Where each of a job's logs was last read, and what was written to it since. Reads block: call them off
    the event loop (a log on a stalled network filesystem must not stop the server)."""

    def __init__(self, paths: Mapping[str, str], owner_uid: int | None = None) -> None:
        self.paths = dict(paths)
        self.owner_uid = owner_uid  # whose the files must be to be shown (JobService.log_owner_uid)
        self.offsets = dict.fromkeys(self.paths, 0)

    @classmethod
    def of_job(cls, service: JobService, job: Job) -> LogFollower:
        """`job`'s stdout and stderr (one stream when both go to one file), read from their start."""
        paths = {stream: job.log_path(stream) for stream in ("stdout", "stderr")}
        if paths["stderr"] == paths["stdout"]:
            del paths["stderr"]
        return cls(paths, service.log_owner_uid(job))

    def skip_to_end(self) -> None:
        """Follow from what each log holds now on."""
        self.offsets = {stream: size_of(path) for stream, path in self.paths.items()}

    def read(self, stream: str) -> LogText | None:
        """The new text of `stream` since the last read, in whole lines where there are any (None: nothing new)."""
        text, self.offsets[stream] = follow(stream, self.paths[stream], self.offsets[stream], self.owner_uid)
        return text
