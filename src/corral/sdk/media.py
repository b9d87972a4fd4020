"""Media logged with `run.log`: images, histograms, text and tables, stored as the run's artifacts by step.

    run.log({"samples": corral.Image(batch[0], caption="epoch 3"),
             "weights": corral.Histogram(model.fc.weight),
             "generated": corral.Text(decoded),
             "predictions": corral.Table(columns=["input", "label", "score"], data=rows)}, step=step)

Each is made into bytes in the run's background thread (`encode`), never in the training loop,
and uploaded as `media/<key>/<step:08d>` plus a suffix that says its type:

    .png or .jpg   type "image"
    .hist.json     type "histogram", `{"edges": [...], "counts": [...]}`
    .txt           type "text", UTF-8
    .table.json    type "table", `{"columns": [str, ...], "rows": [[cell, ...], ...]}`; a cell is a
                   number, a string, a bool or null

The constructor copies what it is given (an array changed in place later does not change what is
logged) and checks the limits, so a mistake is raised where it was made. No Pillow, no matplotlib:
PNG is written with zlib, the standard library's.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import struct
import zlib
from typing import Any

MAX_CAPTION = 1000
MAX_TEXT_BYTES = 1 << 20
MAX_TABLE_COLUMNS = 100
MAX_TABLE_ROWS = 10_000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8"
DEFAULT_BINS = 64
MAX_BINS = 512


def image_suffix(data: bytes) -> str | None:
    """`.png` or `.jpg` for an encoded image's bytes; None: neither."""
    if data.startswith(PNG_SIGNATURE):
        return ".png"
    return ".jpg" if data.startswith(JPEG_SIGNATURE) else None


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
        self.caption = _caption(caption)
        if isinstance(data, (str, os.PathLike)):
            with open(data, "rb") as f:
                self._file: bytes | None = f.read()
            self._pixels = None
            suffix = image_suffix(self._file)
            if suffix is None:
                raise ValueError(f"{data} is not a PNG or JPEG file")
            self.suffix = suffix
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

    def __init__(self, values: Any, bins: int = DEFAULT_BINS) -> None:
        import numpy as np

        array = _numpy(values).astype(np.float64).ravel()
        array = array[np.isfinite(array)]
        if not 1 <= int(bins) <= MAX_BINS:
            raise ValueError(f"bins must be from 1 to {MAX_BINS}")
        counts, edges = np.histogram(array, bins=int(bins)) if array.size else (np.zeros(int(bins)), np.linspace(0, 1, int(bins) + 1))
        self.counts = [int(c) for c in counts]
        self.edges = [float(e) for e in edges]

    def encode(self) -> bytes:
        return json.dumps({"edges": self.edges, "counts": self.counts}).encode()


class Text(Media):
    """Text (a generated sample, a report): a str of at most 1 MiB in UTF-8."""

    type = "text"
    suffix = ".txt"

    def __init__(self, text: str, caption: str | None = None) -> None:
        if not isinstance(text, str):
            raise ValueError(f"corral.Text takes a str, not {type(text).__name__}")
        try:
            self._data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"the text cannot be written as UTF-8 ({exc.reason} at character {exc.start})") from None
        if len(self._data) > MAX_TEXT_BYTES:
            raise ValueError(f"the text is {len(self._data):,} bytes in UTF-8; corral.Text holds at most 1 MiB "
                             f"({MAX_TEXT_BYTES:,} bytes): log a shorter excerpt, or the file with run.log_artifact")
        self.caption = _caption(caption)

    def encode(self) -> bytes:
        return self._data


class Table(Media):
    """Rows under named columns: `Table(columns=["a", "b"], data=[[1, "x"], [2, "y"]])`, or a pandas
    DataFrame (`Table(df)`, `Table(dataframe=df)`): at most 100 columns and 10,000 rows.

    A cell is kept as a number, a string, a bool or None; NaN and infinities become None, numpy's
    scalars Python's, and anything else its `str()`.
    """

    type = "table"
    suffix = ".table.json"

    def __init__(self, columns: Any = None, data: Any = None, *, dataframe: Any = None,
                 caption: str | None = None) -> None:
        frames = [x for x in (columns, data, dataframe) if _is_frame(x)]
        if frames:
            if len(frames) > 1 or sum(x is not None for x in (columns, data, dataframe)) > 1:
                raise ValueError("give a table either as a DataFrame or as columns= and data=, not both")
            frame = frames[0]
            columns, data = list(frame.columns), frame.values.tolist()
        elif dataframe is not None:
            raise ValueError(f"dataframe must be a pandas DataFrame (with .columns and .values), "
                             f"not {type(dataframe).__name__}")
        if columns is None or isinstance(columns, (str, bytes)):
            raise ValueError("columns must be the list of the table's column names, e.g. columns=['input', 'score']")
        self.columns = [str(c) for c in columns]
        if len(self.columns) > MAX_TABLE_COLUMNS:
            raise ValueError(f"the table has {len(self.columns):,} columns; corral.Table holds at most "
                             f"{MAX_TABLE_COLUMNS} columns")
        if hasattr(data, "tolist") and not isinstance(data, (list, tuple)):
            data = data.tolist()  # a 2-D numpy array
        rows = [] if data is None else list(data)
        if len(rows) > MAX_TABLE_ROWS:
            raise ValueError(f"the table has {len(rows):,} rows; corral.Table holds at most {MAX_TABLE_ROWS:,} rows: "
                             "log a sample of them")
        self.rows: list[list[Any]] = []
        for index, row in enumerate(rows):
            if isinstance(row, (str, bytes)) or not hasattr(row, "__len__") or len(row) != len(self.columns):
                raise ValueError(f"row {index} of the table must be a list of {len(self.columns)} cells "
                                 f"(one for each column), not {row!r:.80}")
            self.rows.append(list(row))  # a copy: the caller's rows may change before the background thread reads them
        self.caption = _caption(caption)

    def encode(self) -> bytes:
        table = {"columns": self.columns, "rows": [[_cell(c) for c in row] for row in self.rows]}
        return json.dumps(table, ensure_ascii=False, allow_nan=False).encode("utf-8")


def _is_frame(value: Any) -> bool:
    """A pandas DataFrame, or anything shaped like one (pandas is not imported for it)."""
    return hasattr(value, "columns") and hasattr(getattr(value, "values", None), "tolist")


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, numbers.Integral):  # numpy's integers too
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else None
    if type(value).__name__ in ("NAType", "NaTType"):  # pandas' missing values
        return None
    item = getattr(value, "item", None)  # numpy's bool_, a one-element tensor
    if callable(item):
        try:
            plain = item()
        except (TypeError, ValueError):
            return str(value)
        if plain is None or isinstance(plain, (str, bool, numbers.Real)):
            return _cell(plain)
    return str(value)


def _caption(caption: str | None) -> str | None:
    if caption is not None and (not isinstance(caption, str) or len(caption) > MAX_CAPTION):
        raise ValueError(f"caption must be text of at most {MAX_CAPTION} characters")
    return caption


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
