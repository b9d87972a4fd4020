"""`scontrol create|show|update|delete reservation`, as Slurm's scontrol: Key=Value words in, Slurm's sentences out.

    scontrol create reservation ReservationName=demo StartTime=now Duration=4:00:00 Users=ada Accounts=vision \\
        TRES=gres/gpu=2 Nodes=node1
    scontrol show reservation [demo]        scontrol delete reservation demo (or ReservationName=demo)
"""

from __future__ import annotations

import sys

from corral.cli.slurm.command import Refused, server
from corral.cli.slurm.reservation_format import show_reservations
from corral.errors import CorralError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

# scontrol's keys (matched as Slurm matches them: case aside) and the API's fields
_KEYS = {"reservationname": "name", "starttime": "start", "endtime": "end", "duration": "duration",
         "users": "users", "accounts": "accounts", "nodes": "node", "corecnt": "cpus"}


_UPDATABLE = ("starttime", "endtime", "duration", "users", "accounts", "corecnt")


def is_reservation(word: str) -> bool:
    """`reservation`, `reservations`, `res`, `ReservationName`: the words scontrol takes for one."""
    word = word.lower()
    return len(word) >= 3 and ("reservations".startswith(word) or word == "reservationname")


def create(words: Sequence[str]) -> int:
    body: dict[str, Any] = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals:
            if is_reservation(key):
                continue
            raise Refused(f"Misformatted parameter '{word}', most options have a parameter after '='.")
        lower = key.lower()
        if lower == "tres":
            body.update(_tres(value))
        elif lower in ("nodecnt", "partitionname", "partition") and value:
            continue  # one node, every partition: nothing to choose
        elif lower in _KEYS:
            field = _KEYS[lower]
            if field in body:
                raise Refused(f"Parameter {word} specified more than once")
            body[field] = value.split(",") if field in ("users", "accounts") else value
        else:
            raise Refused(f"Unknown parameter {word}.  Request aborted (corral takes ReservationName, StartTime, "
                          "EndTime, Duration, Users, Accounts, Nodes, TRES=gres/gpu=N and CoreCnt)")
    if "cpus" in body:
        body["cpus"] = _count(body["cpus"], "CoreCnt")
    try:
        made = server().ask("POST", "/api/v1/reservations", body)
    except CorralError as exc:
        print(f"Error creating the reservation: {_words(exc)}", file=sys.stderr)
        return 1
    print(f"Reservation created: {made['name']}")
    return 0


def update(words: Sequence[str]) -> int:
    """`scontrol update ReservationName=R EndTime=.. Duration=.. StartTime=.. Users=.. Users+=.. Users-=..
    Accounts(+/-)=.. TRES=gres/gpu=N CoreCnt=N`: what is not named stays."""
    name = None
    body: dict[str, Any] = {}
    changes: list[tuple[str, str, list[str]]] = []  # (field, + or -, names)
    for word in words:
        key, _, value = word.partition("=")
        lower = key.lower()
        if lower == "reservationname":
            name = value
            continue
        op = lower[-1] if lower[-1:] in ("+", "-") else ""
        base = lower.rstrip("+-")
        if base == "tres" and not op:
            body.update(_tres(value))
        elif base in _UPDATABLE and (not op or _KEYS[base] in ("users", "accounts")):
            field = _KEYS[base]
            if op:
                changes.append((field, op, value.split(",")))
            else:
                body[field] = value.split(",") if field in ("users", "accounts") else value
        else:
            raise Refused(f"Update of this parameter is not supported by corral: {word} (corral changes StartTime, "
                          "EndTime, Duration, Users, Accounts (with += and -= too), TRES=gres/gpu=N and CoreCnt)")
    if not name:
        raise Refused("update needs ReservationName=NAME")
    if "cpus" in body:
        body["cpus"] = _count(body["cpus"], "CoreCnt")
    service = server()
    try:
        if changes:
            current = next((r for r in service.ask("GET", "/api/v1/reservations") if r["name"] == name), None)
            if current is None:
                print(f"Error updating the reservation: Requested reservation is invalid ({name})", file=sys.stderr)
                return 1
            for field, op, names in changes:
                now = list(body.get(field, current[field]))
                body[field] = now + [n for n in names if n not in now] if op == "+" else [n for n in now if n not in names]
        import urllib.parse  # only here: urllib stays off every other scontrol's start

        service.ask("PATCH", f"/api/v1/reservations/{urllib.parse.quote(name, safe='')}", body)
    except CorralError as exc:
        print(f"Error updating the reservation: {_words(exc)}", file=sys.stderr)
        return 1
    print("Reservation updated.")
    return 0


def delete(words: Sequence[str]) -> int:
    if len(words) == 1 and "=" in words[0]:
        key, _, name = words[0].partition("=")
    elif len(words) == 2:
        key, name = words
    else:
        raise Refused("Proper format is 'delete <ENTITY>=<ID>' or 'delete <ENTITY> <ID>'")
    if not is_reservation(key):
        raise Refused(f"Invalid deletion entity: {words[0]}")
    import urllib.parse  # only here: urllib stays off every other scontrol's start

    try:
        server().ask("DELETE", f"/api/v1/reservations/{urllib.parse.quote(name, safe='')}")
    except CorralError as exc:
        print(f"delete_reservation {words[0]}: {_words(exc)}", file=sys.stderr)
        return 1
    return 0


def show(name: str | None, one_liner: bool) -> int:
    reservations = server().ask("GET", "/api/v1/reservations")
    if name is not None:
        reservations = [r for r in reservations if r["name"] == name]
        if not reservations:
            print(f"Reservation {name} not found")
            return 1
    if not reservations:
        print("No reservations in the system")
        return 0
    sys.stdout.write(show_reservations(reservations, one_liner=one_liner))
    return 0


def _tres(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in text.split(","):
        kind, _, count = part.partition("=")
        kind = kind.lower()
        if kind.startswith("gres/gpu"):
            out["gpus"] = _count(count, "TRES")
        elif kind == "cpu":
            out["cpus"] = _count(count, "TRES")
        else:
            raise Refused(f"Invalid TRES {part!r}: corral reserves gres/gpu=N and cpu=N")
    return out


def _count(text: str, key: str) -> int:
    if not text.isdigit():
        raise Refused(f"\"{text}\" is not a valid {key} count (give a whole number, e.g. {key}=4)")
    return int(text)


def _words(error: CorralError) -> str:
    if error.status == 403:
        return f"Access/permission denied ({error.message})"
    if error.status == 404:
        return f"Requested reservation is invalid ({error.message})"
    return error.message
