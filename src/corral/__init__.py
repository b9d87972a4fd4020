"""corral: run GPU training jobs.

`import corral` stays light (the CLI and every job's supervisor import it);
the Python client loads on first use: `corral.Client`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Client", "__version__"]

if TYPE_CHECKING:
    from corral.client import Client


def __getattr__(name: str) -> Any:
    if name == "Client":
        from corral.client import Client

        return Client
    raise AttributeError(f"module 'corral' has no attribute {name!r}")
