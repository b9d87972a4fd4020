"""Reservations (`corral.core.scheduling.reservations`): made and deleted by admins, kept in the store, ended by themselves.

Only the job service changes them, on the event loop thread. Each pass reads `book()`: the reservations
and the running jobs inside each. A reservation whose window is over is removed before the pass (Slurm
purges it after its end time); as in Slurm, the jobs still waiting for it lose it and are held with reason
ReservationDeleted, so that `corral release` (`scontrol release`) lets them run outside it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from corral.core.jobspec.job import Job
from corral.core.scheduling.reservations import Reservation, ReservationBook, Wanted, book, expired, plan, wanted_update
from corral.core.scheduling.resources import Allocation, Node
from corral.core.jobspec.spec import JobSpec
from corral.core.jobspec.states import JobState, PendingReason
from corral.errors import Conflict, Forbidden, InvalidRequest, NotFound
from corral.server.job_table import JobTable, pending
from corral.store.jobs import JobStore
from corral.store.reservations import ReservationStore


class Reservations:
    def __init__(self, store: ReservationStore, nodes: Sequence[Node], *, table: JobTable, jobs: JobStore,
                 allocations: Mapping[int, Allocation], clock: Callable[[], float]) -> None:
        self.store = store
        self.nodes = tuple(nodes)
        self.table = table
        self.jobs = jobs
        self.allocations = allocations
        self.clock = clock
        names = {node.name for node in self.nodes}
        # one on a node no longer declared stays in the store (the node may come back) but is not applied
        self.by_name: dict[str, Reservation] = {r.name: r for r in store.all() if r.node in names}

    def all(self) -> list[Reservation]:
        return sorted(self.by_name.values(), key=lambda r: (r.start, r.name))

    def get(self, name: str) -> Reservation:
        """Raises NotFound: no such reservation."""
        found = self.by_name.get(name)
        if found is None:
            raise NotFound(f"reservation {name!r}: no such reservation (Requested reservation is invalid)")
        return found

    def create(self, wanted: Wanted, by: str, *, drained: Mapping[str, frozenset[int]], accounts: Iterable[str],
               user_exists: Callable[[str], bool]) -> Reservation:
        """Check and keep a new reservation (`corral.core.scheduling.reservations.plan` says what it refuses)."""
        made = plan(wanted, nodes=self.nodes, existing=self.by_name.values(), running=self._running_outside(),
                    drained=drained, user_exists=user_exists, accounts=accounts, by=by, now=self.clock())
        self.store.add(made)
        self.by_name[made.name] = made
        return made

    def update(self, name: str, body: Mapping[str, object], *, drained: Mapping[str, frozenset[int]],
               accounts: Iterable[str], user_exists: Callable[[str], bool]) -> Reservation:
        """Change a reservation's window, GPUs or who may use it, checked as a new one would be, beside the others
        and the jobs outside it; the jobs running in it must keep their GPUs.

        Raises:
            NotFound: no such reservation. InvalidRequest, Conflict: as for a new one (`plan`), or GPUs, CPUs or
                memory that jobs running in it hold would be left out.
        """
        current = self.get(name)
        now = self.clock()
        inside = self._running_in(name)
        made = plan(wanted_update(current, body, now), nodes=self.nodes,
                    existing=[r for r in self.by_name.values() if r.name != name],
                    running=self._running_outside(),
                    drained=drained, user_exists=user_exists, accounts=accounts, by=current.by, now=now)
        kept = [f"job {job_id} runs on GPU {i}" for job_id in sorted(inside) for i in self.allocations[job_id].gpu_ids
                if i not in made.gpus]
        if kept:
            raise Conflict(f"reservation {name} would leave out GPUs its jobs run on ({'; '.join(kept)}): keep them, "
                           "or let the jobs end first (Reservation busy)")
        cpus = sum(self.allocations[job_id].cpus for job_id in inside)
        mem_mb = sum(self.allocations[job_id].mem_mb for job_id in inside)
        if made.cpus < cpus or made.mem_mb < mem_mb:
            raise Conflict(f"reservation {name} would keep {made.cpus} CPUs and {made.mem_mb} MB, but its running jobs "
                           f"({', '.join(map(str, sorted(inside)))}) hold {cpus} CPUs and {mem_mb} MB: keep at least "
                           "that much, or let the jobs end first (Reservation busy)")
        made = replace(made, created=current.created)
        self.store.replace(made)
        self.by_name[name] = made
        return made

    def delete(self, name: str) -> tuple[Reservation, list[Job]]:
        """Remove a reservation; the jobs waiting for it are held (returned).

        Raises:
            NotFound: no such reservation. Conflict: jobs run in it (Slurm deletes none with jobs running).
        """
        reservation = self.get(name)
        inside = sorted(self._running_in(name))
        if inside:
            raise Conflict(f"reservation {name} has jobs running in it ({', '.join(map(str, inside))}): "
                           "cancel them first, or let the reservation end (Reservation busy)")
        return reservation, self._end([reservation])

    def _running_outside(self) -> list[Allocation]:
        """The running jobs in no reservation: what a job in one holds is part of that reservation's CPUs, memory
        and GPUs over its window, and counting it again would promise the node's CPUs away twice."""
        active = self.table.active
        return [alloc for job_id, alloc in self.allocations.items()
                if (job := active.get(job_id)) is None or job.spec.reservation not in self.by_name]

    def _running_in(self, name: str) -> set[int]:
        """The running jobs submitted into reservation `name`."""
        return {job_id for job_id in self.allocations
                if (job := self.table.active.get(job_id)) is not None and job.spec.reservation == name}

    def expire(self, now: float) -> list[Job]:
        """End the reservations whose window is over; returns the jobs held for it."""
        over = expired(self.by_name.values(), now)
        return self._end(over) if over else []

    def _end(self, ending: Sequence[Reservation]) -> list[Job]:
        names = {r.name for r in ending}
        self.store.remove(sorted(names))
        for name in names:
            del self.by_name[name]
        held = []
        for job in self.table.active.values():
            if job.state is JobState.PENDING and job.spec.reservation in names:
                job.spec = replace(job.spec, reservation=None)
                job.held = True
                self.jobs.save_spec(job)
                held.append(job)
        if held:
            self.jobs.save_states(held)
        for job in held:
            self.table.reservation_deleted.add(job.id)
            if not job.is_array:
                self.table.queue[job.id] = pending(job)
            self.table.reasons[job.id] = PendingReason.RESERVATION_DELETED
        return held

    def book(self) -> ReservationBook | None:
        """What the pass reads, or None without reservations (the pass then costs nothing more)."""
        if not self.by_name:
            return None
        active = self.table.active
        return book(self.by_name.values(), {job_id: active[job_id].spec.reservation
                                            for job_id in self.allocations if job_id in active})

    def next_change(self, now: float) -> float | None:
        """The next moment a reservation begins or ends: the pass should look again then."""
        moments = [m for r in self.by_name.values() for m in (r.start, r.end) if m > now]
        return min(moments, default=None)

    def check_submit(self, spec: JobSpec, privileged: bool) -> None:
        """Refuse a job for a reservation that does not exist, or that does not admit it (admins may use any).

        Raises:
            InvalidRequest: no such reservation. Forbidden: the reservation is not for this user or account.
        """
        if spec.reservation is None:
            return
        reservation = self.by_name.get(spec.reservation)
        if reservation is None:
            known = ", ".join(sorted(self.by_name)) or "there are none now"
            raise InvalidRequest("reservation", f"no reservation {spec.reservation!r} (Requested reservation is "
                                 "invalid)", f"reservations: {known} (corral reservation list)")
        if not privileged and not reservation.admits(spec.user, spec.account):
            who = [f"users {', '.join(reservation.users)}"] if reservation.users else []
            who += [f"accounts {', '.join(reservation.accounts)}"] if reservation.accounts else []
            raise Forbidden(f"reservation {reservation.name} is for {' and '.join(who)}; user {spec.user}"
                            f"{f' (account {spec.account})' if spec.account else ''} may not use it "
                            "(Access denied to requested reservation)")
