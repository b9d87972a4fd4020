"""Reservations (Slurm's advanced reservations): GPUs of a node kept for some users or accounts over a window.

During [start, end) a reservation's GPUs (and its share of the node's CPUs and memory) are taken away from
every job not submitted into it, so backfill places other jobs around the window, never on those GPUs inside
it. A job submitted with `--reservation NAME` runs only there: on those GPUs, inside the window, and only if
its whole time limit fits before the end (Slurm's default, without the FLEX flag). Who may use one: as Slurm,
every access list given must admit the job (Users and Accounts); admins may use any.

What the scheduler is handed is a `ReservationBook`: the reservations and which running jobs are in which,
nothing else, so the policy stays a function of data. Checking a new reservation needs the machine's facts
(nodes, running jobs, drains, who exists); they are handed in too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from corral.core.scheduling.backfill import INFINITY, NodeProfile
from corral.core.scheduling.drains import WHOLE_NODE
from corral.core.units.iso_times import iso_utc
from corral.core.scheduling.resources import Allocation, Node
from corral.core.jobspec.spec_slurm import moment
from corral.core.units.units import parse_duration_s, parse_memory_mb
from corral.errors import Conflict, InvalidRequest, NotFound

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,31}\$?$")
MAX_DURATION_S = 365 * 86400


@dataclass(frozen=True, slots=True)
class Reservation:
    name: str
    node: str
    gpus: tuple[int, ...]
    cpus: int
    mem_mb: int
    users: tuple[str, ...]
    accounts: tuple[str, ...]
    start: float
    end: float
    by: str
    created: float

    def active(self, now: float) -> bool:
        return self.start <= now < self.end

    def admits(self, user: str, account: str | None) -> bool:
        """Whether a job of `user`, charged to `account`, may run in it: every list given must admit it."""
        if self.users and user not in self.users:
            return False
        return not self.accounts or (account is not None and account in self.accounts)

    def to_dict(self, now: float) -> dict[str, object]:
        return {"name": self.name, "node": self.node, "gpus": list(self.gpus), "cpus": self.cpus,
                "mem_mb": self.mem_mb, "users": list(self.users), "accounts": list(self.accounts),
                "start": iso_utc(self.start), "end": iso_utc(self.end), "duration_s": round(self.end - self.start),
                "state": "ACTIVE" if self.active(now) else "INACTIVE", "by": self.by, "created": iso_utc(self.created)}


@dataclass(frozen=True, slots=True)
class ReservationBook:
    """What the policy reads: the reservations by name, and the running jobs inside each (job id -> name)."""

    by_name: Mapping[str, Reservation] = field(default_factory=dict)
    running: Mapping[int, str] = field(default_factory=dict)

    def on_node(self, node: str) -> list[Reservation]:
        return [r for r in self.by_name.values() if r.node == node]


@dataclass(frozen=True, slots=True)
class Wanted:
    """A reservation as asked for, before it is checked against the machine."""

    name: object
    node: object = None
    gpus: object = None
    """How many GPUs (the lowest-numbered ones free over the window are taken)."""
    gpu_ids: object = None
    """Which GPUs, by index; with `gpus` too, the two must agree."""
    cpus: object = None
    mem_mb: object = None
    users: object = None
    accounts: object = None
    start: float = 0.0
    end: float = 0.0


REQUEST_FIELDS = frozenset({"name", "node", "gpus", "gpu_ids", "cpus", "mem", "mem_mb", "users", "accounts", "start",
                            "end", "duration"})


def wanted_from(body: Mapping[str, object], now: float) -> Wanted:
    """A create request (the API's JSON body) read: its start and end as Slurm's StartTime, EndTime and
    Duration are (`now`, `now+1hour`, `2026-12-01T08:00`, epoch seconds; `4:00:00`, `240` minutes, `4h`).

    Raises:
        InvalidRequest: an unknown field, a time or duration that cannot be read, or no end.
    """
    unknown = sorted(set(body) - REQUEST_FIELDS)
    if unknown:
        raise InvalidRequest(unknown[0], "is no field of a reservation", f"fields: {', '.join(sorted(REQUEST_FIELDS))}")
    start = moment(body.get("start") or "now", "start", now)
    assert start is not None
    end = _end(start, body.get("end"), body.get("duration"), now)
    mem = _mem(body["mem"]) if body.get("mem") not in (None, "") else body.get("mem_mb")
    return Wanted(body.get("name"), body.get("node"), body.get("gpus"), body.get("gpu_ids"), body.get("cpus"), mem,
                  body.get("users"), body.get("accounts"), start, end)


def _end(start: float, end: object, duration: object, now: float) -> float:
    """A window's end: `end` as Slurm's EndTime, or `start` plus `duration` as Slurm's Duration."""
    if end not in (None, ""):
        if duration not in (None, ""):
            raise InvalidRequest("duration", "given together with end", "give one of them")
        at = moment(end, "end", now)
        assert at is not None
        return at
    if duration in (None, ""):
        raise InvalidRequest("duration", "a reservation needs an end", "give --duration 4h (Duration=4:00:00) or an end")
    if not isinstance(duration, (str, int)) or isinstance(duration, bool):
        raise InvalidRequest("duration", f"must be a duration, got {duration!r:.20}", "e.g. 4:00:00 or 4h")
    seconds = parse_duration_s(duration, field="duration")
    if seconds is None:
        raise InvalidRequest("duration", "a reservation here has an end", "give a duration, e.g. 4h or 4:00:00")
    return start + seconds


def _mem(text: object) -> int:
    if not isinstance(text, (str, int)) or isinstance(text, bool):
        raise InvalidRequest("mem", f"must be a size, got {text!r:.20}", "e.g. 64G")
    return parse_memory_mb(text)


UPDATE_FIELDS = frozenset({"start", "end", "duration", "users", "accounts", "gpus", "gpu_ids", "cpus", "mem", "mem_mb"})


def wanted_update(current: Reservation, body: Mapping[str, object], now: float) -> Wanted:
    """An update (the API's JSON body) over the reservation as it is: what it leaves out stays as it was. A new
    start keeps the duration unless an end or a duration is given too; new GPUs take their share of the node's CPUs
    and memory unless those are given.

    Raises:
        InvalidRequest: an unknown field (its name and node cannot change), or a time that cannot be read.
    """
    unknown = sorted(set(body) - UPDATE_FIELDS)
    if unknown:
        raise InvalidRequest(unknown[0], "cannot be changed in a reservation",
                             f"change any of {', '.join(sorted(UPDATE_FIELDS))}; for another name or node, delete it "
                             "and create it again")
    given = {k: v for k, v in body.items() if v not in (None, "")}
    start = moment(given["start"], "start", now) if "start" in given else current.start
    assert start is not None
    if "end" in given or "duration" in given:
        end = _end(start, given.get("end"), given.get("duration"), now)
    else:
        end = start + (current.end - current.start)
    new_gpus = "gpus" in given or "gpu_ids" in given
    mem = _mem(given["mem"]) if "mem" in given else given.get("mem_mb")
    return Wanted(current.name, current.node, given.get("gpus") if new_gpus else None,
                  given.get("gpu_ids") if new_gpus else current.gpus,
                  given.get("cpus", None if new_gpus else current.cpus), mem if mem is not None or new_gpus
                  else current.mem_mb, given.get("users", current.users), given.get("accounts", current.accounts),
                  start, end)


def _check_window(start: float, end: float, now: float) -> None:
    """Raises InvalidRequest for a window that ends before it starts, ended already, or is too long."""
    if end <= start:
        raise InvalidRequest("end", "the reservation ends before it starts (Invalid time specification)",
                             "give a positive --duration, or an end after the start")
    if end <= now:
        raise InvalidRequest("start", "the reservation would be over already", "give a start that is not in the past")
    if end - start > MAX_DURATION_S:
        raise InvalidRequest("duration", f"at most 365 days, got {round((end - start) / 86400)} days")


def plan(wanted: Wanted, *, nodes: Sequence[Node], existing: Iterable[Reservation], running: Iterable[Allocation],
         drained: Mapping[str, frozenset[int]], user_exists: Callable[[str], bool], accounts: Iterable[str],
         by: str, now: float) -> Reservation:
    """Check a reservation against the machine and make it: its node, GPUs and share of CPUs and memory.

    GPUs named are refused if they do not exist, are drained, are in another reservation over an overlapping
    window, or are held by a running job past the start (Slurm's "Requested nodes are busy"); GPUs counted
    are the lowest-numbered that are none of these. Its CPUs and memory must be free of running jobs and
    overlapping reservations too; the GPUs' share of them, taken when none is asked for, shrinks to what is.

    Raises:
        InvalidRequest: a bad field (named, with the fix). NotFound: no such node. Conflict: the name is
            taken, or the GPUs, CPUs or memory are busy or reserved.
    """
    name = _name(wanted.name)
    existing = list(existing)
    if any(r.name == name for r in existing):
        raise Conflict(f"reservation {name} exists already (Duplicate reservation name)")
    _check_window(wanted.start, wanted.end, now)
    users = _names_list(wanted.users, "users", _USER)
    accounts_given = _names_list(wanted.accounts, "accounts", _NAME)
    if not users and not accounts_given:
        raise InvalidRequest("users", "a reservation needs users or accounts who may use it",
                             "give --users ada,bob and/or --accounts vision (Users=... Accounts=... in scontrol)")
    for user in users:
        if not user_exists(user):
            raise InvalidRequest("users", f"no user {user!r} on this machine (Invalid user id)",
                                 "name existing accounts of this machine")
    known = set(accounts)
    for account in accounts_given:
        if account not in known:
            raise InvalidRequest("accounts", f"unknown account {account!r} (Invalid account or account/partition "
                                 "combination specified)", f"known accounts: {', '.join(sorted(known)) or 'none are configured'}")
    node = _node(wanted.node, nodes)
    start, end = max(wanted.start, now), wanted.end
    taken = _unavailable(node, existing, running, drained.get(node.name, frozenset()), start, end)
    indexes = [g.index for g in node.gpus]
    ids = _gpu_ids(wanted.gpu_ids, wanted.gpus, node, indexes)
    if ids is None:
        count = _count(wanted.gpus, "gpus", len(indexes), node.name)
        free = [i for i in indexes if i not in taken]
        if len(free) < count:
            why = "; ".join(f"GPU {i}: {reason}" for i, reason in sorted(taken.items()))
            raise Conflict(f"node {node.name} has {len(free)} of {count} GPUs free over the window "
                           f"(Requested nodes are busy): {why}")
        ids = tuple(free[:count])
    else:
        busy = [f"GPU {i}: {taken[i]}" for i in ids if i in taken]
        if busy:
            raise Conflict(f"GPUs of node {node.name} are busy over the window (Requested nodes are busy): "
                           + "; ".join(busy))
    share = len(ids) / len(indexes) if indexes else 1.0
    held = _held(node, existing, running, start, end)
    cpus = _within(wanted.cpus, "cpus", node.cpus, int(node.cpus * share), held, 0, node.name)
    mem_mb = _within(wanted.mem_mb, "mem", node.mem_mb, int(node.mem_mb * share), held, 1, node.name)
    return Reservation(name, node.name, ids, cpus, mem_mb, users, accounts_given, wanted.start, end, by, now)


def _name(value: object) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise InvalidRequest("name", f"{value!r:.40} is no reservation name",
                             "letters, digits, '.', '_' and '-', at most 64 (e.g. ReservationName=vision_demo)")
    return value


def _names_list(value: object, field_name: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    if value is None or value == "" or value == []:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
        raise InvalidRequest(field_name, "must be a list of names", f"e.g. {field_name}=ada,bob")
    out = tuple(dict.fromkeys(i.strip() for i in items if i.strip()))
    for item in out:
        if not pattern.match(item):
            raise InvalidRequest(field_name, f"{item!r:.40} is no name", f"e.g. {field_name}=ada,bob")
    return out


def _node(value: object, nodes: Sequence[Node]) -> Node:
    with_gpus = [n for n in nodes if n.gpus]
    if value is None or value == "":
        if len(with_gpus) == 1:
            return with_gpus[0]
        raise InvalidRequest("node", "this machine has several nodes with GPUs", "name one: --node NAME (Nodes=NAME)")
    node = next((n for n in nodes if n.name == value), None)
    if node is None:
        raise NotFound(f"node {value!r}: no such node here (nodes: {', '.join(n.name for n in nodes) or 'none'})")
    return node


def _count(value: object, field_name: str, most: int, node: str) -> int:
    if value is None:
        raise InvalidRequest("gpus", "say how many GPUs to reserve, or which", "--gpus 2 or --gpu-ids 0,1 "
                             "(TRES=gres/gpu=2 in scontrol)")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(field_name, f"must be a count of GPUs (1 or more), got {value!r:.20}")
    if value > most:
        raise InvalidRequest(field_name, f"node {node} has {most} GPUs; cannot reserve {value}",
                             f"ask for at most {most}")
    return value


def _gpu_ids(value: object, count: object, node: Node, indexes: list[int]) -> tuple[int, ...] | None:
    if value is None or value == []:
        return None
    if not isinstance(value, (list, tuple)) or any(not isinstance(i, int) or isinstance(i, bool) for i in value):
        raise InvalidRequest("gpu_ids", f"must be a list of GPU indexes, got {value!r:.40}", "e.g. --gpu-ids 0,1")
    ids = tuple(sorted(set(value)))
    unknown = [i for i in ids if i not in indexes]
    if unknown:
        raise InvalidRequest("gpu_ids", f"node {node.name} has no GPU {', '.join(map(str, unknown))}",
                             f"its GPUs are {', '.join(map(str, indexes)) or 'none'}")
    if count is not None and count != len(ids):
        raise InvalidRequest("gpus", f"{count!r:.20} GPUs asked for, but {len(ids)} named in gpu_ids",
                             "give one of them, or make them agree")
    return ids


def _amount(value: object, field_name: str, most: int, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRequest(field_name, f"must be a whole number, 0 or more, got {value!r:.20}")
    if value > most:
        raise InvalidRequest(field_name, f"the node has {most}; cannot reserve {value}", f"ask for at most {most}")
    return value


class _Holder(NamedTuple):
    """Something holding CPUs and memory of a node for a while: a running job or another reservation."""

    start: float
    end: float
    amounts: tuple[int, int]
    """CPUs, megabytes."""
    who: str


def _held(node: Node, existing: Iterable[Reservation], running: Iterable[Allocation], start: float,
          end: float) -> list[_Holder]:
    """What holds some of the node's CPUs and memory during [start, end), from the window's start on."""
    out: list[_Holder] = []
    for other in existing:
        if other.node == node.name and other.start < end and start < other.end:
            out.append(_Holder(max(other.start, start), other.end, (other.cpus, other.mem_mb),
                               f"reservation {other.name}"))
    for alloc in running:
        until = alloc.end_time if alloc.end_time is not None else INFINITY
        if alloc.node == node.name and until > start:
            out.append(_Holder(start, until, (alloc.cpus, alloc.mem_mb),
                               f"job {alloc.job_id} ({'no time limit' if until == INFINITY else f'until {iso_utc(until)}'})"))
    return out


def _peak(held: Sequence[_Holder], which: int) -> tuple[int, list[str]]:
    """The most of CPUs (`which` 0) or memory (1) held at once, and who holds it then. Holdings only begin
    at the moments some start, so the most is found at one of them."""
    best, who = 0, []
    for moment in sorted({h.start for h in held}):
        now_held = [h for h in held if h.start <= moment < h.end and h.amounts[which]]
        total = sum(h.amounts[which] for h in now_held)
        if total > best:
            best, who = total, [f"{h.who} holds {h.amounts[which]}" for h in now_held]
    return best, who


def _within(value: object, field_name: str, most: int, default: int, held: Sequence[_Holder], which: int,
            node: str) -> int:
    """A reservation's CPUs or memory, checked against what running jobs and overlapping reservations hold over
    the window so that nothing is promised twice: an amount asked for must be free; the share taken when none is
    asked for (its GPUs' part of the node) shrinks to what is free, but not to nothing.

    Raises:
        InvalidRequest: not a count, or more than the node has. Conflict: not free over the window.
    """
    amount = _amount(value, field_name, most, default)
    peak, who = _peak(held, which)
    free = max(most - peak, 0)
    if amount <= free:
        return amount
    if value is None and free > 0:
        return free
    what = "CPUs" if which == 0 else "MB of memory"
    fix = (f"ask for at most {free}" if free else "pick a window when they are free") + \
        (" (--cpus N, CoreCnt=N in scontrol)" if which == 0 else " (--mem SIZE)")
    raise Conflict(f"node {node} has {free} of {most} {what} free over the window and the reservation needs "
                   f"{amount} (Requested nodes are busy): {'; '.join(who)}; {fix}")


def _unavailable(node: Node, existing: Iterable[Reservation], running: Iterable[Allocation], drained: frozenset[int],
                 start: float, end: float) -> dict[int, str]:
    """The node's GPUs that cannot be reserved over [start, end), and why. A GPU a process outside corral uses now
    is not among them: the process is no job, with no end to plan around, and may well be gone by the start."""
    out: dict[int, str] = {}
    for gpu in sorted(drained):
        if gpu != WHOLE_NODE:
            out[gpu] = "drained"
    if WHOLE_NODE in drained:
        out.update({g.index: "the node is drained" for g in node.gpus})
    for other in existing:
        if other.node == node.name and other.start < end and start < other.end:
            for gpu in other.gpus:
                out.setdefault(gpu, f"in reservation {other.name} ({iso_utc(other.start)} to {iso_utc(other.end)})")
    for alloc in running:
        if alloc.node != node.name or (alloc.end_time is not None and alloc.end_time <= start):
            continue
        until = "without a time limit" if alloc.end_time is None else f"until {iso_utc(alloc.end_time)}"
        for gpu in alloc.gpu_ids:
            out.setdefault(gpu, f"job {alloc.job_id} runs on it {until}")
    return out


def book(reservations: Iterable[Reservation], running_in: Mapping[int, str | None]) -> ReservationBook:
    """The book the policy reads: `running_in` maps running jobs to the reservation they asked for (None:
    none); those whose reservation is gone count as outside any."""
    by_name = {r.name: r for r in reservations}
    return ReservationBook(by_name, {job: name for job, name in running_in.items() if name in by_name})


def expired(reservations: Iterable[Reservation], now: float) -> list[Reservation]:
    """Those whose window is over: they end by themselves (Slurm purges them after their end time)."""
    return [r for r in reservations if r.end <= now]


def hold_windows(profiles: Sequence[NodeProfile], book: ReservationBook, now: float) -> None:
    """Take each reservation's GPUs, CPUs and memory away from everyone else over its window (in place)."""
    where = {profile.node.name: profile for profile in profiles}
    for reservation in book.by_name.values():
        profile = where.get(reservation.node)
        if profile is not None and reservation.end > now:
            profile.reserve(max(reservation.start, now), reservation.end, reservation.cpus, reservation.mem_mb,
                            reservation.gpus)


def inside(reservation: Reservation, node: Node, running: Iterable[Allocation], now: float,
           off: frozenset[int]) -> NodeProfile:
    """What the reservation offers its own jobs: its share of the node over its window, less what its
    running jobs hold (nothing outside the window, so a job that would run past the end never fits), and
    less `off`: the node's GPUs no job there is given (drained, or shareable; `WHOLE_NODE`: all)."""
    gpus = frozenset(reservation.gpus) - off if WHOLE_NODE not in off else frozenset()
    none: frozenset[int] = frozenset()
    if reservation.end <= now:
        return NodeProfile(node, [now], [0], [0], [none])
    if reservation.start > now:
        profile = NodeProfile(node, [now, reservation.start, reservation.end], [0, reservation.cpus, 0],
                              [0, reservation.mem_mb, 0], [none, gpus, none])
    else:
        profile = NodeProfile(node, [now, reservation.end], [reservation.cpus, 0],
                              [reservation.mem_mb, 0], [gpus, none])
    for alloc in running:
        end = alloc.end_time if alloc.end_time is not None else INFINITY
        if end > now:
            profile.reserve(now, end, alloc.cpus, alloc.mem_mb, alloc.gpu_ids, alloc.gpu_share_mb)
    return profile


def blocked_now(book: ReservationBook, now: float) -> dict[str, frozenset[int]]:
    """Each node's GPUs in a reservation that is on now: no preemption makes room there for a job outside."""
    out: dict[str, set[int]] = {}
    for reservation in book.by_name.values():
        if reservation.active(now):
            out.setdefault(reservation.node, set()).update(reservation.gpus)
    return {node: frozenset(gpus) for node, gpus in out.items()}
