"""An admin's requests on reservations (`ReservationRequests`), answered as dicts, and what each pass reads of
them (`corral.server.reserving` keeps them). Where the backend places jobs itself, its own reservations are
the ones that count: these are refused there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from corral.backends.base import Capabilities
from corral.core.access.identity import AccessPolicy, Caller
from corral.core.scheduling.reservations import Wanted
from corral.errors import Conflict
from corral.server.accounts import uid_of
from corral.server.draining import Drains
from corral.server.reserving import Reservations
from corral.server.scheduling import SchedulingPass


class ReservationRequests:
    def __init__(self, reservations: Reservations, drains: Drains, *, scheduling: SchedulingPass,
                 capabilities: Capabilities, access: AccessPolicy, clock: Callable[[], float],
                 changed: Callable[[], None], jobs_changed: Callable[[], None]) -> None:
        """`drains`: the GPUs no reservation may take; `scheduling`: the pass given the reservations' book;
        `changed`: pass again; `jobs_changed`: the views refresh (a pass runs already)."""
        self.reservations = reservations
        self.drains = drains
        self.scheduling = scheduling
        self.capabilities = capabilities
        self.access = access
        self.clock = clock
        self._changed = changed
        self._jobs_changed = jobs_changed
        self._next_change: float | None = None  # the next moment a reservation begins or ends

    def list(self) -> list[dict[str, Any]]:
        now = self.clock()
        return [r.to_dict(now) for r in self.reservations.all()]

    def create(self, caller: Caller, wanted: Wanted) -> dict[str, Any]:
        """Keep GPUs for some users over a window, for an admin (`corral.core.scheduling.reservations.plan`)."""
        self._check(caller, f"creating reservation {wanted.name}")
        made = self.reservations.create(wanted, caller.user, drained=self.drains.by_node,
                                        accounts=self.access.accounts, user_exists=lambda u: uid_of(u) is not None)
        self._changed()
        return made.to_dict(self.clock())

    def update(self, caller: Caller, name: str, body: Mapping[str, object]) -> dict[str, Any]:
        """Change a reservation's window, GPUs or users, for an admin (`Reservations.update`)."""
        self._check(caller, f"updating reservation {name}")
        made = self.reservations.update(name, body, drained=self.drains.by_node, accounts=self.access.accounts,
                                        user_exists=lambda u: uid_of(u) is not None)
        self._changed()
        return made.to_dict(self.clock())

    def delete(self, caller: Caller, name: str) -> dict[str, Any]:
        """Remove a reservation, for an admin; the jobs waiting for it are held (ReservationDeleted)."""
        self._check(caller, f"deleting reservation {name}")
        reservation, _ = self.reservations.delete(name)
        self._changed()
        return reservation.to_dict(self.clock())

    def _check(self, caller: Caller, action: str) -> None:
        self.access.require(caller, "admin", action)
        if self.capabilities.schedules_itself:
            raise Conflict(f"{action}: this server hands its jobs to {self.capabilities.name}, which places them; "
                           "make reservations there (scontrol create reservation on the cluster), and submit "
                           "with --reservation NAME")

    def before_pass(self, now: float) -> None:
        """Remove the reservations that ended, and give the pass the book of the rest."""
        reservations = self.reservations
        if reservations.by_name and reservations.expire(now):
            self._jobs_changed()
        self.scheduling.reservations = reservations.book()
        self._next_change = reservations.next_change(now)

    def due(self) -> bool:
        """Whether a reservation began or ended since the last pass (once: its jobs start, or it is removed)."""
        if self._next_change is not None and self.clock() >= self._next_change:
            self._next_change = None
            return True
        return False
