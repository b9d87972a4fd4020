"""The frames an interactive job's terminal speaks over its socket, between `srun`/`salloc` (the client)
and the job's supervisor: a kind byte and a length, then the payload.

Pure and small: both ends import it, and `srun` starts on the CLI's quick path.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct(">BI")
MAX_PAYLOAD = 1 << 20  # the supervisor sends bursts of at most 256 KB

# from the client
HELLO = ord("h")  # rows, cols (>HH): the first frame; the job starts after it
STDIN = ord("i")
STDIN_EOF = ord("e")
WINSIZE = ord("w")  # rows, cols (>HH)
SIGNAL = ord("s")  # signal number (>B), for a job without a terminal (srun without --pty)
# from the supervisor
STDOUT = ord("o")
STDERR = ord("r")
NOTICE = ord("n")  # a line of srun's own (a warning, a stop), for the client's stderr
EXIT = ord("x")  # the job's exit status (>i)

SIZE = struct.Struct(">HH")
STATUS = struct.Struct(">i")


def frame(kind: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


class Reader:
    """Frames out of a byte stream, as its bytes arrive in pieces of any size."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """The whole frames `data` completes.

        Raises:
            ValueError: a frame longer than MAX_PAYLOAD (not a peer of ours).
        """
        buffer = self.buffer
        buffer += data
        out = []
        at = 0
        while len(buffer) - at >= HEADER.size:
            kind, length = HEADER.unpack_from(buffer, at)
            if length > MAX_PAYLOAD:
                raise ValueError(f"a terminal frame of {length} bytes")
            end = at + HEADER.size + length
            if len(buffer) < end:
                break
            out.append((kind, bytes(buffer[at + HEADER.size:end])))
            at = end
        del buffer[:at]  # once: a burst of frames costs one move, not one per frame
        return out
