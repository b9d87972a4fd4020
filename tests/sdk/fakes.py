"""An in-memory stand-in for the server's run API, injected into the SDK as its client.

It keeps the contract's rules (docs/tracking-api.md): create is idempotent by uid and resumes by
resume_key, a batch id is applied once, and per key a step not above the last stored one is
skipped. Bodies go through JSON on the way in, as they would over HTTP, and packed columns are
decoded here with `struct`, independently of the SDK's own code.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
from typing import Any

from corral.errors import InvalidRequest, NotFound, ServerUnavailable


def unpack(fmt: str, text: str) -> list[Any]:
    raw = base64.b64decode(text)
    return list(struct.unpack(f"<{len(raw) // 8}{fmt}", raw))


class FakeServer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[int, dict[str, Any]] = {}
        self.points: dict[int, dict[str, list[tuple[int, float, float]]]] = {}
        self.batch_ids: dict[int, set[str]] = {}
        self.artifact_map: dict[int, dict[str, dict[str, Any]]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.down = False
        self.hang: threading.Event | None = None  # set: calls block until it is set
        self.max_batch_points = 0

    # -- the client's run methods ---------------------------------------------------------------

    def create_run(self, **fields: Any) -> dict[str, Any]:
        fields = self._enter("create_run", fields)
        with self.lock:
            for run in self.runs.values():
                if fields.get("uid") and run["uid"] == fields["uid"]:
                    return dict(run, resumed=False)
            for run in self.runs.values():
                if fields.get("resume_key") and run["resume_key"] == fields["resume_key"]:
                    run["state"] = "running"
                    return self._view(run, resumed=True)
            run_id = len(self.runs) + 1
            run = {"id": run_id, "uid": fields.get("uid") or f"r{run_id}", "project": fields.get("project", "default"),
                   "name": fields.get("name"), "state": "running", "config": dict(fields.get("config", {})),
                   "tags": list(fields.get("tags", [])), "job_id": fields.get("job_id"),
                   "resume_key": fields.get("resume_key"), "git_commit": fields.get("git_commit"),
                   "node": fields.get("node"), "end_time": None}
            self.runs[run_id] = run
            self.points[run_id], self.batch_ids[run_id], self.artifact_map[run_id] = {}, set(), {}
            return self._view(run, resumed=False)

    def log_metrics(self, ref: int | str, batch: dict[str, Any]) -> dict[str, Any]:
        batch = self._enter("log_metrics", batch)
        with self.lock:
            run_id = self._resolve(ref)
            if batch.get("batch_id") in self.batch_ids[run_id]:
                return {"accepted": 0, "skipped": 0, "duplicate": True}
            accepted = skipped = total = 0
            for series in batch["metrics"]:
                steps, values = unpack("q", series["steps_i64"]), unpack("d", series["values_f64"])
                times = unpack("d", series["times_f64"])
                if not (len(steps) == len(values) == len(times)):
                    raise InvalidRequest("metrics", "columns of different lengths")
                if any(s < 0 for s in steps):
                    raise InvalidRequest("metrics", "negative step")
                stored = self.points[run_id].setdefault(series["key"], [])
                for point in zip(steps, values, times):
                    total += 1
                    if stored and point[0] <= stored[-1][0]:
                        skipped += 1
                    else:
                        stored.append(point)
                        accepted += 1
            self.max_batch_points = max(self.max_batch_points, total)
            if batch.get("batch_id"):
                self.batch_ids[run_id].add(batch["batch_id"])
            return {"accepted": accepted, "skipped": skipped, "duplicate": False}

    def log_params(self, ref: int | str, params: dict[str, Any]) -> dict[str, Any]:
        params = self._enter("log_params", params)
        with self.lock:
            run = self.runs[self._resolve(ref)]
            run["config"].update(params)
            return self._view(run)

    def tag_run(self, ref: int | str, *, add: Any = (), remove: Any = ()) -> dict[str, Any]:
        self._enter("tag_run", {"add": list(add), "remove": list(remove)})
        with self.lock:
            run = self.runs[self._resolve(ref)]
            run["tags"] = [t for t in run["tags"] if t not in remove] + [t for t in add if t not in run["tags"]]
            return self._view(run)

    def log_artifacts(self, ref: int | str, artifacts: Any) -> list[dict[str, Any]]:
        artifacts = self._enter("log_artifacts", list(artifacts))
        with self.lock:
            stored = self.artifact_map[self._resolve(ref)]
            for artifact in artifacts:
                stored[artifact["path"]] = {**stored.get(artifact["path"], {}), **artifact}
            return [stored[a["path"]] for a in artifacts]

    def upload_artifact(self, ref: int | str, source: str, name: str, *, type: str = "file",
                        sha256: str | None = None, **_: Any) -> dict[str, Any]:
        self._enter("upload_artifact", {"source": source, "name": name, "type": type, "sha256": sha256})
        with open(source, "rb") as f:
            data = f.read()
        with self.lock:
            artifact = {"path": name, "type": type, "size": len(data), "sha256": sha256, "stored": True, "data": data}
            self.artifact_map[self._resolve(ref)][name] = artifact
            return artifact

    def finish_run(self, ref: int | str, state: str = "finished", end_time: float | None = None) -> dict[str, Any]:
        self._enter("finish_run", {"state": state, "end_time": end_time})
        with self.lock:
            run = self.runs[self._resolve(ref)]
            run["state"], run["end_time"] = state, end_time
            return self._view(run)

    def get_run(self, ref: int | str) -> dict[str, Any]:
        with self.lock:
            return self._view(self.runs[self._resolve(ref)])

    # -- for the tests ----------------------------------------------------------------------------

    def series(self, run_id: int, key: str) -> list[tuple[int, float, float]]:
        with self.lock:
            return list(self.points[run_id].get(key, []))

    def steps(self, run_id: int, key: str) -> list[int]:
        return [p[0] for p in self.series(run_id, key)]

    def values(self, run_id: int, key: str) -> list[float]:
        return [p[1] for p in self.series(run_id, key)]

    def artifacts(self, run_id: int) -> dict[str, dict[str, Any]]:
        with self.lock:
            return dict(self.artifact_map[run_id])

    def count(self, method: str) -> int:
        with self.lock:
            return sum(1 for name, _ in self.calls if name == method)

    # -- internals --------------------------------------------------------------------------------

    def _enter(self, method: str, body: Any) -> Any:
        body = json.loads(json.dumps(body, allow_nan=False))  # what HTTP would carry
        if self.hang is not None:
            self.hang.wait()
        with self.lock:
            self.calls.append((method, body))
        if self.down:
            raise ServerUnavailable("cannot reach the corral server (fake): connection refused")
        return body

    def _resolve(self, ref: int | str) -> int:
        for run_id, run in self.runs.items():
            if str(run_id) == str(ref) or run["uid"] == str(ref):
                return run_id
        raise NotFound(f"no run {ref}")

    def _view(self, run: dict[str, Any], resumed: bool = False) -> dict[str, Any]:
        points = self.points.get(run["id"], {})
        summary = {k: {"count": len(p), "last_step": p[-1][0]} for k, p in points.items() if p}
        last = max((s["last_step"] for s in summary.values()), default=None)
        return dict(run, resumed=resumed, metrics=summary, last_step=last)
