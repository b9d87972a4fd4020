"""The job store against real SQLite and PostgreSQL."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import MetaData, Table, inspect, text

from corral.core.jobspec.events import RUN_AGAIN, JobEvent
from corral.core.jobspec.states import JobState
from corral.store import migrate
from corral.store.db import database_url, open_engine
from corral.store.jobs import JobStore, _spec_row
from tests.helpers import make_spec


@pytest.fixture
def store(db_url, tmp_path):
    engine = open_engine(database_url(db_url, str(tmp_path)))
    migrate.upgrade(engine)
    yield JobStore(engine)
    engine.dispose()


def test_insert_assigns_increasing_ids_and_keeps_the_spec(store):
    specs = [make_spec(command=["echo", str(i)], gpus=i % 3, labels={"k": str(i)}, env={"A": "1"}) for i in range(5)]
    jobs = store.insert(specs, now=100.0)
    ids = [j.id for j in jobs]
    assert ids == sorted(ids) and len(set(ids)) == 5
    loaded = store.get(ids[3])
    assert loaded.spec.command == ("echo", "3")
    assert loaded.spec.gpus == 0 and loaded.spec.labels == {"k": "3"} and loaded.spec.env["A"] == "1"
    assert loaded.state is JobState.PENDING and loaded.submit_time == 100.0


def test_a_rerun_is_inserted_with_who_asked_for_it_on_its_timeline(store):
    first, again, other = store.insert([make_spec(), make_spec(), make_spec()], now=5.0,
                                       notes=[None, (RUN_AGAIN, {"by_user": "root", "of_job": 1}), None])
    assert store.events_of([first.id, again.id, other.id]) == {
        again.id: [JobEvent(again.id, 5.0, RUN_AGAIN, {"by_user": "root", "of_job": 1})]}


def test_state_changes_persist_and_active_lists_only_unfinished_jobs(store):
    a, b, c = store.insert([make_spec(), make_spec(), make_spec()], now=1.0)
    a.state, a.start_time, a.node, a.gpu_ids = JobState.RUNNING, 2.0, "n1", (0, 2)
    b.state, b.end_time, b.exit_code = JobState.FAILED, 3.0, 7
    store.save_states([a, b])
    active = {j.id: j for j in store.active()}
    assert set(active) == {a.id, c.id}
    assert active[a.id].gpu_ids == (0, 2) and active[a.id].node == "n1"
    assert store.get(b.id).exit_code == 7


def test_finished_is_newest_first_filtered_and_paged(store):
    jobs = store.insert([make_spec(name=f"j{i}") for i in range(6)], now=1.0)
    for i, job in enumerate(jobs):
        job.state = JobState.COMPLETED if i % 2 == 0 else JobState.FAILED
        job.end_time = 10.0 + i
    store.save_states(jobs)
    newest = store.finished(limit=3)
    assert [j.id for j in newest] == [jobs[5].id, jobs[4].id, jobs[3].id]
    older = store.finished(limit=10, before_id=jobs[3].id)
    assert [j.id for j in older] == [jobs[2].id, jobs[1].id, jobs[0].id]
    failed = store.finished(limit=10, states=["FAILED"])
    assert {j.id for j in failed} == {jobs[1].id, jobs[3].id, jobs[5].id}
    assert [j.id for j in store.finished(limit=10, name="j4")] == [jobs[4].id]


def test_unknown_job_is_none(store):
    assert store.get(424242) is None


def test_migrations_run_twice_without_change(store):
    migrate.upgrade(store.engine)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == migrate.HEAD


def test_a_database_of_the_first_release_upgrades_keeping_its_jobs(tmp_path):
    engine = open_engine(database_url(None, str(tmp_path)))
    migrate.upgrade(engine, "0001")
    old_jobs = Table("jobs", MetaData(), autoload_with=engine)  # the table as 0.1 made it
    row = _spec_row(make_spec(name="from-0.1")) | {
        "state": "PENDING", "submit_time": 1.0, "held": False, "restarts": 0, "kill_on_invalid_dep": False}
    with engine.begin() as conn:
        old_id = conn.execute(old_jobs.insert().values(**{k: v for k, v in row.items() if k in old_jobs.c})).inserted_primary_key[0]
    migrate.upgrade(engine)
    upgraded = JobStore(engine).get(old_id)
    assert (upgraded.spec.name, upgraded.spec.nodes, upgraded.backend_id) == ("from-0.1", 1, None)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar() == 0


def test_sqlite_uses_wal_and_full_sync(tmp_path):
    engine = open_engine(database_url(None, str(tmp_path)))
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA synchronous")).scalar() == 2  # FULL
    engine.dispose()
    assert os.path.exists(tmp_path / "corral.db")


def test_postgres_url_uses_psycopg3():
    assert database_url("postgresql://u@h/db", "/x").startswith("postgresql+psycopg://")


def test_unsupported_database_url_is_refused_with_the_fix():
    from corral.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="postgresql://"):
        database_url("mysql://root@localhost/x", "/x")


def test_scripts_live_apart_from_the_rows_that_history_reads(store):
    script = "#!/bin/sh\n" + "# padding\n" * 1000 + "echo hi\n"
    batch, plain = store.insert([make_spec(command=None, script=script), make_spec()], now=1.0)
    batch.state = plain.state = JobState.COMPLETED
    store.save_states([batch, plain])
    assert store.get(batch.id).spec.script == script  # `corral show` still has it
    assert {j.id: j.spec.script for j in store.finished(limit=10)} == {batch.id: None, plain.id: None}
    with store.engine.connect() as conn:
        assert "script" not in {c["name"] for c in inspect(conn).get_columns("jobs")}


def test_an_arrays_tasks_share_its_one_stored_script(store):
    script = "#!/bin/sh\necho $SLURM_ARRAY_TASK_ID\n"
    (array,) = store.insert([make_spec(command=None, script=script, array="0-9")], now=1.0)
    tasks = store.add_tasks(array, array.spec, [0, 1, 2])
    assert store.get(tasks[1].id).spec.script == script
    assert store.get_task(array.id, 2).spec.script == script
    assert {j.id: j.spec.script for j in store.active()}[tasks[0].id] == script
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM job_scripts")).scalar() == 1


def test_a_database_before_0008_upgrades_moving_its_scripts_out_of_the_jobs_table(db_url, tmp_path):
    engine = open_engine(database_url(db_url, str(tmp_path)))
    migrate.upgrade(engine, "0007")
    old_jobs = Table("jobs", MetaData(), autoload_with=engine)
    base = {"state": "PENDING", "submit_time": 1.0, "held": False, "restarts": 0}

    def old_row(spec):  # the row as 0007's table has it: no column added since
        return {k: v for k, v in _spec_row(spec).items() if k in old_jobs.c}

    script = "#!/bin/sh\necho old\n"
    with engine.begin() as conn:
        array_id = conn.execute(old_jobs.insert().values(**old_row(make_spec(command=None, script=script)), **base,
                                                         script=script)).inserted_primary_key[0]
        task_id = conn.execute(old_jobs.insert().values(**old_row(make_spec(command=None, script=script)), **base,
                                                        script=script, array_job_id=array_id, array_task_id=0)
                               ).inserted_primary_key[0]
        plain_id = conn.execute(old_jobs.insert().values(**old_row(make_spec()), **base)).inserted_primary_key[0]
    migrate.upgrade(engine)
    upgraded = JobStore(engine)
    assert upgraded.get(array_id).spec.script == script and upgraded.get(task_id).spec.script == script
    assert upgraded.get(plain_id).spec.script is None
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM job_scripts")).scalar() == 1
    engine.dispose()


def test_a_job_keeps_its_htcondor_requirements_and_event_log(tmp_path):
    store = JobStore(open_engine(database_url(None, str(tmp_path))))
    migrate.upgrade(store.engine)
    spec = make_spec(gpus=1, requirements="(CUDACapability >= 8.0)", user_log="job_%A.log")
    job = store.insert([spec], 1.0)[0]
    kept = store.get(job.id).spec
    assert (kept.requirements, kept.user_log) == ("(CUDACapability >= 8.0)", "/tmp/job_%A.log")
    assert kept.request.requirements == "(CUDACapability >= 8.0)"


def test_a_jobs_container_comes_back_whole_and_a_host_jobs_stays_none(store):
    in_image = make_spec(image="nvcr.io#nvidia/pytorch:24.01-py3", container_mounts="/data:/data:ro,/scratch",
                         container_workdir="/workspace", container_env="NCCL_DEBUG,HF_HOME",
                         container_mount_home="no", container_remap_root="yes")
    on_host = make_spec()
    a, b = store.insert([in_image, on_host], now=1.0)
    loaded = store.get(a.id)
    assert loaded.spec.container == in_image.container
    assert loaded.spec.container.mounts[0].read_only and not loaded.spec.container.mount_home
    assert store.get(b.id).spec.container is None
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT container FROM jobs WHERE id = :id"), {"id": b.id}).scalar() is None


def test_a_jobs_requeue_choice_is_kept_none_included(store):
    """Whether a job waits again when its GPU fails: sbatch --requeue, --no-requeue, or not said."""
    jobs = store.insert([make_spec(requeue=value) for value in (True, False, None)], now=1.0)
    assert [store.get(job.id).spec.requeue for job in jobs] == [True, False, None]
