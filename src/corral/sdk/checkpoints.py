"""Checkpoints a requeued job can trust: atomic files, a manifest, and a retention policy.

    <checkpoint_dir>/ckpt-00000100.pt     an object saved at a step (torch.save, or pickle without torch)
    <checkpoint_dir>/state-19.json        a file saved at a step, under its own name where that says the
                                          step, else with it added (`model-00000020.pt`)
    <checkpoint_dir>/checkpoints.json     the manifest: file, step, metric, sha256, size, time of each

A checkpoint is written to a hidden tmp file, fsync-ed and renamed into place, and only then
entered in the manifest (itself replaced atomically): a job killed mid-save leaves the previous
checkpoint as the latest, never a torn one. The manifest is what `latest()` and `best()` read,
so every rank, a requeued process and an offline run all find the same files.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import pickle
import re
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Any

from corral.sdk.files import HashingWriter, fsync_dir, read_json, sha256_file, write_json_atomic

MANIFEST = "checkpoints.json"
_CHECKPOINT_NAME = re.compile(r"^ckpt-(\d{8,})\.pt$")
_DIGITS = re.compile(r"\d+")


def checkpoint_name(step: int) -> str:
    return f"ckpt-{step:08d}.pt"


def file_checkpoint_name(source: str, step: int, taken: set[str]) -> str:
    """The name a file saved as the checkpoint of `step` is kept under: its own where the name says the step
    (`state-19.json`, Lightning's `epoch=3-step=400.ckpt`), else its own with the step before its extension
    (`model.pt` saved every epoch: `model-00000020.pt`), so each step's file has a name of its own, on disk
    and in the run's artifacts. The manifest's name, a hidden one or one another step holds get the step too."""
    own = os.path.basename(source.rstrip(os.sep))
    says_step = any(int(digits) == step for digits in _DIGITS.findall(own))
    if says_step and own not in taken and own != MANIFEST and not own.startswith("."):
        return own
    stem, ext = os.path.splitext(own.lstrip(".") or "checkpoint")
    numbered = f"{stem}-{step:08d}{ext}"
    return numbered if numbered not in taken and numbered != MANIFEST else checkpoint_name(step)


@dataclass(frozen=True)
class RetentionPolicy:
    """Which checkpoints stay on disk. With neither limit set, all do.

    `keep_last` newest by step and `keep_best` best by metric (`mode` "min" or "max") are kept;
    the newest one always is, whatever the limits: it is what a requeued job resumes from.
    """

    keep_last: int | None = None
    keep_best: int | None = None
    mode: str = "min"

    def __post_init__(self) -> None:
        if self.mode not in ("min", "max"):
            raise ValueError(f"best mode must be 'min' or 'max', not {self.mode!r}")
        for name in ("keep_last", "keep_best"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be 0 or more, not {value}")

    def retained(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The entries to keep, in step order (a pure function of the manifest)."""
        if self.keep_last is None and self.keep_best is None:
            return sorted(entries, key=_step)
        by_step = sorted(entries, key=_step)
        keep = {_step(e) for e in by_step[-max(self.keep_last or 0, 1):]}
        if self.keep_best:
            sign = 1.0 if self.mode == "min" else -1.0
            scored = [e for e in entries if _finite(e.get("metric"))]
            # ties go to the later step: it has trained longer
            scored.sort(key=lambda e: (sign * float(e["metric"]), -_step(e)))
            keep.update(_step(e) for e in scored[:self.keep_best])
        return [e for e in by_step if _step(e) in keep]


class CheckpointStore:
    """One directory of checkpoints and its manifest."""

    def __init__(self, directory: str, policy: RetentionPolicy | None = None, metric_name: str = "metric") -> None:
        self.directory = os.path.abspath(directory)
        self.policy = policy or RetentionPolicy()
        self.metric_name = metric_name

    def path_for(self, step: int, obj: Any = None) -> str:
        """Where the checkpoint of `step` is written: `ckpt-<step>.pt` for an object, the file's own name for
        a file (`obj`, a path) unless another step's checkpoint holds it (`file_checkpoint_name`)."""
        return os.path.join(self.directory, self._name_for(obj, step, self.entries()))

    def _name_for(self, obj: Any, step: int, entries: list[dict[str, Any]]) -> str:
        if not isinstance(obj, (str, os.PathLike)):
            return checkpoint_name(step)
        taken = {str(e["file"]) for e in entries if _step(e) != step}
        return file_checkpoint_name(os.fspath(obj), step, taken)

    def save(self, obj: Any, step: int, metric: float | None = None, *, move: bool = False
             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Write `obj` (or copy the file at path `obj`, keeping its name) as the checkpoint of `step`, then
        apply retention.

        Returns the new manifest entry and the entries retention removed (their files are gone).
        """
        os.makedirs(self.directory, exist_ok=True)
        before = self.entries()
        final = os.path.join(self.directory, self._name_for(obj, step, before))
        tmp = os.path.join(self.directory, f".{os.path.basename(final)}.tmp.{os.getpid()}")
        try:
            if isinstance(obj, (str, os.PathLike)):
                size, sha256 = _place_file(os.fspath(obj), tmp, move=move)
            else:
                size, sha256 = _serialize(obj, tmp)
            os.replace(tmp, final)
        except BaseException:
            _unlink(tmp)
            raise
        fsync_dir(self.directory)
        entry = {"file": os.path.basename(final), "step": step, "metric": finite_or_none(metric),
                 "sha256": sha256, "size": size, "time": time.time()}
        # this step saved again under another name (an object, then a file): the older file is no checkpoint now
        replaced = [e for e in before if _step(e) == step and e["file"] != entry["file"]]
        entries = [e for e in before if _step(e) != step] + [entry]
        kept = self.policy.retained(entries)
        kept_steps = {_step(e) for e in kept}
        removed = [e for e in entries if _step(e) not in kept_steps]
        # the manifest forgets them before the files go: it never names a missing file
        self._write_manifest(kept)
        for gone in removed + replaced:
            _unlink(os.path.join(self.directory, gone["file"]))
        return entry, removed

    def entries(self) -> list[dict[str, Any]]:
        """The manifest's checkpoints in step order; without a manifest, the ckpt-*.pt files found."""
        manifest = read_json(os.path.join(self.directory, MANIFEST))
        if isinstance(manifest, dict) and isinstance(manifest.get("checkpoints"), list):
            return sorted((e for e in manifest["checkpoints"] if isinstance(e, dict) and "file" in e), key=_step)
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = [{"file": n, "step": int(m.group(1)), "metric": None} for n in names if (m := _CHECKPOINT_NAME.match(n))]
        return sorted(found, key=_step)

    def latest(self) -> str | None:
        """The checkpoint of the highest step whose file exists."""
        for entry in reversed(self.entries()):
            path = os.path.join(self.directory, entry["file"])
            if os.path.isfile(path):
                return path
        return None

    def best(self) -> str | None:
        """The checkpoint with the best finite metric (ties: the later step); None if none has one."""
        sign = 1.0 if self.policy.mode == "min" else -1.0
        scored = [e for e in self.entries() if _finite(e.get("metric"))
                  and os.path.isfile(os.path.join(self.directory, e["file"]))]
        if not scored:
            return None
        best = min(scored, key=lambda e: (sign * float(e["metric"]), -_step(e)))
        return os.path.join(self.directory, best["file"])

    def artifact(self, entry: dict[str, Any], *, deleted: bool = False) -> dict[str, Any]:
        """The entry as the API's artifact."""
        return {"path": os.path.join(self.directory, entry["file"]), "type": "checkpoint",
                "size": entry.get("size"), "sha256": entry.get("sha256"), "step": entry["step"],
                "metric": self.metric_name if entry.get("metric") is not None else None,
                "metric_value": entry.get("metric"),
                # the declared best_mode: which value is best is the run's to say, not its metric name's
                "goal": self.policy.mode if entry.get("metric") is not None else None, "deleted": deleted}

    def _write_manifest(self, entries: list[dict[str, Any]]) -> None:
        write_json_atomic(os.path.join(self.directory, MANIFEST),
                          {"version": 1, "metric": self.metric_name, "mode": self.policy.mode, "checkpoints": entries})


def _serialize(obj: Any, tmp: str) -> tuple[int, str]:
    """torch.save when torch is installed (a .pt that torch.load reads), else pickle; hashed as written."""
    torch: Any = sys.modules.get("torch")
    if torch is None and importlib.util.find_spec("torch") is not None:
        torch = importlib.import_module("torch")
    writer = HashingWriter(tmp)
    try:
        if torch is not None:
            torch.save(obj, writer)
        else:
            pickle.dump(obj, writer, protocol=pickle.HIGHEST_PROTOCOL)
        writer.sync_and_close()
    except BaseException:
        writer.close()
        raise
    return writer.size, writer.sha256


def _place_file(source: str, tmp: str, *, move: bool) -> tuple[int, str]:
    """Copy (or move) an existing file to `tmp`, durably; returns its size and sha256."""
    if not os.path.isfile(source):
        raise FileNotFoundError(f"no checkpoint file at {source}")
    if move:
        try:
            os.rename(source, tmp)  # same filesystem: no copy
        except OSError:
            shutil.copyfile(source, tmp)
            os.unlink(source)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        return sha256_file(tmp)
    writer = HashingWriter(tmp)
    try:
        with open(source, "rb") as f:
            shutil.copyfileobj(f, writer, 1 << 20)
        writer.sync_and_close()
    except BaseException:
        writer.close()
        raise
    return writer.size, writer.sha256


def finite_or_none(value: Any) -> float | None:
    """A metric as a float; None for none, NaN or infinity (JSON has no such numbers, and no such best)."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _step(entry: dict[str, Any]) -> int:
    return int(entry["step"])


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
