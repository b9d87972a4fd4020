"""Who is calling and what they may do: callers, scopes, accounts and the access policy (pure).

The rules are Slurm's: everybody may see the queue; only a job's owner, an admin,
or a coordinator of the job's account may cancel, hold, update it, or read its logs
and its runs' artifacts. A server run by a normal user is that user's personal
queue, and nobody else may use it.

    read    see the queue, jobs, runs and metrics
    submit  read, plus submit jobs, log runs, and manage one's own jobs and alerts
    admin   everything, for every user's jobs; tokens and alert channels for others
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from corral.errors import Forbidden, InvalidRequest

SCOPES = ("read", "submit", "admin")
_RANK = {scope: rank for rank, scope in enumerate(SCOPES)}


def check_scope(scope: object, field_name: str = "scope") -> str:
    if not isinstance(scope, str) or scope not in _RANK:
        raise InvalidRequest(field_name, f"{scope!r} is not a scope", f"use one of {', '.join(SCOPES)}")
    return str(scope)


def scope_covers(granted: str, needed: str) -> bool:
    return _RANK[granted] >= _RANK[needed]


@dataclass(frozen=True, slots=True)
class Caller:
    """One request's caller: a user name, what this credential allows, and how it was learned."""

    user: str
    scope: str
    via: str
    """socket (SO_PEERCRED), local (TCP from this machine, by the kernel's socket table), token, or session (the dashboard's login)."""
    token_id: int | None = None

    @property
    def is_admin(self) -> bool:
        return self.scope == "admin"


@dataclass(frozen=True, slots=True)
class Account:
    """An account as Slurm has them: members charge jobs to it, coordinators manage those jobs."""

    name: str
    members: frozenset[str] = frozenset()
    coordinators: frozenset[str] = frozenset()


@dataclass(frozen=True)
class AccessPolicy:
    admins: frozenset[str] = frozenset()
    accounts: Mapping[str, Account] = field(default_factory=dict)
    owner: str | None = None
    """A personal queue's one user; None for a shared server (run by root)."""

    def scope_of(self, user: str) -> str:
        """The most a user may do: a caller the kernel vouches for has it, and no token of theirs exceeds it."""
        if user in self.admins or user == "root" or user == self.owner:
            return "admin"
        return "submit"

    def admit(self, caller: Caller) -> None:
        """Refuse anyone but the owner of a personal queue."""
        if self.owner is not None and caller.user != self.owner and caller.user != "root":
            raise Forbidden(f"this corral server is {self.owner}'s personal queue; user {caller.user} may not use it "
                            "(a shared server runs as root: see 'Running corral as a shared service' in the README)")

    def require(self, caller: Caller, scope: str, action: str) -> None:
        if not scope_covers(caller.scope, scope):
            raise Forbidden(f"{action} needs a credential with {scope} scope; this one ({caller.via}) has {caller.scope}")

    def may_manage(self, caller: Caller, owner: str, account: str | None = None) -> bool:
        if caller.is_admin:
            return True
        if not scope_covers(caller.scope, "submit"):
            return False
        if caller.user == owner:
            return True
        return account is not None and account in self.accounts and caller.user in self.accounts[account].coordinators

    def check_manage(self, caller: Caller, owner: str, account: str | None, action: str) -> None:
        """Raises Forbidden unless the caller may act on something of `owner`'s (in `account`)."""
        if self.may_manage(caller, owner, account):
            return
        if not scope_covers(caller.scope, "submit"):
            raise Forbidden(f"{action}: this credential is read-only ({caller.scope} scope)")
        who = f"its owner ({owner}) or an admin"
        if account is not None and account in self.accounts:
            who = f"its owner ({owner}), an admin or a coordinator of account {account}"
        raise Forbidden(f"{action}: only {who} may do this; you are {caller.user}")

    def check_rerun(self, caller: Caller, owner: str, action: str) -> None:
        """Raises Forbidden unless the caller may run `owner`'s job again: its owner or an admin (not an
        account's coordinator, who manages members' jobs but never starts one in their name: a rerun runs as
        the owner).
        """
        self.require(caller, "submit", action)
        if caller.user != owner and not caller.is_admin:
            raise Forbidden(f"{action}: only its owner ({owner}) or an admin may run it again; you are {caller.user}")

    def account_for(self, user: str, asked: str | None) -> str | None:
        """The account a user's job is charged to: the one asked for, else the user's first.

        Raises:
            InvalidRequest: an unknown account, or one the user is not in.
        """
        if asked is None:
            return next((a.name for a in sorted(self.accounts.values(), key=lambda a: a.name) if user in a.members), None)
        account = self.accounts.get(asked)
        if account is None:
            known = ", ".join(sorted(self.accounts)) or "none are configured"
            raise InvalidRequest("account", f"unknown account {asked!r}", f"known accounts: {known}")
        if user not in account.members and user not in account.coordinators and user not in self.admins:
            raise InvalidRequest("account", f"user {user} is not a member of account {asked}",
                                 "ask an admin to add you to it in the server's config")
        return asked


def parse_accounts(table: Mapping[str, object], path: str) -> dict[str, Account]:
    """`[accounts.NAME] members = [...], coordinators = [...]` from the server's config.

    Raises:
        InvalidRequest: naming the bad key.
    """
    accounts = {}
    for name, body in table.items():
        if not isinstance(body, Mapping):
            raise InvalidRequest(f"accounts.{name}", f"must be a table in {path}", 'e.g. members = ["alice", "bob"]')
        lists: dict[str, frozenset[str]] = {}
        for key, value in body.items():
            if key not in ("members", "coordinators"):
                raise InvalidRequest(f"accounts.{name}.{key}", f"unknown key in {path}", "known: members, coordinators")
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InvalidRequest(f"accounts.{name}.{key}", f"must be a list of user names in {path}")
            lists[key] = frozenset(value)
        accounts[name] = Account(name, lists.get("members", frozenset()), lists.get("coordinators", frozenset()))
    return accounts
