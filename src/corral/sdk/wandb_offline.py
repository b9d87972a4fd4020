"""Read the runs that W&B wrote offline (`WANDB_MODE=offline`) and import them as corral runs.

On a GPU node without internet, `wandb` writes each run to `wandb/offline-run-<time>-<id>/run-<id>.wandb`:
a log of protobuf `Record`s (wandb's `wandb_internal.proto`) framed as LevelDB's log is, after a
7-byte header (`:W&B`, 0xBEE1, version 0): 32 KiB blocks of chunks, each chunk `crc32 (u32) length
(u16) type (u8)` then its data; FULL (1) holds a whole record, FIRST (2), MIDDLE (3) and LAST (4) its
pieces; a block's tail shorter than a chunk header is zero padding. The CRC is zlib's CRC-32 of the
type byte and the data.

The framing is read here; the records are decoded by the `wandb` package's own protobuf classes,
imported only when an import runs (`pip install 'corral[wandb]'`). Of the records, these matter:

    run        the run's id, project, name, tags, start time and its config as given to init
    config     later config changes (`wandb.config.update`)
    history    one `log` call: items (key, JSON value) with `_step` and `_timestamp`
    summary    summary changes (the last values logged, and what the script set itself)
    exit       the exit code (a run without one was killed)

    from corral import Client
    from corral.sdk.wandb_offline import import_wandb
    import_wandb(["wandb/"], client=Client())

Like `corral import-tensorboard` (`corral.sdk.tensorboard`), this runs where the files are, as
their owner, and talks to the server through the client; importing again adds nothing twice: the
run's uid comes from W&B's run id and each batch's id from what it holds.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import struct
import warnings
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral.errors import CorralError
from corral.sdk.tensorboard import metric_batches

if TYPE_CHECKING:
    from corral.client import Client

HEADER = struct.Struct("<4sHB")
HEADER_IDENT, HEADER_MAGIC = b":W&B", 0xBEE1
CHUNK = struct.Struct("<IHB")
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
BATCH_POINTS = 50_000
RUN_FILE_SUFFIX = ".wandb"
NEEDS_WANDB = ("corral import-wandb decodes W&B's records with the wandb package, which is not installed here: "
               "pip install 'corral[wandb]' (or pip install wandb)")


@dataclass
class WandbRun:
    """What one offline run's file says."""

    path: str
    run_id: str = ""
    project: str | None = None
    entity: str | None = None
    name: str | None = None
    notes: str | None = None
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    history: dict[str, list[tuple[int, float, float]]] = field(default_factory=dict)
    """key -> [(step, time, value)], numbers only, in the order logged."""
    start_time: float | None = None
    end_time: float | None = None
    exit_code: int | None = None
    skipped_values: int = 0
    """History values that are not numbers (images, tables, text): not imported."""


# -- the framing -----------------------------------------------------------------------------------


def read_records(path: str) -> Iterator[bytes]:
    """Each whole record of a `.wandb` file, in order, read a block at a time (a long run's file can be
    hundreds of megabytes; a caller that stops early reads no further).

    A file cut short (a run killed while writing) ends at its last whole record, and a chunk that
    fails its checksum ends the file too (nothing after it can be trusted to be framed): either way
    with a warning.

    Raises:
        ValueError: not a W&B run file.
    """
    with open(path, "rb") as f:
        block = f.read(BLOCK)
        if len(block) < HEADER.size:
            raise ValueError(f"{path} is not a W&B run file (too short)")
        ident, magic, _version = HEADER.unpack_from(block)
        if ident != HEADER_IDENT or magic != HEADER_MAGIC:
            raise ValueError(f"{path} is not a W&B run file (no :W&B header)")
        # LevelDB's log framing: chunks never cross a 32 KiB block, and a record longer than what is left of a
        # block goes on in the next ones (FIRST, MIDDLE..., LAST)
        start, pos, pieces = 0, HEADER.size, bytearray()
        while True:
            if pos >= len(block):
                if len(block) < BLOCK:
                    return
                start, pos, block = start + BLOCK, 0, f.read(BLOCK)
                continue
            if BLOCK - pos < CHUNK.size:  # the block's zero padding
                pos = BLOCK
                continue
            if len(block) - pos < CHUNK.size:
                _warn(path, start + pos, "truncated chunk header")
                return
            checksum, length, kind = CHUNK.unpack_from(block, pos)
            if checksum == length == kind == 0:  # a block padded after its last chunk
                pos = BLOCK
                continue
            data = block[pos + CHUNK.size:pos + CHUNK.size + length]
            if len(data) < length:
                _warn(path, start + pos, "truncated record" if len(block) < BLOCK else "chunk runs past its block")
                return
            if zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != checksum:
                _warn(path, start + pos, "chunk fails its checksum")
                return
            pos += CHUNK.size + length
            if kind == FULL:
                yield data
            elif kind == FIRST:
                pieces = bytearray(data)
            elif kind == MIDDLE:
                pieces += data
            elif kind == LAST:
                pieces += data
                yield bytes(pieces)
                pieces = bytearray()
            else:
                _warn(path, start + pos - CHUNK.size - length, f"unknown chunk type {kind}")
                return


def _warn(path: str, offset: int, what: str) -> None:
    warnings.warn(f"{path}: {what} at byte {offset}; the records before it were read", stacklevel=3)


# -- the records -----------------------------------------------------------------------------------


def _record_class() -> Any:
    try:
        records = importlib.import_module("wandb.proto.wandb_internal_pb2")  # loaded only for an import
    except ImportError:
        raise CorralError(NEEDS_WANDB) from None
    return records.Record


def read_run(path: str) -> WandbRun:
    """The run one `.wandb` file holds.

    Raises:
        CorralError: the wandb package is missing. ValueError: not a W&B run file.
    """
    record_class = _record_class()
    run = WandbRun(path=path)
    for data in read_records(path):
        record = record_class()
        try:
            record.ParseFromString(data)
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, whatever its module
            _warn(path, 0, f"undecodable record ({exc}), skipped")
            continue
        kind = record.WhichOneof("record_type")
        if kind == "run":
            _take_run(run, record.run)
        elif kind == "config":
            _apply_config(run.config, record.config)
        elif kind == "history":
            _take_history(run, record.history)
        elif kind == "summary":
            _apply_updates(run.summary, record.summary.update, record.summary.remove)
        elif kind == "exit":
            run.exit_code = int(record.exit.exit_code)
    run.config.pop("_wandb", None)  # W&B's own bookkeeping
    run.summary = {k: v for k, v in run.summary.items() if not k.startswith("_")}
    return run


def _take_run(run: WandbRun, record: Any) -> None:
    run.run_id = record.run_id or run.run_id
    run.project = record.project or run.project
    run.entity = record.entity or run.entity
    run.name = record.display_name or run.name
    run.notes = record.notes or run.notes
    run.tags = list(dict.fromkeys([*run.tags, *record.tags]))
    if record.HasField("start_time"):
        run.start_time = record.start_time.seconds + record.start_time.nanos / 1e9
    _apply_config(run.config, record.config)
    if record.HasField("summary"):
        _apply_updates(run.summary, record.summary.update, record.summary.remove)


def _apply_config(config: dict[str, Any], record: Any) -> None:
    for item in record.update:
        value = _json(item.value_json)
        # an older wandb wraps each value: {"value": ..., "desc": ...}
        if isinstance(value, dict) and set(value) <= {"value", "desc"} and "value" in value:
            value = value["value"]
        _set(config, _key_path(item), value)
    for item in record.remove:
        _remove(config, _key_path(item))


def _apply_updates(target: dict[str, Any], updates: Any, removes: Any) -> None:
    for item in updates:
        target[_flat_key(item)] = _json(item.value_json)
    for item in removes:
        target.pop(_flat_key(item), None)


def _take_history(run: WandbRun, record: Any) -> None:
    values: dict[str, Any] = {}
    for item in record.item:
        values[_flat_key(item)] = _json(item.value_json)
    step = values.get("_step")
    if not isinstance(step, int) or isinstance(step, bool):
        step = int(record.step.num) if record.HasField("step") else 0
    stamp = values.get("_timestamp")
    when = float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else 0.0
    if when > 0:
        run.end_time = max(run.end_time or when, when)
    for key, value in values.items():
        if key.startswith("_"):
            continue
        if not _is_number(value):
            run.skipped_values += 1
            continue
        run.history.setdefault(key, []).append((step, when, float(value)))


def _key_path(item: Any) -> list[str]:
    return list(item.nested_key) if item.nested_key else [item.key]


def _flat_key(item: Any) -> str:
    # W&B shows a nested value ({"train": {"loss": ...}}) as train.loss
    return ".".join(_key_path(item))


def _set(target: dict[str, Any], path: list[str], value: Any) -> None:
    for part in path[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            child = target[part] = {}
        target = child
    target[path[-1]] = value


def _remove(target: dict[str, Any], path: list[str]) -> None:
    for part in path[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            return
        target = child
    target.pop(path[-1], None)


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- finding and importing -------------------------------------------------------------------------


def run_files(paths: Sequence[str]) -> list[str]:
    """Every `.wandb` run file in `paths` (files, or directories searched below), each once, sorted."""
    found: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            found.append(os.path.abspath(path))
            continue
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path} is neither a W&B run file nor a directory")
        for current, dirs, files in os.walk(path):
            dirs.sort()
            found += [os.path.abspath(os.path.join(current, f)) for f in sorted(files) if f.endswith(RUN_FILE_SUFFIX)]
    return sorted(dict.fromkeys(found))


def import_wandb(paths: Sequence[str], *, client: Client, project: str | None = None) -> list[dict[str, Any]]:
    """Import every offline W&B run under `paths` as a corral run: config, tags, history with its
    steps, and the summary (its numbers not in the history become metrics at the run's last step;
    anything else goes into the config under `wandb_summary`).

    Args:
        project: the corral project of every run (default: each run's W&B project).

    Returns:
        The runs as the server describes them after the import, each with `skipped_values` (history
        values that are not numbers, not imported) and `source` (the file).

    Raises:
        CorralError: the wandb package is missing.
    """
    files = run_files(paths)
    if files:
        _record_class()  # say that wandb is missing before anything is sent
    return [_import_run(client, read_run(path), project) for path in files]


def _import_run(client: Client, run: WandbRun, project: str | None) -> dict[str, Any]:
    target = project or run.project or "wandb"
    identity = f"wandb\0{run.entity or ''}\0{run.project or ''}\0{run.run_id or run.path}"
    uid = hashlib.sha256(identity.encode()).hexdigest()[:16]
    config = dict(run.config)
    last_step = max((points[-1][0] for points in run.history.values() if points), default=0)
    history = {key: _forward(points) for key, points in run.history.items()}
    extra_summary: dict[str, Any] = {}
    for key, value in run.summary.items():
        if _is_number(value):
            known = history.get(key)
            if known and known[-1][2] == float(value):
                continue  # the last value logged, as W&B keeps it
            name = key if not known else f"summary/{key}"
            history.setdefault(name, []).append((last_step, run.end_time or 0.0, float(value)))
        elif value is not None:
            extra_summary[key] = value
    if extra_summary:
        config["wandb_summary"] = extra_summary
    if run.notes:
        config.setdefault("wandb_notes", run.notes)
    created = client.create_run(project=target, name=run.name or run.run_id or None, uid=uid,
                                tags=[*run.tags, "wandb"], config=_jsonable(config), start_time=run.start_time)
    for batch_id, batch in metric_batches(uid, history, prefix="wb-"):
        client.log_metrics(created["id"], {"batch_id": batch_id, "metrics": batch})
    state = "finished" if run.exit_code == 0 else ("failed" if run.exit_code is not None else "crashed")
    end = run.end_time if run.end_time is not None else run.start_time
    start = min(run.start_time, end) if run.start_time is not None and end is not None else run.start_time
    finished = client.finish_run(created["id"], state, end_time=end, start_time=start)
    return {**finished, "skipped_values": run.skipped_values, "source": run.path}


def _forward(points: list[tuple[int, float, float]]) -> list[tuple[int, float, float]]:
    # a resumed W&B run logs steps again: what came later is what the job meant
    kept: list[tuple[int, float, float]] = []
    for point in points:
        while kept and kept[-1][0] >= point[0]:
            kept.pop()
        kept.append(point)
    return kept


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value
