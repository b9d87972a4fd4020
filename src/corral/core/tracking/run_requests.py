"""Checking the bodies of the run endpoints (create, params, tags, finish, artifacts)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from corral.core.tracking.run_states import FINAL_STATES
from corral.core.units.units import is_number
from corral.errors import InvalidRequest

UID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_TEXT = 200


@dataclass(frozen=True)
class RunRequest:
    project: str = "default"
    name: str | None = None
    uid: str | None = None
    resume_key: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    job_id: int | None = None
    node: str | None = None
    gpu_type: str | None = None
    git_commit: str | None = None
    start_time: float | None = None


def parse_run_request(body: Any) -> RunRequest:
    """Raises InvalidRequest naming the field at fault."""
    body = _object(body, 'e.g. {"project": "mnist", "config": {"lr": 0.1}}')
    known = set(RunRequest.__dataclass_fields__)
    unknown = set(body) - known
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "unknown field", f"a run takes {', '.join(sorted(known))}")
    uid = body.get("uid")
    if uid is not None and (not isinstance(uid, str) or not UID.fullmatch(uid)):
        raise InvalidRequest("uid", f"{uid!r} is not a run uid", "use 1-64 letters, digits, _ or -")
    job_id = body.get("job_id")
    if isinstance(job_id, str) and is_number(job_id):  # ASCII digits: int("²") raises
        job_id = int(job_id)
    if job_id is not None and (type(job_id) is not int or not 0 < job_id < 2**31):
        raise InvalidRequest("job_id", f"{job_id!r} is not a job id", "give the corral job's number")
    start = body.get("start_time")
    if start is not None and not _is_time(start):
        raise InvalidRequest("start_time", f"{start!r} is not a time", "give a Unix time in seconds")
    return RunRequest(
        project=_text(body.get("project", "default"), "project", required=True),
        name=_text(body.get("name"), "name"),
        uid=uid,
        resume_key=_text(body.get("resume_key"), "resume_key", limit=400),
        config=_config(body.get("config", {}), "config"),
        tags=parse_tags(body.get("tags", []), "tags"),
        job_id=job_id,
        node=_text(body.get("node"), "node", limit=128),
        gpu_type=_text(body.get("gpu_type"), "gpu_type", limit=64),
        git_commit=_text(body.get("git_commit"), "git_commit", limit=64),
        start_time=float(start) if start is not None else None,
    )


def parse_params(body: Any) -> dict[str, Any]:
    body = _object(body, 'e.g. {"params": {"lr": 0.1}}')
    if set(body) != {"params"}:
        raise InvalidRequest("params", "missing" if "params" not in body else "is the only field", 'send {"params": {...}}')
    return _config(body["params"], "params")


def parse_tag_change(body: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    body = _object(body, 'e.g. {"add": ["best"], "remove": ["draft"]}')
    unknown = set(body) - {"add", "remove"}
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "unknown field", "give add and/or remove, lists of tags")
    return parse_tags(body.get("add", []), "add"), parse_tags(body.get("remove", []), "remove")


MAX_NOTES = 100_000


def parse_run_change(body: Any) -> dict[str, Any]:
    """The columns a PATCH of a run sets: `name`, `notes` (Markdown; "" or null clears them), `archived`."""
    body = _object(body, 'e.g. {"name": "baseline", "notes": "## Why\\nlr too high", "archived": false}')
    unknown = set(body) - {"name", "notes", "archived"}
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "unknown field", "a run's name, notes and archived may change")
    if not body:
        raise InvalidRequest("body", "changes nothing", "give name, notes or archived")
    changes: dict[str, Any] = {}
    if "name" in body:
        name = body["name"]
        if isinstance(name, str):
            name = name.strip()
        changes["name"] = _text(name, "name", limit=200, required=True)
    if "notes" in body:
        notes = body["notes"]
        if notes is not None and not isinstance(notes, str):
            raise InvalidRequest("notes", "must be text (Markdown) or null", 'e.g. "lr **too high**; see run 12"')
        if notes is not None and len(notes) > MAX_NOTES:
            raise InvalidRequest("notes", f"{len(notes):,} characters is too long", f"keep notes under {MAX_NOTES:,}")
        if notes is not None and any(not (c.isprintable() or c in "\n\t") for c in notes):
            raise InvalidRequest("notes", "holds control characters", "write printable text, lines and tabs")
        changes["notes"] = notes or None
    if "archived" in body:
        if not isinstance(body["archived"], bool):
            raise InvalidRequest("archived", "must be true or false")
        changes["archived"] = body["archived"]
    return changes


def parse_finish(body: Any) -> tuple[str, float | None, float | None]:
    """`(state, end_time, start_time)` of a finish; the times None where not given.

    A start_time corrects the run's start where it is known only at the end (an import of old logs).
    """
    body = _object(body or {}, 'e.g. {"state": "finished"}')
    unknown = set(body) - {"state", "end_time", "start_time"}
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], "unknown field", "give state and optionally end_time and start_time")
    state = body.get("state", "finished")
    if state not in FINAL_STATES:
        raise InvalidRequest("state", f"{state!r} is not how a run ends", f"use one of {', '.join(FINAL_STATES)}")
    end = body.get("end_time")
    if end is not None and not _is_time(end):
        raise InvalidRequest("end_time", f"{end!r} is not a time", "give a Unix time in seconds")
    start = body.get("start_time")
    if start is not None and not _is_time(start):
        raise InvalidRequest("start_time", f"{start!r} is not a time", "give a Unix time in seconds")
    if start is not None and end is not None and float(end) < float(start):
        raise InvalidRequest("end_time", f"{end!r} is before start_time {start!r}", "a run ends at or after it starts")
    return state, (float(end) if end is not None else None), (float(start) if start is not None else None)


_ARTIFACT_FIELDS = {"path", "type", "size", "sha256", "step", "metric", "metric_value", "goal", "deleted"}


def parse_artifacts(body: Any) -> list[dict[str, Any]]:
    body = _object(body, 'e.g. {"artifacts": [{"path": "/ckpt/ckpt-00000100.pt", "type": "checkpoint"}]}')
    items = body.get("artifacts")
    if set(body) != {"artifacts"} or not isinstance(items, list):
        raise InvalidRequest("artifacts", "must be the only field, a list", 'send {"artifacts": [{"path": ..., "type": ...}]}')
    out = []
    for i, item in enumerate(items):
        name = f"artifacts[{i}]"
        if not isinstance(item, dict) or "path" not in item:
            raise InvalidRequest(name, "must be an object with a path", 'e.g. {"path": "/ckpt/model.pt", "type": "checkpoint"}')
        unknown = set(item) - _ARTIFACT_FIELDS
        if unknown:
            raise InvalidRequest(f"{name}.{sorted(unknown)[0]}", "unknown field", f"an artifact takes {', '.join(sorted(_ARTIFACT_FIELDS))}")
        path = item["path"]
        if not isinstance(path, str) or not 0 < len(path) <= 4096 or "\0" in path:
            raise InvalidRequest(f"{name}.path", f"{path!r} is not a path", "give the file's path")
        sha = item.get("sha256")
        if sha is not None and (not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha)):
            raise InvalidRequest(f"{name}.sha256", "is not a hex SHA-256", "give 64 lowercase hex digits")
        for key in ("size", "step"):
            value = item.get(key)
            if value is not None and (type(value) is not int or not 0 <= value < 2**63):
                raise InvalidRequest(f"{name}.{key}", f"{value!r} is not a whole number from 0 to 2**63-1")
        value = item.get("metric_value")
        if value is not None and (type(value) not in (int, float) or _overflows(value)):
            raise InvalidRequest(f"{name}.metric_value", f"{value!r} is not a 64-bit float")
        goal = item.get("goal")
        if goal is not None and goal not in ("min", "max"):
            raise InvalidRequest(f"{name}.goal", f"{goal!r} is not a goal", 'give "min" (lower is better) or "max"')
        deleted = item.get("deleted")
        if deleted is not None and not isinstance(deleted, bool):
            raise InvalidRequest(f"{name}.deleted", "must be true or false")
        out.append({
            "path": path, "type": _text(item.get("type"), f"{name}.type", limit=32),
            "size": item.get("size"), "sha256": sha, "step": item.get("step"),
            "metric": _text(item.get("metric"), f"{name}.metric", limit=250),
            "metric_value": float(value) if value is not None else None, "goal": goal, "deleted": deleted,
        })
    return out


def parse_tags(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InvalidRequest(name, "must be a list of tags", 'e.g. ["baseline", "lr-sweep"]')
    tags = []
    for tag in value:
        if not isinstance(tag, str) or not 0 < len(tag) <= MAX_TEXT or not tag.isprintable():
            raise InvalidRequest(name, f"{tag!r} is not a tag", f"tags are 1-{MAX_TEXT} printable characters")
        if tag not in tags:
            tags.append(tag)
    return tuple(tags)


def check_search_terms(project: str | None, tag: str | None) -> None:
    """Raises InvalidRequest for a project or tag no run could have: PostgreSQL refuses a NUL byte even in a query."""
    for name, value in (("project", project), ("tag", tag)):
        if value is not None and not value.isprintable():
            raise InvalidRequest(name, f"{value!r} holds control characters", "projects and tags are printable text")


def _is_time(value: Any) -> bool:
    return type(value) in (int, float) and not _overflows(value) and math.isfinite(value)


def _overflows(value: int | float) -> bool:
    try:
        float(value)
    except OverflowError:
        return True
    return False


def _object(body: Any, example: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest("body", "must be a JSON object", example)
    return body


@overload
def _text(value: Any, name: str, *, limit: int = MAX_TEXT, required: Literal[True]) -> str: ...


@overload
def _text(value: Any, name: str, *, limit: int = MAX_TEXT, required: bool = False) -> str | None: ...


def _text(value: Any, name: str, *, limit: int = MAX_TEXT, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= limit or not value.isprintable():
        raise InvalidRequest(name, f"{value!r} is not valid here", f"give 1-{limit} printable characters")
    return value


def _config(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidRequest(name, "must be a JSON object", 'e.g. {"lr": 0.1, "model": {"depth": 4}}')
    _check_finite(value, name)
    return dict(value)


def _check_finite(value: Any, name: str) -> None:
    # NaN in a JSON column would not read back on PostgreSQL, nor would an integer past 64 bits
    # be written out as JSON again: refuse them here, by name
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRequest(name, "holds a value that is not a finite number", "store it as a string, e.g. \"nan\"")
    if type(value) is int and not -(2**63) <= value < 2**64:
        raise InvalidRequest(name, "holds an integer too large for 64 bits", "store it as a string")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_finite(item, f"{name}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_finite(item, f"{name}[{i}]")
