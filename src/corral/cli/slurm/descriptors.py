"""Writing to a descriptor that may be non-blocking (a terminal another program shares), as srun's relays do."""

from __future__ import annotations

import os
import select


def write_all(fd: int, data: bytes) -> None:
    """All of `data`, waiting for room when the descriptor has none."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])
