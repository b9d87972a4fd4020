"""What the job service was started with: whose server it is, where logs go, what it takes.

One frozen value that the composition root (`corral.compose.serve`) builds and the service only reads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from corral.core.access.identity import AccessPolicy
from corral.core.jobspec.spec import DEFAULT_MAX_SCRIPT_MB
from corral.core.scheduling.sharing import SharingSettings
from corral.home import HomeLayout
from corral.monitor.channels.notification import SmtpSettings


@dataclass(frozen=True)
class ServiceSettings:
    """`user`: the server's own user, whose jobs these are unless a submit names another (the caller);
    `server_env`: the server's environment, which its own user's jobs inherit; `access`: accounts and admins;
    `user_log_dir`: where a user's logs go by default (else `<home>/logs`); `isolation`: how jobs are held
    apart (the mode, "cgroup v1", and a sentence of what it guarantees); `max_script_mb`: the largest batch
    script taken ([server] max_script_mb)."""

    home: str
    user: str
    server_env: Mapping[str, str]
    access: AccessPolicy = field(default_factory=AccessPolicy)
    user_log_dir: Callable[[str], str] | None = None
    isolation: tuple[str, str] = ("none", "")
    max_script_mb: int = DEFAULT_MAX_SCRIPT_MB
    smtp: SmtpSettings | None = None
    """The mail relay jobs' --mail-type mails go through (`[smtp]`); None: no mail is sent."""
    outside_processes: str = "avoid"
    """`[node] outside_processes`: what the scheduler does with a GPU a process outside corral uses
    (`corral.core.monitoring.outside_use`: avoid, ignore or share)."""
    sharing: SharingSettings = field(default_factory=SharingSettings)
    """`[node] shards_per_gpu`, `gpu_share_over_budget`, `gpu_share_grace_s` (`corral.core.scheduling.sharing`)."""

    @property
    def log_dir(self) -> str:
        """The server's own log directory, `<home>/logs`."""
        return HomeLayout(self.home).logs

    def log_dir_of(self, user: str) -> str:
        """Where `user`'s logs go unless the job says."""
        return self.log_dir if self.user_log_dir is None else self.user_log_dir(user)

    def checkpoint_dir(self, job_id: int) -> str:
        return HomeLayout(os.path.dirname(self.log_dir)).checkpoint_dir(job_id)
