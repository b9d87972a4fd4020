"""Reading and writing jobs. Every method is one transaction."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, func, select, text, update

from corral.core.jobspec.arrays import format_ranges, parse_array, parse_ranges
from corral.core.jobspec.events import JobEvent
from corral.core.jobspec.job import Job
from corral.core.jobspec.spec import JobSpec
from corral.core.jobspec.spec_container import ContainerSpec
from corral.core.jobspec.states import ACTIVE_STATES, JobState
from corral.store.schema import job_events, job_scripts, jobs

_SPEC_COLUMNS = (
    "name", "user", "command", "script_args", "gpus", "gpu_type", "gpu_mem_mb", "cpus", "mem_mb",
    "time_limit_s", "env", "inherit_env", "labels", "workdir", "submit_dir", "stdout", "stderr", "nice",
    "partition", "qos", "dependency", "kill_on_invalid_dep", "array", "preemptible", "requeue", "warn_signal", "nodes",
    "account", "umask", "requirements", "user_log", "open_mode", "comment", "begin_time", "deadline", "exclusive",
    "features", "nodelist", "exclude", "mail_type", "mail_user", "time_min_s", "priority", "interactive",
    "ntasks", "ntasks_per_node", "gpus_per_task", "parent", "reservation",
    "gpu_shards", "gpu_share_mb",
)
_IDS_PER_QUERY = 500  # well under SQLite's bound-parameter limit


class JobStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def insert(self, specs: Sequence[JobSpec], now: float,
               notes: Sequence[tuple[str, Mapping[str, Any]] | None] = ()) -> list[Job]:
        """Persist new jobs as PENDING in one transaction; returns them with their ids. `notes`: for each spec, an
        event (kind, detail) its job's timeline starts with (who ran it again), or None."""
        with self.engine.begin() as conn:
            made = self._insert(conn, specs, now, None, ())
            events = [{"job_id": job.id, "time": now, "kind": note[0], "detail": dict(note[1])}
                      for job, note in zip(made, notes) if note is not None]
            if events:
                conn.execute(job_events.insert(), events)
            return made

    def add_tasks(self, array: Job, spec: JobSpec, task_ids: Sequence[int]) -> list[Job]:
        """Make records for some of an array's tasks and take them off its waiting list, in one
        transaction: a crash leaves each task either waiting in the array or a job of its own."""
        taken = set(task_ids)
        remaining = [t for t in array.array_pending if t not in taken]
        with self.engine.begin() as conn:
            tasks = self._insert(conn, [spec] * len(task_ids), array.submit_time, array.id, task_ids)
            conn.execute(update(jobs).where(jobs.c.id == array.id).values(array_pending=format_ranges(remaining)))
        array.array_pending = remaining
        return tasks

    def _insert(self, conn: Connection, specs: Sequence[JobSpec], now: float, array_job_id: int | None,
                task_ids: Sequence[int]) -> list[Job]:
        rows = [
            _spec_row(spec) | {
                # submitted held (-H); an array's tasks are held through the array
                "state": JobState.PENDING.value, "submit_time": now, "held": spec.hold and array_job_id is None,
                "restarts": 0,
                "array_pending": (format_ranges(parse_array(spec.array).task_ids)
                                  if spec.array and array_job_id is None else None),
                "array_job_id": array_job_id, "array_task_id": task_ids[i] if array_job_id is not None else None,
            }
            for i, spec in enumerate(specs)
        ]
        if not rows:
            return []
        if self.engine.dialect.name == "sqlite":
            # SQLite cannot promise RETURNING's row order, so SQLAlchemy would send one
            # INSERT per row. One executemany instead: under the write lock, with
            # AUTOINCREMENT, the new ids are the consecutive ones ending at max(id).
            conn.execute(jobs.insert(), rows)
            last: int = conn.execute(select(func.max(jobs.c.id))).scalar_one()
            ids = list(range(last - len(rows) + 1, last + 1))
        else:
            stmt = jobs.insert().returning(jobs.c.id, sort_by_parameter_order=True)
            ids = [row[0] for row in conn.execute(stmt, rows)]
        scripts = [{"job_id": i, "script": spec.script} for i, spec in zip(ids, specs) if spec.script is not None]
        if scripts and array_job_id is None:  # an array's tasks share the array's script
            conn.execute(job_scripts.insert(), scripts)
        return [
            Job(id=i, spec=spec, state=JobState.PENDING, submit_time=now, held=row["held"], array_job_id=array_job_id,
                array_task_id=row["array_task_id"], array_pending=parse_ranges(row["array_pending"] or ""))
            for i, spec, row in zip(ids, specs, rows)
        ]

    def save_spec(self, job: Job) -> None:
        """Write a job's changed spec (`corral update`)."""
        with self.engine.begin() as conn:
            conn.execute(update(jobs).where(jobs.c.id == job.id).values(_spec_row(job.spec)))

    def save_state(self, job: Job, events: Sequence[JobEvent] = ()) -> None:
        """Write a job's mutable fields (state, reason, times, exit status, placement), and the events
        that explain the change, in one transaction."""
        self.save_states([job], events)

    def save_states(self, batch: Iterable[Job], events: Sequence[JobEvent] = ()) -> None:
        rows = [_state_row(job) for job in batch]
        if not rows and not events:
            return
        with self.engine.begin() as conn:
            _save_states(conn, rows, events)

    def save_cancels(self, changed: Sequence[Job], unstarted: Sequence[tuple[Job, JobSpec, Sequence[int]]],
                     cancelled: tuple[float, str], events: Callable[[Sequence[Job]], Sequence[JobEvent]]) -> list[Job]:
        """A cancel of many jobs, in one transaction: the states of the jobs it changed (arrays with their
        waiting lists as they are on them), and records of the array tasks it cancelled before they started
        (`unstarted`: array, the tasks' spec, task ids), inserted ended CANCELLED at `cancelled` (end time,
        reason). `events`: what the cancel writes for the jobs, the new records included. Returns those records."""
        end_time, reason = cancelled
        with self.engine.begin() as conn:
            tasks = []
            for array, spec, task_ids in unstarted:
                tasks += self._insert(conn, [spec] * len(task_ids), array.submit_time, array.id, task_ids)
            for task in tasks:
                task.state, task.end_time, task.reason = JobState.CANCELLED, end_time, reason
            batch = [*changed, *tasks]
            _save_states(conn, [_state_row(job) for job in batch], events(batch))
        return tasks

    def events_of(self, job_ids: Sequence[int]) -> dict[int, list[JobEvent]]:
        """The stored events of these jobs, oldest first (jobs without any are left out)."""
        found: dict[int, list[JobEvent]] = {}
        with self.engine.connect() as conn:
            for at in range(0, len(job_ids), _IDS_PER_QUERY):
                chunk = list(job_ids[at:at + _IDS_PER_QUERY])
                stmt = (select(job_events).where(job_events.c.job_id.in_(chunk))
                        .order_by(job_events.c.job_id, job_events.c.time, job_events.c.id))
                for row in conn.execute(stmt):
                    found.setdefault(row.job_id, []).append(JobEvent(row.job_id, row.time, row.kind, row.detail))
        return found

    def active(self) -> list[Job]:
        """Jobs not yet finished, oldest first, with their scripts (they are still to run)."""
        stmt = _with_script().where(jobs.c.state.in_([s.value for s in ACTIVE_STATES])).order_by(jobs.c.id)
        with self.engine.connect() as conn:
            return [_job(row._mapping) for row in conn.execute(stmt)]

    def get_task(self, array_job_id: int, task_id: int) -> Job | None:
        stmt = _with_script().where(jobs.c.array_job_id == array_job_id, jobs.c.array_task_id == task_id)
        with self.engine.connect() as conn:
            row = conn.execute(stmt.order_by(jobs.c.id.desc())).first()
        return _job(row._mapping) if row else None

    def task_states(self, array_job_id: int) -> list[JobState]:
        """The states of an array's tasks that were started (or cancelled after materializing)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(jobs.c.state).where(jobs.c.array_job_id == array_job_id))
            return [JobState(row[0]) for row in rows]

    def tasks(self, array_job_id: int) -> list[Job]:
        """The tasks of an array that have records, by task id, without scripts (the newest record of
        a task where it has several)."""
        stmt = select(jobs).where(jobs.c.array_job_id == array_job_id).order_by(jobs.c.array_task_id, jobs.c.id)
        with self.engine.connect() as conn:
            newest = {row.array_task_id: _job(row._mapping) for row in conn.execute(stmt)}
        return list(newest.values())

    def next_id(self) -> int:
        """The id the next job submitted would get (as things stand: another submit may take it first)."""
        with self.engine.connect() as conn:
            if self.engine.dialect.name == "sqlite":  # AUTOINCREMENT never reuses an id, even a deleted job's
                seq = conn.execute(text("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'")).scalar()
                if seq is not None:
                    return int(seq) + 1
            last = conn.execute(select(func.max(jobs.c.id))).scalar()
        return int(last or 0) + 1

    def get(self, job_id: int) -> Job | None:
        with self.engine.connect() as conn:
            row = conn.execute(_with_script().where(jobs.c.id == job_id)).first()
        return _job(row._mapping) if row else None

    def usage_since(self, since: float) -> list[tuple[str, int, int, int, str | None, list[int] | None, float, float]]:
        """(user, gpus, cpus, GPU share in MB, node, GPU indexes, start, end) of jobs that ran and ended after
        `since`: fair share's history."""
        stmt = select(jobs.c.user, jobs.c.gpus, jobs.c.cpus, jobs.c.gpu_share_mb, jobs.c.node, jobs.c.gpu_ids,
                      jobs.c.start_time, jobs.c.end_time).where(
            jobs.c.end_time >= since, jobs.c.start_time.is_not(None)
        )
        with self.engine.connect() as conn:
            return [tuple(row) for row in conn.execute(stmt)]  # type: ignore[misc]

    def finished(
        self, *, limit: int, before_id: int | None = None, states: Sequence[str] = (), name: str | None = None,
        ended_after: float | None = None, by_start: bool = False,
    ) -> list[Job]:
        """Finished jobs, newest first, without their scripts (`get` reads one job's); `ended_after`: only
        those that ended at or after that time (epoch seconds). Newest: the highest id, or with `by_start` the
        latest start (a job that never started, cancelled while it waited: its end)."""
        terminal = [s.value for s in JobState if s.is_terminal()]
        stmt = select(jobs).where(jobs.c.state.in_([s for s in states if s in terminal] if states else terminal))
        if before_id is not None:
            stmt = stmt.where(jobs.c.id < before_id)
        if name is not None:
            stmt = stmt.where(jobs.c.name == name)
        if ended_after is not None:
            stmt = stmt.where(jobs.c.end_time >= ended_after)
        newest = (func.coalesce(jobs.c.start_time, jobs.c.end_time).desc(), jobs.c.id.desc()) if by_start else (
            jobs.c.id.desc(),)
        stmt = stmt.order_by(*newest).limit(limit)
        with self.engine.connect() as conn:
            return [_job(row._mapping) for row in conn.execute(stmt)]


def _with_script() -> Any:
    """Jobs with their scripts: a task's is its array's."""
    owner = func.coalesce(jobs.c.array_job_id, jobs.c.id)
    return select(jobs, job_scripts.c.script).outerjoin(job_scripts, job_scripts.c.job_id == owner)


def _spec_row(spec: JobSpec) -> dict[str, Any]:
    row = {name: getattr(spec, name) for name in _SPEC_COLUMNS}
    row["command"] = list(spec.command)
    row["script_args"] = list(spec.script_args)
    row["env"] = dict(spec.env)
    row["labels"] = dict(spec.labels)
    for name in ("nodelist", "exclude", "mail_type"):  # names, comma-separated
        row[name] = ",".join(getattr(spec, name)) or None
    row["container"] = json.dumps(spec.container.to_dict()) if spec.container is not None else None
    return row


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(text.split(",")) if text else ()


def _save_states(conn: Connection, rows: Sequence[dict[str, Any]], events: Sequence[JobEvent]) -> None:
    if rows:
        stmt = (
            update(jobs)
            .where(jobs.c.id == bindparam("job_id"))
            .values({k: bindparam(k) for k in rows[0] if k != "job_id"})
        )
        conn.execute(stmt, rows)
    if events:
        conn.execute(job_events.insert(), [
            {"job_id": e.job_id, "time": e.time, "kind": e.kind, "detail": dict(e.detail)} for e in events
        ])


def _state_row(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.id,
        "state": job.state.value,
        "reason": job.reason,
        "exit_code": job.exit_code,
        "signal": job.signal,
        "start_time": job.start_time,
        "end_time": job.end_time,
        "node": job.node,
        "gpu_ids": list(job.gpu_ids) if job.gpu_ids is not None else None,
        "held": job.held,
        "restarts": job.restarts,
        "array_pending": format_ranges(job.array_pending) if job.is_array else None,
        "backend_id": job.backend_id,
    }


def _job(row: Mapping[Any, Any]) -> Job:  # a RowMapping: keyed by names (and by columns)
    spec = JobSpec(
        name=row["name"], user=row["user"], command=tuple(row["command"]), script=row.get("script"),
        script_args=tuple(row["script_args"]), gpus=row["gpus"], gpu_type=row["gpu_type"],
        gpu_mem_mb=row["gpu_mem_mb"], cpus=row["cpus"], mem_mb=row["mem_mb"], time_limit_s=row["time_limit_s"],
        env=row["env"], inherit_env=row["inherit_env"], labels=row["labels"], workdir=row["workdir"],
        submit_dir=row["submit_dir"], partition=row["partition"], qos=row["qos"], dependency=row["dependency"],
        kill_on_invalid_dep=row["kill_on_invalid_dep"], array=row["array"], preemptible=row["preemptible"],
        requeue=row["requeue"],
        warn_signal=row["warn_signal"], nodes=row["nodes"], account=row["account"], umask=row["umask"],
        requirements=row["requirements"], user_log=row["user_log"], open_mode=row["open_mode"], comment=row["comment"],
        begin_time=row["begin_time"], deadline=row["deadline"], exclusive=row["exclusive"], features=row["features"],
        nodelist=_names(row["nodelist"]), exclude=_names(row["exclude"]), mail_type=_names(row["mail_type"]),
        mail_user=row["mail_user"], time_min_s=row["time_min_s"], priority=row["priority"],
        interactive=row["interactive"], ntasks=row["ntasks"], ntasks_per_node=row["ntasks_per_node"],
        gpus_per_task=row["gpus_per_task"], parent=row["parent"], reservation=row["reservation"],
        gpu_shards=row["gpu_shards"], gpu_share_mb=row["gpu_share_mb"],
        container=ContainerSpec.from_dict(json.loads(row["container"])) if row["container"] else None,
        stdout=row["stdout"], stderr=row["stderr"], nice=row["nice"],
    )
    return Job(
        id=row["id"], spec=spec, state=JobState(row["state"]), submit_time=row["submit_time"], reason=row["reason"],
        exit_code=row["exit_code"], signal=row["signal"], start_time=row["start_time"], end_time=row["end_time"],
        node=row["node"], gpu_ids=tuple(row["gpu_ids"]) if row["gpu_ids"] is not None else None, held=row["held"],
        array_job_id=row["array_job_id"], array_task_id=row["array_task_id"],
        array_pending=parse_ranges(row["array_pending"] or ""), restarts=row["restarts"], backend_id=row["backend_id"],
    )
