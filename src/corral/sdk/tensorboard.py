"""Read scalars from TensorBoard event files, and import them (with their media and hparams) as corral runs.

Neither TensorFlow nor TensorBoard is needed (corral.sdk.tensorboard_records reads the files): each
record is a serialized `Event` protobuf, of which only a few fields matter for scalars:

    Event:        wall_time = 1 (double), step = 2 (int64), summary = 5 (Summary)
    Summary:      value = 1 (repeated Value)
    Value:        tag = 1 (string), simple_value = 2 (float), tensor = 8 (TensorProto), metadata = 9

TF1 (and tensorboardX) write `simple_value`; TF2's `tf.summary.scalar` writes a one-element tensor.
Images, histograms, text and hparams are read by corral.sdk.tensorboard_media.

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
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from corral.sdk.tensorboard_media import MediaUploads, SummaryReader, starts_hparams_session, summary_values
from corral.sdk.tensorboard_records import STRING, double, fields, int64, read_records, warn

if TYPE_CHECKING:
    from corral.client import Client
    from corral.sdk.tensorboard_media import SummaryValue
    from corral.sdk.tensorboard_records import Tensor

Scalars = dict[str, list[tuple[int, float, float]]]

# Points per POST: far under the server's 1,000,000, and small enough that a retried batch is cheap.
BATCH_POINTS = 50_000
EVENT_FILE_MARK = "tfevents"


def _tensor_scalar(decoded: Tensor | None) -> float | None:
    """The value of a one-element numeric tensor (a TF2 scalar summary), else None."""
    if decoded is None or decoded.dtype == STRING or decoded.size != 1 or len(decoded.values) != 1:
        return None
    return float(decoded.values[0])


def _scalars(values: list[SummaryValue]) -> list[tuple[str, float]]:
    found = []
    for value in values:
        scalar = _tensor_scalar(value.tensor) if value.tensor_is_scalar else value.simple_value
        # TF2's hparams summaries carry a placeholder 0.0 tensor: a plugin's other than scalars' is no scalar
        if value.tag is not None and scalar is not None and value.plugin in (None, "", "scalars"):
            found.append((value.tag, scalar))
    return found


def _summary_scalars(summary: bytes) -> list[tuple[str, float]]:
    return _scalars(summary_values(summary)) if summary else []


def _event(data: bytes) -> tuple[int, float, bytes]:
    """`(step, wall_time, summary)` of one serialized Event (`b""` when it holds no Summary)."""
    step, wall_time, summary = 0, 0.0, b""
    for number, wire, value in fields(data):
        if number == 1 and wire == 1:
            wall_time = double(value)
        elif number == 2 and wire == 0:
            step = int64(value)
        elif number == 5 and wire == 2:
            summary = value
    return step, wall_time, summary


def decode_event(data: bytes) -> tuple[int, float, list[tuple[str, float]]]:
    """`(step, wall_time, [(tag, value), ...])` of one serialized Event; only scalar values.

    Raises:
        ValueError: the bytes are not a well-formed protobuf message.
    """
    step, wall_time, summary = _event(data)
    return step, wall_time, _summary_scalars(summary)


# -- reading --------------------------------------------------------------------------------------


def iter_events(path: str) -> Iterator[tuple[int, int, float, bytes]]:
    """Yield `(record offset, step, wall_time, summary)` for every event of one file; an undecodable
    one is skipped with a warning."""
    for offset, data in read_records(path):
        try:
            step, wall_time, summary = _event(data)
        except (ValueError, IndexError, struct.error) as exc:
            warn(path, offset, f"undecodable event ({exc}), skipped")
            continue
        yield offset, step, wall_time, summary


def iter_scalars(path: str) -> Iterator[tuple[int, str, int, float, float]]:
    """Yield `(record offset, tag, step, wall_time, value)` for every scalar of one event file."""
    for offset, step, wall_time, summary in iter_events(path):
        try:
            scalars = _summary_scalars(summary)
        except (ValueError, IndexError, struct.error) as exc:
            warn(path, offset, f"undecodable event ({exc}), skipped")
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
    """Import each directory of event files under `directory` as one finished run: its scalars as
    metrics, its images, histograms and text as media artifacts (corral.sdk.tensorboard_media), its
    hparams as config.

    `add_scalars("loss", {"train": ..., "val": ...})` writes each series into a directory of its own
    beside the writer's (`loss_train/`, `loss_val/`, each with the one tag `loss`): those are keys of
    the writer's run (`loss/train`, `loss/val`), not runs. A series whose steps repeat or go back (a
    requeued job that resumed from an older checkpoint) keeps the values written last, as the job
    meant; the earlier ones they replace are counted in each run's `replaced_points`.

    `add_hparams` writes the hyperparameters, and its metrics, into a directory of its own beside the
    writer's files (`<writer>/<time>/`): they are the writer's run's config and metrics (a metric the
    writer logged itself keeps the writer's series). Where one writer made several such directories
    (a sweep run in one process), each is a run of its own, as TensorBoard's hparams view shows them.

    Importing again adds nothing twice: the run's uid and every batch id are derived from the
    files, so the server returns the same run and acknowledges batches it already holds; media the
    run holds already (the same bytes at the same path) are not sent again.

    Returns:
        The runs, as the server describes them after the import, each with `replaced_points` (by key),
        `negative_steps` (values at steps below 0, which are not imported), `media` (how many of each
        type the files hold), `media_sent` (how many of those this import uploaded) and `skipped_media`
        (audio, videos and text over 1 MiB, which are not imported).
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


class Part(NamedTuple):
    """The event files of one directory, and what they are to the run they belong to."""

    directory: str
    files: list[str]
    series: str | None = None  # one series of add_scalars: its scalars are the run's `<tag>/<series>`
    session: bool = False  # the directory add_hparams made beside the writer's files


def _runs_under(root: str) -> dict[str, list[Part]]:
    """run directory -> its parts, the run's own files first."""
    found = {d: files for d in run_directories(root) if (files := event_files(d))}
    sessions = {d for d, files in found.items() if d != root and os.path.dirname(d) in found and _opens_session(files)}
    per_writer = Counter(os.path.dirname(d) for d in sessions)
    series = {d: part for d, files in found.items()
              if d != root and d not in sessions and (part := _add_scalars_part(root, d, files))}
    writers = Counter(writer for writer, _ in series.values())
    runs: dict[str, list[Part]] = {}
    for d, files in found.items():
        part = series.get(d)
        if d in sessions and per_writer[os.path.dirname(d)] == 1:
            # add_hparams's directory (one per writer) holds the writer's hyperparameters: they are the
            # writer's run's config. Several are a sweep run in one writer: each a run of its own, as
            # TensorBoard's hparams view shows them.
            runs.setdefault(os.path.dirname(d), []).append(Part(d, files, session=True))
        elif part is not None and (part[0] in found or writers[part[0]] > 1):
            # a lone directory that merely looks like a series is a run of its own, unless its writer wrote too
            runs.setdefault(part[0], []).append(Part(d, files, series=part[1]))
        else:
            runs.setdefault(d, []).insert(0, Part(d, files))
    return dict(sorted(runs.items()))


def _opens_session(files: list[str]) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a damaged file is warned about when it is imported
        try:
            return starts_hparams_session(files[0])
        except (ValueError, IndexError, struct.error):
            return False


def _add_scalars_part(root: str, directory: str, files: list[str]) -> tuple[str, str] | None:
    """(the writer's directory, the series' name) where `directory` holds one series of `add_scalars`:
    every scalar tagged with the main tag `loss`, in `<writer>/loss_train/` (torch.utils.tensorboard)
    or `<writer>/loss/train/` (tensorboardX); else None."""
    found: tuple[str, tuple[str, str] | None] | None = None  # the one tag, and the series it makes of `directory`
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a damaged file is warned about when it is imported
        for file in files:
            for _, tag, _, _, _ in iter_scalars(file):
                if found is None:
                    found = tag, _series_part(root, directory, tag)
                    if found[1] is None:  # with this tag, or with more than one, no series: no need to read on
                        return None
                elif tag != found[0]:
                    return None
    return None if found is None else found[1]


def _series_part(root: str, directory: str, main_tag: str) -> tuple[str, str] | None:
    """(the writer's directory, the series' name) that `directory` would be of `add_scalars` with `main_tag`."""
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


def _import_run(client: Client, project: str, name: str, run_dir: str, parts: list[Part]) -> dict[str, Any]:
    files = [f for part in parts for f in part.files]
    # the first file's name holds its start time and host: unique to this run, and stable when
    # the directory is moved or more files are written later
    identity = f"tensorboard\0{project}\0{name}\0{os.path.basename(files[0])}"
    uid = hashlib.sha256(identity.encode()).hexdigest()[:16]
    opened = _first_wall_time(files[0])
    series: dict[str, list[Point]] = {}
    session_series: dict[str, list[Point]] = {}
    reader = SummaryReader()
    media_times: list[float] = []
    negative = 0
    with MediaUploads() as media:
        for part in parts:
            into = session_series if part.session else series
            for file in part.files:
                for offset, step, wall_time, summary in iter_events(file):
                    if not summary:
                        continue
                    try:
                        values = summary_values(summary)  # each tensor decoded once, for its scalar and its media
                        scalars = _scalars(values)
                        items = reader.media(values)
                    except (ValueError, IndexError, struct.error) as exc:
                        warn(file, offset, f"undecodable summary ({exc}), skipped")
                        continue
                    if step < 0:  # the server stores steps from 0
                        negative += len(scalars) + len(items)
                        continue
                    for tag, value in scalars:
                        into.setdefault(tag if part.series is None else f"{tag}/{part.series}", []).append(
                            (step, wall_time, value))
                    for item in items:
                        media.add(step, item)
                    if items and wall_time > 0:
                        media_times.append(wall_time)
        if negative:
            warnings.warn(f"{run_dir}: {negative} values at negative steps were not imported", stacklevel=2)
        # add_hparams logs its metrics in its own directory too: a key the writer logged is the writer's series
        for key, points in session_series.items():
            series.setdefault(key, points)
        replaced: dict[str, int] = {}
        for key, points in series.items():
            series[key], dropped = keep_resumed(points)
            if dropped:
                replaced[key] = dropped
        run = client.create_run(project=project, name=name, uid=uid, tags=["tensorboard"],
                                config={"tensorboard_dir": run_dir}, start_time=opened)
        config = run.get("config") or {}
        if any(key not in config or config[key] != value for key, value in reader.hparams.items()):
            client.log_params(run["id"], reader.hparams)
        for batch_id, batch in metric_batches(uid, series):
            client.log_metrics(run["id"], {"batch_id": batch_id, "metrics": batch})
        sent = media.upload(client, run["id"])
        media_counts = media.counts()
    # The run spans its events. The writer's opening record is its start only when it comes first:
    # scalars written with an explicit, older walltime (re-logged history) start the run earlier.
    # 0 is an event that carried no time.
    times = [t for points in series.values() for _, t, _ in points if t > 0] + media_times
    first_time, last_time = (min(times), max(times)) if times else (None, None)
    start = min((t for t in (opened, first_time) if t is not None), default=None)
    end = last_time if last_time is not None else start
    finished = client.finish_run(run["id"], "finished", end_time=end, start_time=start)
    return {**finished, "replaced_points": replaced, "negative_steps": negative, "media": media_counts,
            "media_sent": sent, "skipped_media": reader.skipped}


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
