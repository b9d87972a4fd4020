"""Media logged with `run.log`: images and histograms, stored as the run's artifacts by step.

    run.log({"samples": corral.Image(batch[0], caption="epoch 3"),
             "weights": corral.Histogram(model.fc.weight)}, step=step)

Each is made into bytes in the run's background thread (`encode`), never in the training loop,
and uploaded as `media/<key>/<step>.png` (type "image") or `media/<key>/<step>.hist.json` (type
"histogram", `{"edges": [...], "counts": [...]}`). The constructor copies what it is given (an
array changed in place later does not change what is logged). No Pillow, no matplotlib: PNG is
written with zlib, the standard library's.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from typing import Any

MAX_CAPTION = 1000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Media:
    """What `run.log` uploads as an artifact rather than stores as a number."""

    type: str = "media"
    suffix: str = ""
    caption: str | None = None

    def encode(self) -> bytes:
        raise NotImplementedError


class Image(Media):
    """An image: an array (H×W grey, H×W×3 RGB, H×W×4 RGBA; uint8, or floats in [0, 1]; a
    C×H×W torch tensor too) or the path of a PNG or JPEG file."""

    type = "image"

    def __init__(self, data: Any, caption: str | None = None) -> None:
        if caption is not None and (not isinstance(caption, str) or len(caption) > MAX_CAPTION):
            raise ValueError(f"caption must be text of at most {MAX_CAPTION} characters")
        self.caption = caption
        if isinstance(data, (str, os.PathLike)):
            with open(data, "rb") as f:
                self._file: bytes | None = f.read()
            self._pixels = None
            self.suffix = ".png" if self._file.startswith(PNG_SIGNATURE) else ".jpg"
            if not self._file.startswith((PNG_SIGNATURE, b"\xff\xd8")):
                raise ValueError(f"{data} is not a PNG or JPEG file")
        else:
            self._file = None
            self._pixels = _pixels(data)
            self.suffix = ".png"

    def encode(self) -> bytes:
        if self._file is not None:
            return self._file
        assert self._pixels is not None
        return png(self._pixels)


class Histogram(Media):
    """The distribution of `values` (any array, a tensor, a list) in `bins` equal bins."""

    type = "histogram"
    suffix = ".hist.json"

    def __init__(self, values: Any, bins: int = 64) -> None:
        import numpy as np

        array = _numpy(values).astype(np.float64).ravel()
        array = array[np.isfinite(array)]
        if not 1 <= int(bins) <= 512:
            raise ValueError("bins must be from 1 to 512")
        counts, edges = np.histogram(array, bins=int(bins)) if array.size else (np.zeros(int(bins)), np.linspace(0, 1, int(bins) + 1))
        self.counts = [int(c) for c in counts]
        self.edges = [float(e) for e in edges]

    def encode(self) -> bytes:
        return json.dumps({"edges": self.edges, "counts": self.counts}).encode()


def _numpy(data: Any) -> Any:
    import numpy as np

    detach = getattr(data, "detach", None)
    if detach is not None:  # a torch tensor: to the CPU, off the autograd graph
        data = detach().cpu().numpy()
    return np.array(data, copy=True)


def _pixels(data: Any) -> Any:
    """An H×W×C uint8 copy of an image array (C: 1, 3 or 4)."""
    import numpy as np

    array = _numpy(data)
    if array.ndim == 3 and array.shape[0] in (1, 3, 4) and array.shape[2] not in (1, 3, 4):
        array = np.transpose(array, (1, 2, 0))  # C×H×W, as torch keeps images
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or array.shape[2] not in (1, 3, 4) or not array.shape[0] or not array.shape[1]:
        raise ValueError(f"an image is H×W, H×W×3 or H×W×4 (or C×H×W); got shape {array.shape}")
    if array.dtype.kind == "f":  # floats are [0, 1]
        array = (np.clip(np.nan_to_num(array.astype(np.float64)), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    elif array.dtype != np.uint8:  # integers (and booleans) are [0, 255]
        array = np.clip(array.astype(np.int64), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(array)


def png(pixels: Any) -> bytes:
    """A PNG of an H×W×C uint8 array (C: 1 grey, 3 RGB, 4 RGBA), 8 bits per channel."""
    height, width, channels = pixels.shape
    color = {1: 0, 3: 2, 4: 6}[channels]
    rows = b"".join(b"\x00" + pixels[y].tobytes() for y in range(height))  # filter 0 on every row

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b"")
