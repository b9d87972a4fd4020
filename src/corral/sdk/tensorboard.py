"""Read scalars from TensorBoard event files and import them as corral runs.

Neither TensorFlow nor TensorBoard is needed: an event file is a TFRecord stream (u64 length,
u32 masked CRC-32C of the length, the data, u32 masked CRC-32C of the data), and each record is a
serialized `Event` protobuf, of which only a few fields matter here:

    Event:        wall_time = 1 (double), step = 2 (int64), summary = 5 (Summary)
    Summary:      value = 1 (repeated Value)
    Value:        tag = 1 (string), simple_value = 2 (float), tensor = 8 (TensorProto)
    TensorProto:  dtype = 1, tensor_content = 4, float_val = 5, double_val = 6, int_val = 7,
                  int64_val = 10, half_val = 13

TF1 (and tensorboardX) write `simple_value`; TF2's `tf.summary.scalar` writes a one-element tensor.

    from corral import Client
    from corral.sdk.tensorboard import import_tensorboard, read_scalars
    read_scalars("runs/exp1/events.out.tfevents.1700000000.host")   # {"loss": [(step, wall_time, value), ...]}
    import_tensorboard("runs/", client=Client(), project="imported")
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.client import Client

Scalars = dict[str, list[tuple[int, float, float]]]

# Points per POST: far under the server's 1,000,000, and small enough that a retried batch is cheap.
BATCH_POINTS = 50_000
EVENT_FILE_MARK = "tfevents"

_CRC32C_POLY = 0x82F63B78  # Castagnoli, reflected


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC32C_POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def _crc32c(data: bytes | memoryview) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | memoryview) -> int:
    """TFRecord's checksum: CRC-32C rotated and offset, so a CRC of CRCs is not itself a CRC."""
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# -- TFRecord framing -----------------------------------------------------------------------------


def read_records(path: str) -> Iterator[tuple[int, bytes]]:
    """Yield `(offset, data)` for each whole record of a TFRecord file.

    A truncated tail or a corrupt length ends the file (nothing after it can be framed) and a record
    whose data fails its checksum is skipped; either way with a warning, after every whole record.
    """
    with open(path, "rb") as f:
        blob = f.read()
    offset, end = 0, len(blob)
    while offset < end:
        if end - offset < 12:
            _warn(path, offset, "truncated record header")
            return
        header = blob[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack_from("<I", blob, offset + 8)
        if masked_crc32c(header) != length_crc:
            _warn(path, offset, "corrupt record length")
            return
        data_end = offset + 12 + length
        if data_end + 4 > end:
            _warn(path, offset, "truncated record")
            return
        data = blob[offset + 12:data_end]
        (data_crc,) = struct.unpack_from("<I", blob, data_end)
        if masked_crc32c(data) == data_crc:
            yield offset, data
        else:
            _warn(path, offset, "record fails its checksum, skipped")
        offset = data_end + 4


def _warn(path: str, offset: int, what: str) -> None:
    warnings.warn(f"{path}: {what} at byte {offset}; the records before it were read", stacklevel=3)


# -- protobuf, the little that events need --------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """Yield `(field number, wire type, value)`: int for varints and fixed widths, bytes otherwise."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value = buf[pos:pos + 8]
            pos += 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value = buf[pos:pos + size]
            pos += size
        elif wire == 5:
            value = buf[pos:pos + 4]
            pos += 4
        else:  # groups (3, 4) are not in any message read here
            raise ValueError(f"unsupported wire type {wire}")
        if pos > end:
            raise ValueError("field runs past the end of its message")
        yield number, wire, value


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _bfloat16(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]


def _half(bits: int) -> float:
    return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]


# TensorFlow dtype → (struct code of tensor_content, its repeated field, decoder of a varint element;
# None for the fixed-width float and double fields)
_FLOAT, _DOUBLE, _INT32, _INT64, _BFLOAT16, _HALF = 1, 2, 3, 9, 14, 19
_DTYPES: dict[int, tuple[str, int, Any]] = {
    _FLOAT: ("f", 5, None),
    _DOUBLE: ("d", 6, None),
    _INT32: ("i", 7, _int32),
    _INT64: ("q", 10, _int64),
    _BFLOAT16: ("H", 13, _bfloat16),
    _HALF: ("e", 13, _half),
}


def _repeated(wire: int, value: Any, scalar_code: str | None, element: Any) -> list[float]:
    """Elements of a repeated numeric field, packed (one length-delimited run) or not."""
    if scalar_code is not None:  # fixed-width floats
        size = struct.calcsize(scalar_code)
        if wire == 2:
            return list(struct.unpack(f"<{len(value) // size}{scalar_code}", value[: len(value) // size * size]))
        return [struct.unpack("<" + scalar_code, value)[0]]
    if wire == 2:
        out, pos = [], 0
        while pos < len(value):
            raw, pos = _varint(value, pos)
            out.append(element(raw))
        return out
    return [element(value)]


def _elements(shape: bytes) -> int:
    """How many elements a TensorShapeProto (dim = 2, each with size = 1) describes."""
    count = 1
    for number, wire, dim in _fields(shape):
        if number == 2 and wire == 2:
            for dnum, dwire, size in _fields(dim):
                if dnum == 1 and dwire == 0:
                    count *= _int64(size)
    return count


def _tensor_scalar(buf: bytes) -> float | None:
    """The value of a one-element numeric tensor (a TF2 scalar summary), else None."""
    dtype, content, elements, values = 0, b"", 1, []
    fields = list(_fields(buf))
    for number, wire, value in fields:
        if number == 1 and wire == 0:
            dtype = value
        elif number == 2 and wire == 2:
            elements = _elements(value)
        elif number == 4 and wire == 2:
            content = value
    if dtype not in _DTYPES or elements != 1:
        return None
    code, field, element = _DTYPES[dtype]
    if content:
        if dtype == _BFLOAT16:
            values = [_bfloat16(v) for v in struct.unpack(f"<{len(content) // 2}H", content)]
        else:
            size = struct.calcsize(code)
            values = list(struct.unpack(f"<{len(content) // size}{code}", content[: len(content) // size * size]))
    else:
        fixed = code if element is None else None  # float_val and double_val are fixed-width
        for number, wire, value in fields:
            if number == field:
                values += _repeated(wire, value, fixed, element)
    return float(values[0]) if len(values) == 1 else None


def _summary_scalars(buf: bytes) -> Iterator[tuple[str, float]]:
    for number, wire, value in _fields(buf):
        if number != 1 or wire != 2:
            continue
        tag, scalar = None, None
        for vnum, vwire, vval in _fields(value):
            if vnum == 1 and vwire == 2:
                tag = bytes(vval).decode("utf-8", "replace")
            elif vnum == 2 and vwire == 5:
                scalar = struct.unpack("<f", vval)[0]
            elif vnum == 8 and vwire == 2:
                scalar = _tensor_scalar(vval)
        if tag is not None and scalar is not None:
            yield tag, scalar


def decode_event(data: bytes) -> tuple[int, float, list[tuple[str, float]]]:
    """`(step, wall_time, [(tag, value), ...])` of one serialized Event; only scalar values.

    Raises:
        ValueError: the bytes are not a well-formed protobuf message.
    """
    step, wall_time, scalars = 0, 0.0, []
    for number, wire, value in _fields(data):
        if number == 1 and wire == 1:
            wall_time = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            step = _int64(value)
        elif number == 5 and wire == 2:
            scalars = list(_summary_scalars(value))
    return step, wall_time, scalars


# -- reading --------------------------------------------------------------------------------------


def iter_scalars(path: str) -> Iterator[tuple[int, str, int, float, float]]:
    """Yield `(record offset, tag, step, wall_time, value)` for every scalar of one event file."""
    for offset, data in read_records(path):
        try:
            step, wall_time, scalars = decode_event(data)
        except (ValueError, IndexError, struct.error) as exc:
            _warn(path, offset, f"undecodable event ({exc}), skipped")
            continue
        for tag, value in scalars:
            yield offset, tag, step, wall_time, value


def read_scalars(path: str) -> Scalars:
    """Every scalar of an event file (or of all event files in a directory, oldest first).

    Returns:
        tag → [(step, wall_time, value), ...] in the order written.
    """
    files = event_files(path) if os.path.isdir(path) else [path]
    out: Scalars = {}
    for file in files:
        for _, tag, step, wall_time, value in iter_scalars(file):
            out.setdefault(tag, []).append((step, wall_time, value))
    return out


def event_files(directory: str) -> list[str]:
    """The event files directly in `directory`, in the order they were started."""
    names = [n for n in os.listdir(directory) if EVENT_FILE_MARK in n and os.path.isfile(os.path.join(directory, n))]
    return [os.path.join(directory, n) for n in sorted(names, key=_start_key)]


def _start_key(name: str) -> tuple[int, str]:
    # events.out.tfevents.<unix seconds>.<host>...: a restarted writer's file sorts after the first
    parts = name.split(".")
    try:
        started = int(parts[parts.index(EVENT_FILE_MARK) + 1])
    except (ValueError, IndexError):
        started = 0
    return started, name


def run_directories(root: str) -> list[str]:
    """Every directory under `root` (itself included) that holds event files, sorted."""
    found = []
    for current, dirs, files in os.walk(root):
        dirs.sort()
        if any(EVENT_FILE_MARK in f for f in files):
            found.append(current)
    return found


# -- importing ------------------------------------------------------------------------------------

Point = tuple[int, float, float]  # (step, wall_time, value)


def import_tensorboard(directory: str, *, client: Client, project: str) -> list[dict[str, Any]]:
    """Import each directory of event files under `directory` as one finished run.

    `add_scalars("loss", {"train": ..., "val": ...})` writes each series into a directory of its own
    beside the writer's (`loss_train/`, `loss_val/`, each with the one tag `loss`): those are keys of
    the writer's run (`loss/train`, `loss/val`), not runs. A series whose steps repeat or go back (a
    requeued job that resumed from an older checkpoint) keeps the values written last, as the job
    meant; the earlier ones they replace are counted in each run's `replaced_points`.

    Importing again adds nothing twice: the run's uid and every batch id are derived from the
    files, so the server returns the same run and acknowledges batches it already holds.

    Returns:
        The runs, as the server describes them after the import, each with `replaced_points` (by key)
        and `negative_steps` (scalars at steps below 0, which are not imported).
    """
    root = os.path.abspath(directory)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"{directory} is not a directory")
    runs = []
    for run_dir, parts in _runs_under(root).items():
        name = os.path.relpath(run_dir, root)
        if name == ".":
            name = os.path.basename(root) or root
        runs.append(_import_run(client, project, name, run_dir, parts))
    return runs


def _runs_under(root: str) -> dict[str, list[tuple[str, list[str], str | None]]]:
    """run directory -> its parts: (directory, event files, the add_scalars series' name or None)."""
    found = {d: files for d in run_directories(root) if (files := event_files(d))}
    series = {d: part for d, files in found.items() if d != root and (part := _add_scalars_part(root, d, files))}
    writers: dict[str, int] = {}
    for writer, _ in series.values():
        writers[writer] = writers.get(writer, 0) + 1
    runs: dict[str, list[tuple[str, list[str], str | None]]] = {}
    for d, files in found.items():
        part = series.get(d)
        # a lone directory that merely looks like a series is a run of its own, unless its writer wrote too
        if part is not None and (part[0] in found or writers[part[0]] > 1):
            runs.setdefault(part[0], []).append((d, files, part[1]))
        else:
            runs.setdefault(d, []).insert(0, (d, files, None))
    return dict(sorted(runs.items()))


def _add_scalars_part(root: str, directory: str, files: list[str]) -> tuple[str, str] | None:
    """(the writer's directory, the series' name) where `directory` holds one series of `add_scalars`:
    every scalar tagged with the main tag `loss`, in `<writer>/loss_train/` (torch.utils.tensorboard)
    or `<writer>/loss/train/` (tensorboardX); else None."""
    tags = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a damaged file is warned about when it is imported
        for file in files:
            for _, tag, _, _, _ in iter_scalars(file):
                tags.add(tag)
                if len(tags) > 1:
                    return None
    if len(tags) != 1:
        return None
    main_tag = tags.pop()
    parent, name = os.path.split(directory)
    flat = main_tag.replace("/", "_") + "_"
    if name.startswith(flat) and len(name) > len(flat):
        writer, series = parent, name[len(flat):]
    else:
        nested = os.sep + main_tag.strip("/").replace("/", os.sep)
        if not parent.endswith(nested) or not main_tag.strip("/"):
            return None
        writer, series = parent[: -len(nested)], name
    inside = writer == root or writer.startswith(root + os.sep)
    return (writer, series) if inside else None


def keep_resumed(points: list[Point]) -> tuple[list[Point], int]:
    """A series in step order, and how many points were dropped: where a step repeats or goes back
    (a requeued job resumed from an older checkpoint), what was written later replaces what was
    written earlier from that step on."""
    kept: list[Point] = []
    replaced = 0
    for point in points:
        while kept and kept[-1][0] >= point[0]:
            kept.pop()
            replaced += 1
        kept.append(point)
    return kept, replaced


def _import_run(client: Client, project: str, name: str, run_dir: str,
                parts: list[tuple[str, list[str], str | None]]) -> dict[str, Any]:
    files = [f for _, part_files, _ in parts for f in part_files]
    # the first file's name holds its start time and host: unique to this run, and stable when
    # the directory is moved or more files are written later
    identity = f"tensorboard\0{project}\0{name}\0{os.path.basename(files[0])}"
    uid = hashlib.sha256(identity.encode()).hexdigest()[:16]
    opened = _first_wall_time(files[0])
    series: dict[str, list[Point]] = {}
    negative = 0
    for _, part_files, suffix in parts:
        for file in part_files:
            for _, tag, step, wall_time, value in iter_scalars(file):
                if step < 0:  # the server stores steps from 0
                    negative += 1
                    continue
                series.setdefault(tag if suffix is None else f"{tag}/{suffix}", []).append((step, wall_time, value))
    if negative:
        warnings.warn(f"{run_dir}: {negative} scalars at negative steps were not imported", stacklevel=2)
    replaced: dict[str, int] = {}
    for key, points in series.items():
        series[key], dropped = keep_resumed(points)
        if dropped:
            replaced[key] = dropped
    run = client.create_run(project=project, name=name, uid=uid, tags=["tensorboard"],
                            config={"tensorboard_dir": run_dir}, start_time=opened)
    for batch_id, batch in metric_batches(uid, series):
        client.log_metrics(run["id"], {"batch_id": batch_id, "metrics": batch})
    # The run spans its events. The writer's opening record is its start only when it comes first:
    # scalars written with an explicit, older walltime (re-logged history) start the run earlier.
    # 0 is an event that carried no time.
    times = [t for points in series.values() for _, t, _ in points if t > 0]
    first_time, last_time = (min(times), max(times)) if times else (None, None)
    start = min((t for t in (opened, first_time) if t is not None), default=None)
    end = last_time if last_time is not None else start
    finished = client.finish_run(run["id"], "finished", end_time=end, start_time=start)
    return {**finished, "replaced_points": replaced, "negative_steps": negative}


def _first_wall_time(path: str) -> float | None:
    # the file_version record that opens every event file carries the writer's start time
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a damaged file is warned about when it is read in full
        for _, data in read_records(path):
            try:
                return decode_event(data)[1] or None
            except (ValueError, IndexError, struct.error):
                return None
    return None


def metric_batches(uid: str, series: dict[str, list[Point]],
                   prefix: str = "tb-") -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Batches of at most BATCH_POINTS (step, time, value) points, each named by `prefix` and what it holds:
    importing the same files again sends the same batches, which the server acknowledges without storing
    them twice (the TensorBoard and W&B imports)."""
    batch: list[dict[str, str]] = []
    count = 0
    digest = hashlib.sha256(uid.encode())
    for key in series:
        points = series[key]
        for start in range(0, len(points), BATCH_POINTS):
            piece = points[start:start + BATCH_POINTS]
            if count and count + len(piece) > BATCH_POINTS:
                yield prefix + digest.hexdigest()[:40], batch
                batch, count, digest = [], 0, hashlib.sha256(uid.encode())
            entry = _series(key, piece)
            digest.update(b"\0".join(entry[k].encode() for k in ("key", "steps_i64", "values_f64", "times_f64")))
            batch.append(entry)
            count += len(piece)
    if batch:
        yield prefix + digest.hexdigest()[:40], batch


def _series(key: str, points: list[Point]) -> dict[str, str]:
    def packed(code: str, items: Any) -> str:
        return base64.b64encode(struct.pack(f"<{len(items)}{code}", *items)).decode("ascii")

    steps, times, values = zip(*points)
    return {"key": key, "steps_i64": packed("q", steps), "values_f64": packed("d", values), "times_f64": packed("d", times)}
