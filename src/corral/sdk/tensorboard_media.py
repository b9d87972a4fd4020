"""Images, histograms, text and hyperparameters in TensorBoard event files, for `corral import-tensorboard`.

Each becomes what the SDK's own media become (corral.sdk.media), an artifact of the run at its step:

    media/<tag>/<step:08d>.png|.jpg   type "image"      Value.image's PNG or JPEG, as written
    media/<tag>/<step:08d>.hist.json  type "histogram"  {"edges": [...], "counts": [...]}
    media/<tag>/<step:08d>.txt        type "text"       UTF-8 (at most 1 MiB)

and the hparams plugin's hyperparameters become the run's config. What is read of `Summary.Value`:

    Value:            tag = 1, image = 4, histo = 5, audio = 6, tensor = 8, metadata = 9
    Image:            encoded_image_string = 4
    HistogramProto:   min = 1, max = 2, bucket_limit = 6, bucket = 7 (doubles, packed)
    SummaryMetadata:  plugin_data = 1 (PluginData: plugin_name = 1, content = 2)
    HParamsPluginData: session_start_info = 3 (SessionStartInfo: hparams = 1, map<string, google.protobuf.Value>)

TF1, tensorboardX and torch.utils.tensorboard write `image` and `histo`; TF2 writes tensors that
its plugin names: "images" (strings: width, height, then each encoded image), "histograms" (k×3
numbers: each bucket's left edge, right edge, count) and "text" (strings). A tag's plugin is named
with its first value only, so a reader remembers it. Audio, images that are neither PNG nor JPEG
(tensorboardX's videos are GIFs) and text over 1 MiB are counted in `skipped`, not imported.
`add_text` appends "/text_summary" to its tag: the key is the tag it was given.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import struct
import tempfile
from collections import Counter
from typing import TYPE_CHECKING, Any, NamedTuple

from corral.sdk.media import DEFAULT_BINS, MAX_BINS, MAX_TEXT_BYTES, image_suffix
from corral.sdk.tensorboard_records import STRING, double, fields, read_records, tensor, text

if TYPE_CHECKING:
    from corral.client import Client
    from corral.sdk.tensorboard_records import Tensor

TEXT_SUFFIX = "/text_summary"  # tensorboardX's and torch's add_text append it to the tag
MAX_FLOAT_INT = 2 ** 53


class Item(NamedTuple):
    """One media value: its key (the path's middle part), type, path suffix and bytes."""

    key: str
    type: str
    suffix: str
    data: bytes


class SummaryValue(NamedTuple):
    """One `Summary.Value` read once, its tensor decoded once: what both its scalar
    (corral.sdk.tensorboard) and its media are made of."""

    tag: str | None
    simple_value: float | None
    tensor: Tensor | None
    """Its tensor (the last written, as every other field here), None where it has none or of a dtype not read."""
    tensor_is_scalar: bool
    """Whether its tensor came after its simple_value: of the two, the one written last is its scalar."""
    parts: dict[int, bytes]
    """image (4), histo (5) and audio (6), as written."""
    plugin: str | None
    content: bytes


def summary_values(summary: bytes) -> list[SummaryValue]:
    """Every `Summary.Value` of a serialized Summary, in order.

    Raises:
        ValueError, IndexError, struct.error: the bytes are not a well-formed Summary.
    """
    found = []
    for number, wire, buf in fields(summary):
        if number != 1 or wire != 2:
            continue
        tag, simple, decoded, from_tensor, plugin, content = None, None, None, False, None, b""
        parts: dict[int, bytes] = {}
        for vnum, vwire, value in fields(buf):
            if vnum == 1 and vwire == 2:
                tag = text(value)
            elif vnum == 2 and vwire == 5:
                simple, from_tensor = struct.unpack("<f", value)[0], False
            elif vnum == 8 and vwire == 2:
                decoded, from_tensor = tensor(value), True
            elif vnum in (4, 5, 6) and vwire == 2:
                parts[vnum] = value
            elif vnum == 9 and vwire == 2:
                plugin, content = plugin_data(value)
        found.append(SummaryValue(tag, simple, decoded, from_tensor, parts, plugin, content))
    return found


class SummaryReader:
    """Reads the media and hyperparameters of one run's summaries, in the order they were written."""

    def __init__(self) -> None:
        self.plugins: dict[str, str] = {}  # tag -> plugin, as its first value named it
        self.hparams: dict[str, Any] = {}
        self.skipped = 0

    def media(self, values: list[SummaryValue]) -> list[Item]:
        """The media values of one Summary (`summary_values`); its hyperparameters go into `hparams`."""
        found: list[Item] = []
        for value in values:
            found += self._value(value)
        return found

    def _value(self, value: SummaryValue) -> list[Item]:
        tag, parts, plugin = value.tag or "", value.parts, value.plugin
        if plugin:
            self.plugins[tag] = plugin
        else:
            plugin = self.plugins.get(tag)
        if 4 in parts:
            return self._image(tag, _encoded_image(parts[4]))
        if 5 in parts:
            return [Item(tag, "histogram", ".hist.json", histogram_json(*_histo(parts[5])))]
        if 6 in parts:
            self.skipped += 1  # audio: not a kind of media corral keeps
            return []
        if plugin == "hparams":
            self.hparams.update(session_hparams(value.content))
            return []
        decoded = value.tensor if plugin in ("images", "histograms", "text") else None
        if decoded is None:
            return []
        if plugin == "text" and decoded.dtype == STRING:
            return self._text(tag, decoded.shape, decoded.values)
        if plugin == "histograms" and decoded.dtype != STRING:
            return [Item(tag, "histogram", ".hist.json", _tensor_histogram(decoded.values))]
        if plugin == "images" and decoded.dtype == STRING:
            images = decoded.values[2:]  # after the width and the height
            if len(images) == 1:
                return self._image(tag, images[0])
            return [item for i, image in enumerate(images) for item in self._image(f"{tag}/{i}", image)]
        return []

    def _image(self, key: str, data: bytes) -> list[Item]:
        suffix = image_suffix(data)
        if suffix is not None:
            return [Item(key, "image", suffix, data)]
        self.skipped += 1
        return []

    def _text(self, tag: str, shape: list[int], values: list[bytes]) -> list[Item]:
        # a tensor of strings: one is the text; a vector its lines; a matrix rows of tab-separated cells
        width = shape[1] if len(shape) == 2 and shape[1] > 0 else 1
        rows = [b"\t".join(values[i:i + width]) for i in range(0, len(values), width)]
        data = b"\n".join(rows).decode("utf-8", "replace").encode("utf-8")
        if len(data) > MAX_TEXT_BYTES:
            self.skipped += 1
            return []
        key = tag[: -len(TEXT_SUFFIX)] if tag.endswith(TEXT_SUFFIX) and len(tag) > len(TEXT_SUFFIX) else tag
        return [Item(key, "text", ".txt", data)]


def plugin_data(metadata: bytes) -> tuple[str | None, bytes]:
    """The plugin a SummaryMetadata names, and its content."""
    for number, wire, value in fields(metadata):
        if number == 1 and wire == 2:
            name, content = _name_and_value(value, bytes)
            return name, content or b""
    return None, b""


def _name_and_value(buf: bytes, value_of: Any) -> tuple[str | None, Any]:
    """Field 1 (text) and field 2 (`value_of` its bytes) of a message: a plugin's name and content, a map's entry."""
    name, item = None, None
    for number, wire, value in fields(buf):
        if number == 1 and wire == 2:
            name = text(value)
        elif number == 2 and wire == 2:
            item = value_of(value)
    return name, item


def _value_plugin(buf: bytes) -> str | None:
    """The plugin a Summary.Value's metadata names, if it names one."""
    for number, wire, value in fields(buf):
        if number == 9 and wire == 2:
            return plugin_data(value)[0]
    return None


def _encoded_image(buf: bytes) -> bytes:
    for number, wire, value in fields(buf):
        if number == 4 and wire == 2:
            return bytes(value)
    return b""


def _histo(buf: bytes) -> tuple[float, float, list[float], list[float]]:
    low = high = 0.0
    limits: list[float] = []
    counts: list[float] = []
    for number, wire, value in fields(buf):
        if number == 1 and wire == 1:
            low = double(value)
        elif number == 2 and wire == 1:
            high = double(value)
        elif number in (6, 7):
            doubles = list(struct.unpack(f"<{len(value) // 8}d", value)) if wire == 2 else [double(value)]
            (limits if number == 6 else counts).extend(doubles)
    return low, high, limits, counts


def histogram_json(low: float, high: float, limits: list[float], counts: list[float]) -> bytes:
    """A HistogramProto as corral's `{"edges", "counts"}`: bucket i holds the values above limit i-1
    up to limit i (the first from `low`, the smallest value). Empty buckets at either end are
    left out: TensorFlow's own end at ±DBL_MAX, and tensorboardX writes an empty one first."""
    counts = counts[: len(limits)]
    nonzero = [i for i, c in enumerate(counts) if c > 0]
    if not nonzero:
        return _json([0.0, 1.0], [0])
    first, last = nonzero[0], nonzero[-1]
    edges = [limits[first - 1] if first > 0 else low] + limits[first:last + 1]
    # an edge out at ±DBL_MAX (TensorFlow's outermost buckets) is where the values stop
    edges = [min(max(e, low), high) if not math.isfinite(e) or abs(e) > 1e300 else e for e in edges]
    return _json(*_even(edges, counts[first:last + 1]))


def _tensor_histogram(values: list[float]) -> bytes:
    """TF2's histogram: rows of (left edge, right edge, count)."""
    rows = [values[i:i + 3] for i in range(0, len(values) - len(values) % 3, 3)]
    if not rows:
        return _json([0.0, 1.0], [0])
    return _json(*_even([rows[0][0]] + [r[1] for r in rows], [r[2] for r in rows]))


def _even(edges: list[float], counts: list[float], bins: int = DEFAULT_BINS) -> tuple[list[float], list[int]]:
    """Buckets of one width, as corral.Histogram makes them and the dashboard draws them: as written
    when they are (numpy's, TF2's), else (TensorFlow's default buckets grow exponentially from 0)
    `bins` of them over the same span, each bucket's count spread evenly across its width, as
    TensorBoard does to draw them (so too for more than corral.Histogram's 512 buckets). The counts
    stay whole numbers with the same sum."""
    low, high = edges[0], edges[-1]
    widths = [b - a for a, b in zip(edges, edges[1:])]
    even = max(widths) - min(widths) <= 1e-3 * (high - low) / len(widths)
    if high <= low or (even and len(widths) <= MAX_BINS):
        return edges, [round(c) for c in counts]
    step = (high - low) / bins
    spread = [0.0] * bins
    for (left, right), count in zip(zip(edges, edges[1:]), counts):
        if right <= left:  # a bucket of no width (every value the same) falls in one bin
            spread[min(int((left - low) / step), bins - 1)] += count
            continue
        first, last = min(int((left - low) / step), bins - 1), min(int((right - low) / step), bins - 1)
        for i in range(first, last + 1):
            overlap = min(right, low + (i + 1) * step) - max(left, low + i * step)
            if overlap > 0:
                spread[i] += count * overlap / (right - left)
    # whole counts with the same total: the running sum rounded, each bin what it adds (a bucket of
    # 3 values spread over 30 bins puts a 1 in every 10th, not 3 in a row)
    whole, running, before = [], 0.0, 0
    for share in spread:
        running += share
        whole.append(round(running) - before)
        before = round(running)
    return [low + i * step for i in range(bins)] + [high], whole


def _json(edges: list[float], counts: list[int]) -> bytes:
    edges = [float(e) if math.isfinite(e) else 0.0 for e in edges]
    return json.dumps({"edges": edges, "counts": counts}).encode()


# -- hyperparameters ------------------------------------------------------------------------------


def session_hparams(content: bytes) -> dict[str, Any]:
    """The hyperparameters of an HParamsPluginData's session_start_info ({} for its other kinds)."""
    found: dict[str, Any] = {}
    for number, wire, value in fields(content):
        if number == 3 and wire == 2:
            for snum, swire, entry in fields(value):
                if snum == 1 and swire == 2:
                    key, item = _map_entry(entry)
                    found[key] = item
    return found


def _map_entry(buf: bytes) -> tuple[str, Any]:
    key, item = _name_and_value(buf, _protobuf_value)
    return key or "", item


def _protobuf_value(buf: bytes) -> Any:
    """A google.protobuf.Value: null 1, number 2, string 3, bool 4, struct 5, list 6."""
    for number, wire, value in fields(buf):
        if number == 2 and wire == 1:
            number_value = double(value)
            if not math.isfinite(number_value):
                return repr(number_value)  # "nan", "inf": JSON has no such numbers
            # TensorBoard keeps every number as a double: a batch size of 32 comes back 32, not 32.0
            return int(number_value) if number_value.is_integer() and abs(number_value) < MAX_FLOAT_INT else number_value
        if number == 3 and wire == 2:
            return text(value)
        if number == 4 and wire == 0:
            return bool(value)
        if number == 5 and wire == 2:
            return dict(_map_entry(entry) for enum, ewire, entry in fields(value) if enum == 1 and ewire == 2)
        if number == 6 and wire == 2:
            return [_protobuf_value(item) for inum, iwire, item in fields(value) if inum == 1 and iwire == 2]
    return None


def starts_hparams_session(path: str, events: int = 8) -> bool:
    """Whether the event file opens with an hparams session, as the directory that tensorboardX's and
    torch's `add_hparams` make beside the writer's own files does (within its first `events` events)."""
    for index, (_, data) in enumerate(read_records(path)):
        if index >= events:
            return False
        for number, wire, summary in fields(data):
            if number == 5 and wire == 2:
                for vnum, vwire, value in fields(summary):
                    if vnum == 1 and vwire == 2 and _value_plugin(value) == "hparams":
                        return True
    return False


# -- upload ---------------------------------------------------------------------------------------


class Pending(NamedTuple):
    type: str
    step: int
    sha256: str
    size: int


class MediaUploads:
    """The media of one run as read, kept in a temporary directory, then uploaded: those the run holds
    already, at the same path with the same bytes, are not sent again. A key's step that repeats or
    goes back (a requeued job resumed from an older checkpoint) replaces what the key had from that
    step on, as it does for scalars (corral.sdk.tensorboard.keep_resumed)."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="corral-tb-media-")
        self.pending: dict[str, Pending] = {}
        self._written: dict[str, list[tuple[int, str]]] = {}  # key -> (step, path), in step order

    def add(self, step: int, item: Item) -> None:
        key = media_key(item.key)
        path = f"media/{key}/{step:08d}{item.suffix}"
        written = self._written.setdefault(key, [])
        while written and written[-1][0] >= step:
            self.pending.pop(written.pop()[1], None)
        written.append((step, path))
        sha = hashlib.sha256(item.data).hexdigest()
        file = os.path.join(self._dir, sha)
        if not os.path.exists(file):  # the same bytes at many steps (a constant image) are kept once
            with open(file, "wb") as f:
                f.write(item.data)
        self.pending[path] = Pending(item.type, step, sha, len(item.data))

    def counts(self) -> dict[str, int]:
        """How many of each type."""
        return dict(Counter(pending.type for pending in self.pending.values()))

    def upload(self, client: Client, run_id: int) -> int:
        """Upload what the run does not hold yet; how many were sent."""
        held = {a["path"]: a.get("sha256") for a in client.artifacts(run_id)}
        sent = 0
        for path, pending in sorted(self.pending.items()):
            if held.get(path) == pending.sha256:
                continue
            client.upload_artifact(run_id, os.path.join(self._dir, pending.sha256), path, type=pending.type,
                                   sha256=pending.sha256, step=pending.step)
            sent += 1
        return sent

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> MediaUploads:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def media_key(tag: str) -> str:
    """A tag as the middle of an artifact path: its parts without empty ones, `.`, `..`, backslashes or
    control characters (TensorBoard allows them in tags; an artifact name does not)."""
    parts = []
    for part in tag.replace("\\", "/").split("/"):
        part = "".join(c if c.isprintable() else "_" for c in part)
        if part in (".", ".."):
            part = part.replace(".", "_")
        if part:
            parts.append(part)
    return "/".join(parts) or "_"

