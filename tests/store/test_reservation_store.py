"""Reservations and a job's --reservation survive a restart, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from corral.core.scheduling.reservations import Reservation
from corral.store import migrate
from corral.store.db import database_url, open_engine
from corral.store.jobs import JobStore
from corral.store.reservations import ReservationStore
from tests.helpers import make_spec


def test_a_reservation_is_kept_whole_and_removed_by_name(db_url, tmp_path):
    engine = open_engine(database_url(db_url, str(tmp_path)))
    migrate.upgrade(engine)
    store = ReservationStore(engine)
    kept = Reservation("demo", "gpu01", (0, 2), 16, 128 * 1024, ("ada", "bob"), ("vision",), 1000.0, 15400.0, "root",
                       900.0)
    store.add(kept)
    store.add(Reservation("later", "gpu01", (1,), 8, 1024, (), ("physics",), 20000.0, 30000.0, "root", 900.0))
    assert ReservationStore(engine).all()[0] == kept
    store.remove(["later"])
    assert [r.name for r in ReservationStore(engine).all()] == ["demo"]


def test_a_jobs_reservation_is_stored_with_it(db_url, tmp_path):
    engine = open_engine(database_url(db_url, str(tmp_path)))
    migrate.upgrade(engine)
    spec = make_spec(command=["true"], reservation="demo")
    [job] = JobStore(engine).insert([spec], 1000.0)
    assert JobStore(engine).get(job.id).spec.reservation == "demo"
