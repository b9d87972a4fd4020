"""The local backend: each job under its own supervisor process on this machine.

`backend.py` holds `LocalBackend` and the `KIND` the registry opens; `settings.py` what every job is
launched with; `owners.py` the account each job runs as; `supervisors.py` what the backend keeps of the
supervisors it spawned.
"""

from corral.backends.local.backend import LocalBackend
from corral.backends.local.settings import LaunchSettings

__all__ = ["LaunchSettings", "LocalBackend"]
