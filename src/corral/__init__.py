"""corral: run GPU training jobs, and track them.

    import corral
    run = corral.init(project="mnist", config=args)
    run.log({"loss": loss}, step=step)
    run.finish()

`import corral` stays light (the CLI and every job's supervisor import it): the SDK
(`corral.init`, `corral.Run`, `corral.log`, `corral.finish`, and the media `corral.Image`, `corral.Histogram`,
`corral.Text`, `corral.Table`) and the Python client
(`corral.Client`) load on first use.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing would cost every CLI call ~10 ms

__version__ = "0.1.0"
__all__ = ["Client", "Histogram", "Image", "Run", "Table", "Text", "finish", "init", "log", "__version__"]

if TYPE_CHECKING:
    from typing import Any

    from corral.client import Client
    from corral.sdk.media import Histogram, Image, Table, Text
    from corral.sdk.open_runs import finish, log
    from corral.sdk.run import Run
    from corral.sdk.start import init

_CURRENT_RUN_NAMES = frozenset({"finish", "log"})
_MEDIA_NAMES = frozenset({"Histogram", "Image", "Table", "Text"})


def __getattr__(name: str) -> Any:
    if name == "Client":
        from corral.client import Client

        value: Any = Client
    elif name in _MEDIA_NAMES:
        from corral.sdk import media

        value = getattr(media, name)
    elif name == "Run":
        from corral.sdk.run import Run

        value = Run
    elif name == "init":
        from corral.sdk.start import init

        value = init
    elif name in _CURRENT_RUN_NAMES:
        from corral.sdk import open_runs

        value = getattr(open_runs, name)
    else:
        raise AttributeError(f"module 'corral' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value
