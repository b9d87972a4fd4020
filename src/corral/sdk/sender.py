"""The background thread that takes a run's queued calls to the server, or to the spool.

`Run.log` extends a deque with `step, time, dict` and returns; other calls add
`None, kind, payload`. This thread wakes every flush interval (sooner when the queue is long,
at once when asked to flush), turns what it finds into columnar batches and posts them. The
first failure to reach the server warns once and switches the run to the spool: from then on
every record goes to disk, in order (per key, steps only increase, so nothing may overtake a
spooled batch), and the thread tries to drain the spool 1 s later, then after 2 s, 4 s ... (at
most `retry_interval_s` apart) until it is empty, when live sending resumes. A server restarted
meanwhile is found again, on any port, by the fresh client each try makes (corral.client). Nothing
here raises into the training loop.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import sys
import time
from collections import deque
from collections.abc import Callable
from itertools import repeat
from operator import call
from typing import TYPE_CHECKING, Any

from corral.sdk.backoff import RETRY_INTERVAL_S, Backoff
from corral.sdk.batches import MAX_BATCH_POINTS, ColumnBuilder
from corral.sdk.files import directory_size, sha256_file
from corral.sdk.posting import REJECTED, SKIPPED_WHY, post_record, upload
from corral.sdk.sender_thread import SenderThread
from corral.sdk.server_link import Connect, ServerLink
from corral.sdk.spool import RunSpool

if TYPE_CHECKING:
    from corral.sdk.places import SpoolPlaces

logger = logging.getLogger("corral.sdk")

class Sender:
    """Owns one run's queue, its connection and its spool; all network and disk work runs here."""

    def __init__(self, queue: deque, *, request: dict[str, Any], connect: Connect | None, places: SpoolPlaces,
                 spool: RunSpool | None = None, run_id: int | None = None, flush_interval_s: float = 1.0,
                 retry_interval_s: float = RETRY_INTERVAL_S, max_batch_points: int = MAX_BATCH_POINTS,
                 on_created: Callable[[dict[str, Any]], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.queue = queue
        self.request = request
        self.run_id = run_id
        self.spool = spool
        self.places = places
        self._link = ServerLink(connect)
        # a resumed spool with records still in it must be emptied before anything goes live
        self.spooling = self._link.offline or (spool is not None and not spool.empty)
        self._backoff = Backoff(retry_interval_s, clock)
        self._on_created = on_created
        self._warned: set[str] = set()
        self._skipped_points = 0  # this run's points the server skipped, all told
        self._skipped_told = 0  # how many of them a warning has counted
        self._builder = ColumnBuilder(max_batch_points, self._warn)
        self._thread = SenderThread(self._loop, flush_interval_s, clock)

    # -- called from the training thread ----------------------------------------------------------

    def create_run(self) -> dict[str, Any] | None:
        """Create (or resume) the run on the server now; None if that failed (the run spools).

        Raises:
            InvalidRequest: the server refused the request itself (a bad project, name or tag).
        """
        if self._link.offline:
            return None
        try:
            run = self._link.client().create_run(**self.request)
        except REJECTED:
            raise  # a bad project, name or tag: no retry will fix it, and training has not started
        except Exception as exc:  # noqa: BLE001 - no server error may stop training
            self._failed(exc)
            return None
        self._created(run)
        return run

    def start(self) -> None:
        self._thread.start()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued before this call was sent or spooled; False on timeout."""
        return self._thread.flush(timeout)

    def close(self, timeout: float | None) -> bool:
        """Send or spool what is queued, try the spool once more, stop; False if `timeout` ran out."""
        return self._thread.close(timeout)

    # -- the thread -------------------------------------------------------------------------------

    def _loop(self) -> None:
        thread = self._thread
        while True:
            thread.wait(self.queue)
            ticket, closing = thread.begin_round()
            try:
                self._pump()
                if self.spooling and not self._link.offline and (closing or self._backoff.due()):
                    self._drain()
            except Exception as exc:  # noqa: BLE001 - a bug here must not end the thread silently
                self._warn("internal", f"internal error in the sender thread: {exc!r}")
            thread.end_round(ticket)
            if closing and not self.queue:
                break
        self._close_spool()
        if self._skipped_points > self._skipped_told:  # the first warning counted one batch: now the whole run
            logger.warning("corral: run %s: in all, the server skipped %d points %s", self.request.get("uid"),
                           self._skipped_points, SKIPPED_WHY)

    def _pump(self) -> None:
        """Take what is queued now (not what arrives meanwhile: a fast loop must not starve a flush)."""
        queue, builder = self.queue, self._builder
        # records are three items each: (step, time, dict), or (None, kind, payload) for the rest;
        # the producer adds all three in one deque.extend, which no other thread can interleave
        count = len(queue) // 3 * 3
        if not count:
            return
        items = list(map(call, repeat(queue.popleft, count)))
        steps, times, datas = items[0::3], items[1::3], items[2::3]
        start = 0
        while start < len(steps):
            try:
                op = steps.index(None, start)
            except ValueError:
                op = len(steps)
            if op > start:
                builder.extend(steps[start:op], times[start:op], datas[start:op])
                self._ship()
            if op < len(steps):
                builder.seal()
                self._ship()
                self._operation(times[op], datas[op])
            start = op + 1
        builder.seal()
        self._ship()

    def _ship(self) -> None:
        for batch, points, last_step in self._builder.take_ready():
            self._deliver({"kind": "metrics", "batch": batch, "points": points, "last_step": last_step})

    def _operation(self, kind: str, payload: Any) -> None:
        if kind == "artifact_file":
            self._deliver({"kind": "artifacts", "artifacts": [self._describe_file(payload)]})
        elif kind == "artifact_upload":
            for record in self._uploads(payload):
                self._deliver(record)
        elif kind == "media":
            for key, item in payload["items"].items():
                self._deliver_media(key, payload["step"], item)
        elif kind == "finish":
            self._finish(payload["state"], payload["end_time"])
        else:
            self._deliver({"kind": kind, **payload})

    def _describe_file(self, artifact: dict[str, Any]) -> dict[str, Any]:
        if artifact.get("deleted"):
            return artifact
        try:
            if os.path.isdir(artifact["path"]):  # a checkpoint directory (Hugging Face's): its size, no hash
                artifact["size"] = directory_size(artifact["path"])
            else:
                artifact["size"], artifact["sha256"] = sha256_file(artifact["path"])
        except OSError as exc:
            self._warn(f"artifact:{artifact['path']}", f"cannot read artifact {artifact['path']}: {exc}")
        return artifact

    def _uploads(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        """One upload record per file (a directory's files under its name), each hashed now."""
        source, name = payload["source"], payload["name"]
        if os.path.isdir(source):
            files = [(os.path.join(root, f), f"{name}/{os.path.relpath(os.path.join(root, f), source)}")
                     for root, _, names in sorted(os.walk(source)) for f in sorted(names)]
        else:
            files = [(source, name)]
        records = []
        for path, artifact_name in files:
            try:
                size, sha = sha256_file(path)
            except OSError as exc:
                self._warn(f"artifact:{path}", f"cannot read artifact {path}: {exc}")
                continue
            records.append({"kind": "upload", "source": path, "name": artifact_name.replace(os.sep, "/"),
                            "type": payload["type"], "size": size, "sha256": sha})
        return records

    def _deliver_media(self, key: str, step: int, item: Any) -> None:
        """An image, histogram, text or table made into bytes here (off the training loop), then uploaded (or
        spooled) as `media/<key>/<step>`; the temporary file goes once it is sent or copied."""
        try:
            data = item.encode()
            fd, path = tempfile.mkstemp(prefix="corral-media-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except Exception as exc:  # noqa: BLE001 - a bad image must not stop the run's thread
            self._warn(f"media:{key}", f"dropped {item.type} {key!r}: {exc}")
            return
        try:
            record = {"kind": "upload", "source": path, "name": f"media/{key}/{int(step):08d}{item.suffix}",
                      "type": item.type, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "step": int(step)}
            if item.caption:
                record["caption"] = item.caption
            self._deliver(record)
        finally:
            os.unlink(path)

    def _deliver(self, record: dict[str, Any]) -> None:
        if not self.spooling:
            try:
                post_record(self._link.client(), self.run_id, record, self._skipped)  # type: ignore[arg-type]
                return
            except REJECTED as exc:
                self._warn(f"rejected:{record['kind']}", f"the server refused a {record['kind']} record: {exc}")
                return
            except Exception as exc:  # noqa: BLE001
                self._failed(exc)
        try:
            spool = self._open_spool()
            if record["kind"] == "upload":  # the bytes travel with the spool: the file may be gone by the sync
                kept, size, sha = spool.keep_file(record["source"])
                record = {**record, "source": kept, "size": size, "sha256": sha}
            spool.write(record)
        except OSError as exc:
            self._warn("spool", f"cannot write the spool ({exc}); dropping data")

    def _finish(self, state: str, end_time: float) -> None:
        if not self.spooling:
            try:
                self._link.client().finish_run(self.run_id, state, end_time)
                return
            except REJECTED as exc:
                self._warn("rejected:finish", f"the server refused to finish the run: {exc}")
                return
            except Exception as exc:  # noqa: BLE001
                self._failed(exc)
        try:
            self._open_spool().write_finish(state, end_time)
        except OSError as exc:
            self._warn("spool", f"cannot write the spool ({exc}); dropping data")

    def _drain(self) -> bool:
        """Upload the spool in order; True when it is empty and live sending may resume."""
        spool = self.spool
        if spool is None:
            self.spooling = False
            return True
        try:
            client = self._link.client()
            if self.run_id is None:
                self._created(client.create_run(**spool.request))
            for problem in upload(spool, client, self.run_id).problems:  # type: ignore[arg-type]
                self._warn(f"spool:{problem[:40]}", f"{problem} (run {self.request.get('uid')})")
        except Exception as exc:  # noqa: BLE001
            self._link.drop()
            self._backoff.failed()
            logger.debug("corral: spool upload failed: %r", exc)
            return False
        self.spooling = False
        self._backoff.succeeded()
        logger.info("corral: the server is reachable again; run %s's spool is uploaded", self.request.get("uid"))
        return True

    def _close_spool(self) -> None:
        spool = self.spool
        if spool is None:
            return
        if spool.empty:
            spool.remove_all()
            return
        spool.release()
        print(f"corral: run {spool.uid} is spooled in {spool.path}; `corral sync {os.path.dirname(spool.path)}` "
              "uploads it", file=sys.stderr)

    # -- state ------------------------------------------------------------------------------------

    def _created(self, run: dict[str, Any]) -> None:
        self.run_id = run["id"]
        if self.spool is None and run.get("uid"):
            # a resumed run keeps the uid an earlier process gave it; a later spool must name that one
            self.request = {**self.request, "uid": run["uid"]}
        if self._on_created is not None:
            self._on_created(run)

    def _failed(self, exc: BaseException) -> None:
        self._link.drop()
        self.spooling = True
        self._backoff.failed()
        try:
            where = self._open_spool().path
        except OSError:
            where = self.places.chosen  # the write that follows warns what could not be written
        self._warn("transport", f"cannot reach the corral server ({exc}); logging to the spool in {where} "
                                f"until it is back (`corral sync` uploads what is left)")

    def _open_spool(self) -> RunSpool:
        if self.spool is None:
            self.spool, refused = self.places.create(self.request["uid"], self.request)
            if refused:
                self._warn("spool-place", f"cannot write the spool in {refused}; spooling in {self.spool.path} "
                                          "instead (the run is uploaded from there when the server is back)")
        return self.spool

    def _skipped(self, count: int) -> None:
        """The server skipped `count` points of a batch: warned at once (this batch's count), and the
        run's total once it ends, where more followed."""
        self._skipped_points += count
        if not self._skipped_told:
            self._skipped_told = self._skipped_points
            logger.warning("corral: run %s: the server skipped %d points %s (the total is told when the run ends)",
                           self.request.get("uid"), count, SKIPPED_WHY)

    def _warn(self, key: str, message: str) -> None:
        """Log `message` the first time `key` comes up in this run; training logs are no place for floods."""
        if key not in self._warned:
            self._warned.add(key)
            logger.warning("corral: %s", message)
