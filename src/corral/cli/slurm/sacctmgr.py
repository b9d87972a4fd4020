"""`sacctmgr`: corral's accounts as Slurm's sacctmgr shows them (`list|show user|association|account`), from
the server's `[accounts.NAME]` and fair share; what would change them is refused, as Slurm refuses a user
without the privilege, with where corral keeps them."""

from __future__ import annotations

import sys

from corral.cli.slurm.argv import Option, parse
from corral.cli.slurm.command import VERSION, server
from corral.cli.slurm.sacctmgr_format import listed_columns, listing
from corral.cli.slurm.sacctmgr_query import ConditionError
from corral.cli.slurm.sacctmgr_query import parse as parse_query

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

OPTIONS = [
    Option("help", "h"), Option("usage", key="help"), Option("immediate", "i"), Option("noheader", "n"),
    Option("oneliner", "o"), Option("parsable", "p"), Option("parsable2", "P"), Option("quiet", "Q"),
    Option("readonly", "r"), Option("associations", "s"), Option("verbose", "v"), Option("version", "V"),
]
USAGE = """\
sacctmgr [<OPTION>] [<COMMAND>]
    Valid <OPTION> values are:
     -h or --help: equivalent to "help" command
     -i or --immediate: commit changes immediately
     -n or --noheader: no header will be added to the beginning of output
     -p or --parsable: output will be '|' delimited with a '|' at the end
     -P or --parsable2: output will be '|' delimited without a '|' at the end
     -Q or --quiet: equivalent to "quiet" command
     -r or --readonly: equivalent to "readonly" command
     -s or --associations: equivalent to "associations" command
     -v or --verbose: equivalent to "verbose" command
     -V or --version: equivalent to "version" command

  <keyword> may be omitted from the execute line and sacctmgr will execute
  in interactive mode. It will process commands as entered until explicitly
  terminated.

    Valid <COMMAND> values are:
     list <ENTITY> [<SPECS>]  display info of identified entity, default
                              is display all.
     show                     same as list

  <ENTITY> may be "account", "association" or "user" (on corral: its accounts,
  from the server's config.toml, and their fair share).

  <SPECS> are different for each command entity pair.
       list account       - Descriptions=, Format=, Names=, Organizations=,
                            Parents=, WithAssoc, WithCoordinators
       list associations  - Accounts=, Format=, ID=, OnlyDefaults, Parents=,
                            Tree, Users=, WOPLimits
       list user          - AdminLevel=, DefaultAccount=, Format=, Names=,
                            WithAssoc, WithCoordinators

  corral keeps its accounts in the server's config.toml ([accounts.NAME]
  members, coordinators) and fair-share shares in [scheduler.shares]: add,
  modify and delete are refused; an admin edits the file and restarts.
"""
# sacctmgr's words when the database refuses a change (src/sacctmgr/*_functions.c), and where corral keeps accounts
DENIED = " Error with request: Access/permission denied"
NO_PRIVILEGE = "sacctmgr: error: Your user doesn't have privilege to perform this action"
KEPT = (" corral keeps its accounts in the server's config.toml ([accounts.NAME] members, coordinators; "
        "shares in [scheduler.shares]): an admin edits it there and restarts the server")
ADDED = ((("Account", 1), ("Acct", 4), "accounts"), (("Cluster", 2), None, "clusters"),
         (("Coordinator", 2), None, "coordinator"), (("Federation", 1), None, "federation(s)"),
         (("QOS", 1), None, "QOS"), (("Resource", 1), None, "system resource"), (("User", 1), None, "users"))
ENTITIES = ((("Accounts", 2), ("Acct", 4), "account"), (("Associations", 2), None, "association"),
            (("Users", 1), None, "user"))
NOT_KEPT = (("Clusters", 2), ("Configuration", 2), ("Events", 1), ("Federation", 1), ("Problems", 1),
            ("RunawayJobs", 2), ("OrphanJobs", 1), ("LostJobs", 1), ("QOS", 1), ("Resource", 4),
            ("Reservations", 4), ("Resv", 4), ("Stats", 1), ("Transactions", 1), ("Txn", 1), ("WCKeys", 1),
            ("tres", 2))
NO_ENTITY = ('No valid entity in list command\nInput line must include "Account", "Association", "Cluster", '
             '"Configuration",\n"Event", "Federation", "Problem", "QOS", "Resource", "Reservation",\n"RunAwayJobs", '
             '"Stats", "Transaction", "TRES", "User", or "WCKey"')


class Session:
    """What the options set for the commands of one run (sacctmgr's globals)."""

    __slots__ = ("with_assocs", "parsable", "noheader", "readonly", "status")

    def __init__(self, given: dict[str, object]) -> None:
        self.with_assocs = bool(given.get("associations"))
        self.parsable = "" if given.get("parsable2") else "|" if given.get("parsable") else None
        self.noheader = bool(given.get("noheader"))
        self.readonly = bool(given.get("readonly"))
        self.status = 0


def main(argv: Sequence[str]) -> int:
    given, words = parse(argv, OPTIONS)
    if given.get("help"):
        sys.stdout.write(USAGE)
        return 0
    if given.get("version"):
        print(VERSION)
        return 0
    session = Session(given)
    if words:
        command(session, list(words))
        return session.status
    prompt = sys.stdin.isatty()
    while True:  # no command: one a line, as sacctmgr's interactive mode reads them
        if prompt:
            sys.stdout.write("sacctmgr: ")
            sys.stdout.flush()
        text = sys.stdin.readline()
        if not text:
            if prompt:
                sys.stdout.write("\n")
            break
        line = text.split()
        if line and (_is(line[0], ("exit", 4), ("quit", 4)) or line[0] == "\\q"):
            break
        if line and not line[0].startswith("#"):
            command(session, line)
    return session.status


def command(session: Session, words: list[str]) -> None:
    """One command line (sacctmgr's `_process_command`)."""
    first = words[0]
    if _is(first, ("associations", 3)):
        session.with_assocs = True
    elif _is(first, ("help", 2)):
        sys.stdout.write(USAGE)
    elif _is(first, ("show", 3), ("list", 3)):
        _show(session, words[1:])
    elif _is(first, ("add", 3), ("create", 3)):
        _refuse_add(session, words[1:])
    elif _is(first, ("modify", 1), ("update", 1), ("delete", 3), ("remove", 3), ("archive", 3), ("load", 2),
              ("dump", 3), ("clear", 3), ("rollup", 2), ("reconfigure", 4), ("shutdown", 4)):
        if session.readonly and not _is(first, ("load", 2), ("dump", 3), ("clear", 3), ("rollup", 2),
                                        ("reconfigure", 4), ("shutdown", 4)):
            _fail(session, "Can't run this command in readonly mode.")
        else:
            _fail(session, f"{NO_PRIVILEGE}\n{DENIED}\n{KEPT}")
    elif _is(first, ("version", 4)):
        print(VERSION)
    elif _is(first, ("oneliner", 1), ("quiet", 4), ("verbose", 4)):
        pass
    elif _is(first, ("readonly", 4)):
        session.readonly = True
    else:
        _fail(session, f"invalid keyword: {first}")


def _show(session: Session, words: list[str]) -> None:
    entity = _entity(words[0]) if words else None
    if entity is None:
        if words and any(_is(words[0], name) for name in NOT_KEPT):
            _fail(session, f"sacctmgr: error: corral keeps no {words[0]}: it answers list account, list "
                           "association and list user")
        else:
            _fail(session, NO_ENTITY)
        return
    try:
        query = parse_query(entity, words[1:], with_assocs=session.with_assocs)
    except ConditionError as exc:
        _fail(session, str(exc))
        return
    try:
        listed_columns(entity, query)  # read before the query, as sacctmgr reads them
    except ValueError as exc:  # and stops at once on an unknown field
        print(exc, file=sys.stderr)
        raise SystemExit(1) from None
    answer = server().ask("GET", "/api/v1/associations")
    text = listing(entity, answer, query, parsable=session.parsable, noheader=session.noheader)
    sys.stdout.write(text)
    sys.stdout.flush()


def _refuse_add(session: Session, words: list[str]) -> None:
    if session.readonly:
        _fail(session, "Can't run this command in readonly mode.")
        return
    what = next((noun for first, second, noun in ADDED if words and (_is(words[0], first) or
                                                                    (second is not None and _is(words[0], second)))),
                None)
    if what is None:
        _fail(session, 'No valid entity in add command\nInput line must include "Account", "Cluster", '
                       '"Coordinator", "Federation", "QOS", "Resource", or "User"')
        return
    _fail(session, f" Problem adding {what}: Access/permission denied\n{KEPT}")


def _entity(word: str) -> str | None:
    for first, second, entity in ENTITIES:
        if _is(word, first) or (second is not None and _is(word, second)):
            return entity
    return None


def _is(word: str, *names: tuple[str, int]) -> bool:
    """sacctmgr's keyword match: `word` starts the keyword, case aside, at least as long as it needs."""
    return any(letters <= len(word) <= len(name) and name.lower().startswith(word.lower()) for name, letters in names)


def _fail(session: Session, message: str) -> None:
    print(message, file=sys.stderr)
    session.status = 1
