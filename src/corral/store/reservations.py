"""Reading and writing reservations (`corral.core.scheduling.reservations`). Every method is one transaction."""

from __future__ import annotations

from sqlalchemy import Connection, Engine, delete, insert, select

from corral.core.scheduling.reservations import Reservation
from corral.store.schema import reservations


class ReservationStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def all(self) -> list[Reservation]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(reservations).order_by(reservations.c.start_time, reservations.c.name)).all()
        return [Reservation(r.name, r.node, tuple(int(i) for i in _items(r.gpus)), int(r.cpus), int(r.mem_mb),
                            _items(r.users), _items(r.accounts), float(r.start_time), float(r.end_time), r.by_user,
                            float(r.created)) for r in rows]

    def add(self, reservation: Reservation) -> None:
        with self.engine.begin() as conn:
            _insert(conn, reservation)

    def replace(self, reservation: Reservation) -> None:
        """The reservation of that name as it is now (an update), in one transaction."""
        with self.engine.begin() as conn:
            conn.execute(delete(reservations).where(reservations.c.name == reservation.name))
            _insert(conn, reservation)

    def remove(self, names: list[str]) -> None:
        if names:
            with self.engine.begin() as conn:
                conn.execute(delete(reservations).where(reservations.c.name.in_(names)))


def _insert(conn: Connection, r: Reservation) -> None:
    conn.execute(insert(reservations), {
        "name": r.name, "node": r.node, "gpus": ",".join(map(str, r.gpus)), "cpus": r.cpus,
        "mem_mb": r.mem_mb, "users": ",".join(r.users), "accounts": ",".join(r.accounts),
        "start_time": r.start, "end_time": r.end, "by_user": r.by, "created": r.created})


def _items(text: str) -> tuple[str, ...]:
    return tuple(text.split(",")) if text else ()
