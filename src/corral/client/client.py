"""`Client`: one method per call of the server's API (jobs, nodes and reservations, monitoring and alerts, runs,
tokens), and the checks of the ids and names it puts into URLs. The requests go through `transport.Transport`."""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from corral.client.transport import Transport
from corral.core.jobspec.states import TERMINAL_STATES
from corral.errors import InvalidRequest, ServerUnavailable, error_from_answer

TERMINAL = frozenset(state.value for state in TERMINAL_STATES)
UPLOAD_CHUNK = 8 << 20  # an artifact's bytes per request: well under the server's 64 MB body limit


class Client(Transport):
    """A connection to one corral server. Methods return the API's JSON (dicts)."""

    # -- jobs -------------------------------------------------------------------------------------

    def submit(self, command: Sequence[str] | None = None, *, script: str | None = None, **fields: Any) -> dict[str, Any]:
        """Submit a job; `fields` are the API's (gpus, cpus, mem, time, env, name, ...)."""
        body = {k: v for k, v in fields.items() if v is not None}
        if command is not None:
            body["command"] = list(command)
        if script is not None:
            body["script"] = script
        return self._request("POST", "/api/v1/jobs", body)

    def forecast(self, command: Sequence[str] | None = None, *, script: str | None = None, **fields: Any) -> dict[str, Any]:
        """When a job would start if submitted now (`submit`'s arguments); nothing is submitted."""
        body = {k: v for k, v in fields.items() if v is not None}
        if command is not None:
            body["command"] = list(command)
        if script is not None:
            body["script"] = script
        return self._request("POST", "/api/v1/forecast", body)

    def resubmit(self, job_id: int | str, *, confirm_owner: str | None = None, **changes: Any) -> dict[str, Any]:
        """Run a job again as its owner (for its owner, or an admin naming the owner in `confirm_owner`), with `changes`
        (submit fields; `env` and `labels` merged into the job's own); the new job's `parent` is `job_id`."""
        body = changes if confirm_owner is None else {**changes, "confirm_owner": confirm_owner}
        return self._request("POST", f"/api/v1/jobs/{_ref(job_id)}/resubmit", body)

    def sweep(self, command: Sequence[str], params: Mapping[str, Any] | Sequence[str], *, samples: int | None = None,
              seed: int | None = None, method: str | None = None, concurrency: int | None = None,
              metric: str | None = None, **fields: Any) -> dict[str, Any]:
        """Start a sweep: `command` with `{name}` for each parameter, run as one job array, a task per set of
        values (`params`: {"lr": "1e-4,3e-4"} or ["lr=loguniform:1e-5:1e-2"]); `fields` as `submit`'s."""
        body = {k: v for k, v in fields.items() if v is not None}
        body.update({k: v for k, v in {"samples": samples, "seed": seed, "method": method, "concurrency": concurrency,
                                        "metric": metric}.items() if v is not None})
        body["command"] = list(command)
        body["params"] = dict(params) if isinstance(params, Mapping) else list(params)
        return self._request("POST", "/api/v1/sweeps", body)

    def get_sweep(self, sweep_id: int | str, *, metric: str | None = None) -> dict[str, Any]:
        """A sweep: every task's values, state, and its run's final and best `metric`; the best task."""
        query = f"?{urllib.parse.urlencode({'metric': metric})}" if metric else ""
        return self._request("GET", f"/api/v1/sweeps/{_ref(sweep_id)}{query}")

    def efficiency(self, job_id: int | str) -> dict[str, Any]:
        """How well a job used its CPUs, memory and GPUs, with advice (sacct on Slurm, samples locally)."""
        return self._request("GET", f"/api/v1/jobs/{_ref(job_id)}/efficiency")

    def diagnose(self, job_id: int | str) -> dict[str, Any]:
        """The likely causes of a job's trouble, each with evidence and fixes."""
        return self._request("GET", f"/api/v1/jobs/{_ref(job_id)}/diagnosis")

    def attach(self, slurm_job_id: int | str) -> dict[str, Any]:
        """Track a job submitted with plain sbatch (servers with the Slurm backend)."""
        return self._request("POST", "/api/v1/jobs/attach", {"slurm_job_id": str(slurm_job_id)})

    def get(self, job_id: int | str) -> dict[str, Any]:
        """The job's fields (`corral.core.jobspec.job_fields.JobFields`), with its timeline and, while it has not ended,
        `expected_end` and `expected_end_source`."""
        return self._request("GET", f"/api/v1/jobs/{_ref(job_id)}")

    def steps(self, job_id: int | str) -> list[dict[str, Any]]:
        """The steps `srun` ran inside a job, in order (its batch step is the job itself)."""
        return self._request("GET", f"/api/v1/jobs/{_ref(job_id)}/steps")["steps"]

    def array_tasks(self, job_id: int, *, offset: int = 0, limit: int = 500) -> dict[str, Any]:
        """An array job's tasks (a page of them, by task id), their states and what they add up to."""
        return self._request("GET", f"/api/v1/jobs/{int(job_id)}/tasks?offset={int(offset)}&limit={int(limit)}")

    def queue(self, *, states: Sequence[str] = (), limit: int = 10_000) -> list[dict[str, Any]]:
        return self._list("active", states, limit)

    def history(self, *, states: Sequence[str] = (), limit: int = 100, order: str = "id") -> list[dict[str, Any]]:
        """Finished jobs, newest first: by id, or (`order="start"`) latest start first, as `corral history` lists them."""
        return self._list("finished", states, limit, order)

    def _list(self, scope: str, states: Sequence[str], limit: int, order: str = "id") -> list[dict[str, Any]]:
        query = urllib.parse.urlencode([("scope", scope), ("limit", limit), *[("state", s) for s in states],
                                        *([("order", order)] if order != "id" else [])])
        return self._request("GET", f"/api/v1/jobs?{query}")["jobs"]

    def cancel(self, job_id: int | str) -> dict[str, Any]:
        return self._request("POST", f"/api/v1/jobs/{_ref(job_id)}/cancel")

    def cancel_jobs(self, job_ids: Sequence[int | str], *, pending_only: bool = False) -> list[dict[str, Any]]:
        """Cancel several jobs as one request: none of them starts on what the running ones free (`pending_only`:
        those running go on). One entry per job, in order: the job, or `{"ref", "error"}` for one not cancelled."""
        body = {"jobs": [_ref(job_id) for job_id in job_ids], "pending_only": pending_only}
        return self._request("POST", "/api/v1/jobs/cancel", body)["jobs"]

    def update(self, job_id: int | str, **changes: Any) -> dict[str, Any]:
        """Change a pending job: any of `corral.core.jobspec.job_spec.UPDATE_FIELDS` (time, nice, partition, qos, gpus,
        cpus, mem, name, preemptible, comment, begin, deadline, constraint, nodelist, exclude, mail_type,
        mail_user, time_min, dependency, priority); "" clears a field that can be cleared."""
        return self._request("PATCH", f"/api/v1/jobs/{_ref(job_id)}", {k: v for k, v in changes.items() if v is not None})

    def requeue(self, job_id: int | str, *, hold: bool = False) -> dict[str, Any]:
        """Queue a running or ended job again (a running one is stopped first); `hold`: it waits held."""
        return self._request("POST", f"/api/v1/jobs/{_ref(job_id)}/requeue{'?hold=true' if hold else ''}")

    def hold(self, job_id: int | str) -> dict[str, Any]:
        return self._request("POST", f"/api/v1/jobs/{_ref(job_id)}/hold")

    def release(self, job_id: int | str) -> dict[str, Any]:
        return self._request("POST", f"/api/v1/jobs/{_ref(job_id)}/release")

    def priorities(self) -> list[dict[str, Any]]:
        return self._request("GET", "/api/v1/priority")

    def wait(self, job_id: int | str, timeout: float | None = None, poll: float = 30.0) -> dict[str, Any]:
        """Block until the job ends (or `timeout` seconds pass); returns the job."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
            job = self._request("GET", f"/api/v1/jobs/{_ref(job_id)}/wait?timeout={left:.3f}")
            if job["state"] in TERMINAL or (deadline is not None and time.monotonic() >= deadline):
                return job

    def logs(self, job_id: int | str, *, stream: str = "stdout", offset: int = 0, tail: int | None = None) -> tuple[bytes, int, str]:
        """One chunk of a log: (bytes, next offset, job state)."""
        query = {"stream": stream, "offset": offset}
        if tail is not None:
            query["tail"] = tail
        status, headers, body = self._raw("GET", f"/api/v1/jobs/{_ref(job_id)}/logs?{urllib.parse.urlencode(query)}")
        if status >= 400:
            raise error_from_answer(status, body)
        return body, int(headers["x-corral-offset"]), headers["x-corral-state"]

    def follow(self, job_id: int | str, *, stream: str = "stdout", interval: float = 0.25) -> Iterator[bytes]:
        """Yield a log's bytes as they are written, until the job has ended and all is read."""
        offset = 0
        while True:
            data, offset, state = self.logs(job_id, stream=stream, offset=offset)
            if data:
                yield data
                continue
            if state in TERMINAL:
                return
            time.sleep(interval)

    def nodes(self) -> list[dict[str, Any]]:
        return self._request("GET", "/api/v1/nodes")

    def drain(self, node: str, reason: str, gpus: list[int] | None = None) -> list[dict[str, Any]]:
        """Drain GPUs of `node` (None: the whole node), admins only; returns the nodes as they are now."""
        return self._request("POST", f"/api/v1/nodes/{urllib.parse.quote(node, safe='')}/drain", {"reason": reason, "gpus": gpus})

    def resume(self, node: str, gpus: list[int] | None = None) -> list[dict[str, Any]]:
        """Give drained GPUs of `node` (None: the node and all its GPUs) back to scheduling, admins only."""
        return self._request("POST", f"/api/v1/nodes/{urllib.parse.quote(node, safe='')}/resume", {"gpus": gpus})

    def reservations(self) -> list[dict[str, Any]]:
        return self._request("GET", "/api/v1/reservations")

    def create_reservation(self, **fields: Any) -> dict[str, Any]:
        """Make a reservation (admins): name, gpus or gpu_ids, users and/or accounts, start, duration or end..."""
        return self._request("POST", "/api/v1/reservations", {k: v for k, v in fields.items() if v is not None})

    def update_reservation(self, name: str, **fields: Any) -> dict[str, Any]:
        """Change a reservation (admins): start, end or duration, gpus or gpu_ids, users, accounts, cpus, mem."""
        return self._request("PATCH", f"/api/v1/reservations/{urllib.parse.quote(name, safe='')}",
                             {k: v for k, v in fields.items() if v is not None})

    def delete_reservation(self, name: str) -> dict[str, Any]:
        return self._request("DELETE", f"/api/v1/reservations/{urllib.parse.quote(name, safe='')}")

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/api/v1/health")

    # -- monitoring and alerts --------------------------------------------------------------------

    def metrics(self, job_id: int | str, metric: str, *, start: str | None = None, end: str | None = None,
                max_points: int = 1000) -> dict[str, Any]:
        """A job's metric over time: `start` like `-30m`, `-2h`, ISO 8601 or epoch seconds."""
        query: list[tuple[str, Any]] = [("metric", metric), ("job", _ref(job_id)), ("max_points", max_points)]
        query += [(name, value) for name, value in (("start", start), ("end", end)) if value is not None]
        return self._request("GET", f"/api/v1/metrics?{urllib.parse.urlencode(query)}")

    def top(self) -> list[dict[str, Any]]:
        """Each running job now: GPUs, CPU, memory and training progress."""
        return self._request("GET", "/api/v1/top")

    def create_alert(self, name: str, condition: str, *, severity: str = "warning", message: str = "",
                     job: int | None = None, label: str | None = None, user: str | None = None,
                     channels: Sequence[str] = ()) -> dict[str, Any]:
        """A rule such as `state == FAILED`, `gpu_utilization < 10 for 15m` or `metric.loss is nan`."""
        body = {"name": name, "condition": condition, "severity": severity, "message": message, "job": job,
                "label": label, "user": user, "channels": list(channels)}
        return self._request("POST", "/api/v1/alerts/rules", {k: v for k, v in body.items() if v is not None})

    def alert_rules(self) -> list[dict[str, Any]]:
        return self._request("GET", "/api/v1/alerts/rules")

    def delete_alert(self, name: str) -> None:
        self._request("DELETE", f"/api/v1/alerts/rules/{_name(name)}")

    def add_channel(self, name: str, type: str, **config: Any) -> dict[str, Any]:
        """A channel: webhook (url), slack (url), email (to), command (argv or command)."""
        return self._request("POST", "/api/v1/alerts/channels", {"name": name, "type": type, **config})

    def share_channel(self, name: str, users: Sequence[str] = (), *, everyone: bool = False) -> dict[str, Any]:
        """Share a channel (admins only) with these users, or with everyone; no users and not everyone: nobody."""
        body: dict[str, Any] = {"all": True} if everyone else {"users": list(users)}
        return self._request("PUT", f"/api/v1/alerts/channels/{_name(name)}/sharing", body)

    def channels(self) -> list[dict[str, Any]]:
        return self._request("GET", "/api/v1/alerts/channels")

    def delete_channel(self, name: str) -> None:
        self._request("DELETE", f"/api/v1/alerts/channels/{_name(name)}")

    def test_channel(self, name: str) -> dict[str, Any]:
        return self._request("POST", f"/api/v1/alerts/channels/{_name(name)}/test")

    def alerts(self, *, status: str | None = None, job: int | None = None, unacknowledged: bool = False,
               limit: int = 100) -> list[dict[str, Any]]:
        """Firings, newest first, with their deliveries."""
        query: list[tuple[str, Any]] = [("limit", limit)]
        query += [(k, v) for k, v in (("status", status), ("job", job)) if v is not None]
        if unacknowledged:
            query.append(("unacknowledged", "true"))
        return self._request("GET", f"/api/v1/alerts?{urllib.parse.urlencode(query)}")

    def acknowledge(self, firing_id: int) -> dict[str, Any]:
        return self._request("POST", f"/api/v1/alerts/{int(firing_id)}/ack")

    # -- runs (tracking) --------------------------------------------------------------------------

    def create_run(self, **fields: Any) -> dict[str, Any]:
        """Create a run, or get the one this `uid` or `resume_key` names (see docs/tracking-api.md)."""
        return self._request("POST", "/api/v1/runs", {k: v for k, v in fields.items() if v is not None})

    def get_run(self, ref: int | str) -> dict[str, Any]:
        return self._request("GET", f"/api/v1/runs/{_run_ref(ref)}")

    def runs(self, *, project: str | None = None, tag: str | None = None, state: str | None = None,
             job: int | str | None = None, where: Sequence[str] = (), limit: int = 100,
             archived: bool = False) -> list[dict[str, Any]]:
        """Runs, newest first; `where` holds filters such as `config.lr=0.1` or `metric.loss.min<0.2`;
        `archived`: the archived runs instead of the others."""
        query: list[tuple[str, Any]] = [("limit", limit), ("archived", "true" if archived else "false")]
        for name, value in (("project", project), ("tag", tag), ("state", state), ("job", job)):
            if value is not None:
                query.append((name, value))
        query += [("where", w) for w in where]
        return self._request("GET", f"/api/v1/runs?{urllib.parse.urlencode(query)}")["runs"]

    def projects(self) -> list[dict[str, Any]]:
        return self._request("GET", "/api/v1/projects")["projects"]

    def log_metrics(self, ref: int | str, batch: dict[str, Any]) -> dict[str, Any]:
        """Append one batch (`{"batch_id", "metrics": [...]}` or `{"batch_id", "points": [...]}`)."""
        return self._request("POST", f"/api/v1/runs/{_run_ref(ref)}/metrics", batch)

    def log_params(self, ref: int | str, params: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", f"/api/v1/runs/{_run_ref(ref)}/params", {"params": params})

    def tag_run(self, ref: int | str, *, add: Sequence[str] = (), remove: Sequence[str] = ()) -> dict[str, Any]:
        return self._request("POST", f"/api/v1/runs/{_run_ref(ref)}/tags", {"add": list(add), "remove": list(remove)})

    def log_artifacts(self, ref: int | str, artifacts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._request("POST", f"/api/v1/runs/{_run_ref(ref)}/artifacts", {"artifacts": list(artifacts)})["artifacts"]

    def artifacts(self, ref: int | str, *, type: str | None = None, deleted: bool = False) -> list[dict[str, Any]]:
        query: list[tuple[str, Any]] = [("deleted", "true" if deleted else "false")]
        if type is not None:
            query.append(("type", type))
        return self._request("GET", f"/api/v1/runs/{_run_ref(ref)}/artifacts?{urllib.parse.urlencode(query)}")["artifacts"]

    def change_run(self, ref: int | str, **changes: Any) -> dict[str, Any]:
        """Set a run's `name`, `notes` (Markdown; None clears them) or `archived`."""
        return self._request("PATCH", f"/api/v1/runs/{_run_ref(ref)}", changes)

    def delete_run(self, ref: int | str) -> dict[str, Any]:
        """Delete a run, its metrics and its uploaded artifacts (no undo)."""
        return self._request("DELETE", f"/api/v1/runs/{_run_ref(ref)}")

    def upload_artifact(self, ref: int | str, source: str, name: str, *, type: str = "file",
                        chunk_bytes: int = UPLOAD_CHUNK, sha256: str | None = None, step: int | None = None,
                        caption: str | None = None, on_chunk: Any = None) -> dict[str, Any]:
        """Upload the file `source` as the run's artifact `name`, resumably: an upload cut short
        continues where the server's bytes stop when called again. Content the owner's runs hold
        already is linked without sending it. Returns the artifact.

        `step`, `caption`: where logged media (an image, a histogram, text, a table) belong (corral.sdk.media).
        `on_chunk(offset)` is called after each chunk is acknowledged.
        """
        import hashlib

        with open(source, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if sha256 is None:
                digest = hashlib.sha256()
                while block := f.read(1 << 20):
                    digest.update(block)
                sha256 = digest.hexdigest()
            base = f"/api/v1/runs/{_run_ref(ref)}/uploads"
            begin = {"path": name, "size": size, "sha256": sha256, "type": type, "step": step, "caption": caption}
            begin = {k: v for k, v in begin.items() if v is not None}
            state = self._request("POST", base, begin)
            while not state["complete"]:
                offset = int(state["offset"])
                f.seek(offset)
                chunk = f.read(chunk_bytes)
                if not chunk:
                    raise InvalidRequest("source", f"{source} is shorter than when it was hashed", "upload it again")
                path = f"{base}/{state['upload_id']}?offset={offset}"
                status, _, data = self._raw("PUT", path, chunk, content_type="application/octet-stream")
                if status == 409:  # another try got further (or less far): ask where it stands
                    state = self._request("POST", base, begin)
                    continue
                if status >= 400:
                    raise error_from_answer(status, data)
                state = json.loads(data)
                if on_chunk is not None:
                    on_chunk(int(state["offset"]))
        return state["artifact"]

    def download_artifact(self, ref: int | str, path: str, dest: Any, *, start: int = 0,
                          end: int | None = None) -> int:
        """Write the artifact's bytes (from `start`, to `end` inclusive) into the binary file `dest`;
        the number written."""
        query = urllib.parse.urlencode({"path": path})
        headers = {}
        if start or end is not None:
            headers["Range"] = f"bytes={start}-{'' if end is None else end}"
        conn = self._connection()
        try:
            self._auth(headers)
            conn.request("GET", f"/api/v1/runs/{_run_ref(ref)}/artifacts/content?{query}", headers=headers)
            response = conn.getresponse()
            if response.status >= 400:
                raise error_from_answer(response.status, response.read())
            written = 0
            while block := response.read(1 << 20):
                dest.write(block)
                written += len(block)
            return written
        except OSError as exc:
            raise ServerUnavailable(f"the download from {self.url} broke off: {exc}") from None
        finally:
            conn.close()

    def finish_run(self, ref: int | str, state: str = "finished", end_time: float | None = None,
                   start_time: float | None = None) -> dict[str, Any]:
        """End a run; `start_time` corrects its start where the real one is known only now (an import)."""
        body: dict[str, Any] = {"state": state}
        if end_time is not None:
            body["end_time"] = end_time
        if start_time is not None:
            body["start_time"] = start_time
        return self._request("POST", f"/api/v1/runs/{_run_ref(ref)}/finish", body)

    def series(self, ref: int | str, key: str, *, max_points: int = 2000, start: int | None = None,
               end: int | None = None) -> dict[str, Any]:
        """One metric's points, downsampled to `max_points` keeping each bucket's min and max."""
        query: list[tuple[str, Any]] = [("key", key), ("max_points", max_points)]
        if start is not None:
            query.append(("start", start))
        if end is not None:
            query.append(("end", end))
        return self._request("GET", f"/api/v1/runs/{_run_ref(ref)}/series?{urllib.parse.urlencode(query)}")

    # -- tokens -----------------------------------------------------------------------------------

    def create_token(self, *, scope: str = "submit", expires: str = "30d", name: str | None = None,
                     user: str | None = None) -> dict[str, Any]:
        """A new API token; its secret (`token`) is in this answer only."""
        body = {"scope": scope, "expires": expires, "name": name, "user": user}
        return self._request("POST", "/api/v1/tokens", {k: v for k, v in body.items() if v is not None})

    def tokens(self, *, all: bool = False) -> list[dict[str, Any]]:
        return self._request("GET", "/api/v1/tokens" + ("?all=true" if all else ""))["tokens"]

    def revoke_token(self, token_id: int) -> dict[str, Any]:
        return self._request("DELETE", f"/api/v1/tokens/{int(token_id)}")

    def whoami(self) -> dict[str, Any]:
        """Who the server takes this client for: user, scope, and how it knows."""
        return self._request("GET", "/api/v1/whoami")

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ref(job_id: int | str) -> str:
    """A job id or ID_TASK, checked before it goes into a URL."""
    text = str(job_id)
    head, _, task = text.partition("_")
    if not head.isdigit() or not head.isascii() or (task and not (task.isdigit() and task.isascii())):
        raise InvalidRequest("job_id", f"{text!r} is not a job id", "write 12, or 12_3 for task 3 of array 12")
    return text


def _name(name: str) -> str:
    """A rule's or channel's name, checked before it goes into a URL."""
    if not (0 < len(name) <= 64 and name.isascii() and all(c.isalnum() or c in "_-." for c in name)):
        raise InvalidRequest("name", f"{name!r} is not a rule or channel name", "letters, digits, '-', '_' and '.'")
    return name


def _run_ref(ref: int | str) -> str:
    """A run id or uid, checked before it goes into a URL."""
    text = str(ref)
    if not (0 < len(text) <= 64 and text.isascii() and all(c.isalnum() or c in "_-" for c in text)):
        raise InvalidRequest("run", f"{text!r} is not a run id", "give the run's number or its uid (letters, digits, _ and -)")
    return text
