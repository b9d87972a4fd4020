"""The association tree Slurm's accounting commands show (`sacctmgr`, `sshare`), built from corral's accounts and
its own fair share (pure).

Slurm keeps associations: the root account, the accounts under it, and each user in each account of theirs.
corral's are its `[accounts.NAME]`: an account's users are its members and coordinators; a user who is a member
of no account (every user, where no accounts are kept) charges their jobs to no account, which Slurm calls the
root account, so they sit under root. A user's default account is the one their jobs go to without --account.

Fair share is corral's (`corral.core.scheduling.priority`): per user, over everyone it counts now (users with pending jobs
or decayed usage), accounts playing no part, which is Slurm's `Fairshare=parent` on every account (its users
compete as if they were root's). So the figures are, in sshare's names:

- RawShares: a user's `[scheduler.shares]` (1 unless set); an account's `parent`; root's none.
- NormShares: a user's S, their share of the shares of everyone counted now, themselves included (a user not
  counted yet gets what they would get if they submitted now); an account's and root's 1 (Slurm gives a
  `parent` account its parent's, root's 1).
- RawUsage: decayed GPU-seconds (corral's GPU-hours times 3600; a CPU-second of a CPU-only job counts 1/20),
  where Slurm counts decayed billing-TRES-seconds; an account's is its users' added up (a user in two accounts
  counts in both: corral's usage is the user's, not the account's); root's everyone's.
- NormUsage and EffectvUsage: a user's U, their share of everyone's usage; an account's its RawUsage over
  root's (at most 1); root's EffectvUsage 1, as Slurm sets it.
- FairShare: 2^(-EffectvUsage/NormShares): for a user, corral's factor, what sprio's FAIRSHARE weighs.
- LevelFS: NormShares/EffectvUsage (inf without usage); none for a `parent` account.
- TRESRunMins: what the running jobs of the association (for an account or root: of all under it) hold times
  the minutes left of their time limits (a job without a limit counts nothing), as Slurm's counts;
  billing is the CPUs, as sacct's AllocTRES.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from corral.core.access.identity import Account
from corral.core.scheduling.priority import fairshare_factor, fairshare_terms

ROOT = "root"
# the TRES Slurm 22.05 counts by default, in its id order, and a GPU cluster's gres/gpu (AccountingStorageTRES)
TRES = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages", "gres/gpu")


@dataclass(frozen=True, slots=True)
class RunningUse:
    """What a running job holds, for the minutes left of its time limit (None: it has none)."""

    user: str
    account: str | None
    cpus: int
    mem_mb: int
    nodes: int
    gpus: int
    remaining_s: float | None


@dataclass(frozen=True, slots=True)
class Association:
    """One line of Slurm's association tree: an account (user None) or a user in an account."""

    id: int
    account: str
    user: str | None
    parent: str | None
    """The account above: an account's parent account (None for root); a user's own account."""
    parent_id: int | None
    lft: int
    rgt: int
    shares: int | None
    """The raw shares: a user's; None for a `parent` account (and for root in sshare, which shows none)."""
    norm_shares: float
    raw_usage: int
    norm_usage: float
    effective_usage: float
    fairshare: float
    level_fs: float | None
    is_default: bool
    tres_run_mins: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AccountingUser:
    """A user as sacctmgr lists them."""

    name: str
    default_account: str
    admin: bool
    coordinates: tuple[str, ...]


def default_account(user: str, accounts: Mapping[str, Account]) -> str:
    """Where a user's jobs go without --account: their first account by name, else root (no account)."""
    return next((name for name in sorted(accounts) if user in accounts[name].members), ROOT)


def association_tree(*, accounts: Mapping[str, Account], users: Iterable[str], shares: Mapping[str, int],
                     usage: Mapping[str, float], counted: Iterable[str],
                     running: Iterable[RunningUse] = ()) -> list[Association]:
    """Root, root's users, then each account and its users, each level users first and by name, as Slurm orders
    them (slurmdb_sort_hierarchical_assoc_list). `users`: every user to show (an account's members and
    coordinators are shown whether listed or not); `usage`: decayed GPU-hours by user; `counted`: the users
    with pending jobs, whom fair share counts beside those with usage (see the module's docstring)."""
    members = {name: sorted(accounts[name].members | accounts[name].coordinators) for name in sorted(accounts)}
    everyone = set(users) | {user for names in members.values() for user in names}
    under_root = sorted(user for user in everyone if default_account(user, accounts) == ROOT)
    counted_now = set(counted) | set(usage)
    terms = fairshare_terms(usage, counted_now, shares)
    others = sum(shares.get(user, 1) for user in counted_now)
    total = sum(max(0.0, value) for value in usage.values())
    run_mins = _run_minutes(running)

    def user_terms(user: str) -> tuple[float, float]:
        if user in terms:
            return terms[user]
        own = shares.get(user, 1)  # as if they submitted now: counted beside the others
        return (own / (others + own) if others + own else 0.0), 0.0

    layout: list[tuple[str, str | None, str | None]] = [(ROOT, None, None)]
    layout += [(ROOT, user, ROOT) for user in under_root]
    for name, names in members.items():
        layout.append((name, None, ROOT))
        layout += [(name, user, name) for user in names]
    bounds = _nested_set(layout)
    ids = {(account, user): index + 1 for index, (account, user, _) in enumerate(layout)}
    out = []
    for index, (account, user, parent) in enumerate(layout):
        lft, rgt = bounds[index]
        parent_id = ids.get((parent, None)) if parent is not None else None
        if user is not None:
            s, u = user_terms(user)
            out.append(Association(
                ids[(account, user)], account, user, parent, parent_id, lft, rgt, shares.get(user, 1), s,
                int(max(0.0, usage.get(user, 0.0)) * 3600), u, u, fairshare_factor(s, u),
                s / u if u > 0 else float("inf"), default_account(user, accounts) == account,
                _tres(run_mins, account, user)))
            continue
        if account == ROOT:
            raw = total
            tres = _tres(run_mins, None, None)
        else:
            raw = sum(max(0.0, usage.get(name, 0.0)) for name in members[account])
            tres = _tres(run_mins, account, None)
        norm = min(1.0, raw / total) if total > 0 else 0.0
        effective = 1.0 if account == ROOT else norm
        out.append(Association(ids[(account, None)], account, None, parent, parent_id, lft, rgt,
                               1 if account == ROOT else None, 1.0, int(raw * 3600), norm, effective,
                               fairshare_factor(1.0, effective), 1.0 / effective if account == ROOT else None, False,
                               tres))
    return out


def accounting_users(tree: Iterable[Association], accounts: Mapping[str, Account],
                     admins: Iterable[str]) -> list[AccountingUser]:
    """Each user of the tree, by name: their default account, whether they administer, what they coordinate."""
    names = sorted({association.user for association in tree if association.user is not None})
    chiefs = set(admins)
    return [AccountingUser(name, default_account(name, accounts), name in chiefs,
                           tuple(a for a in sorted(accounts) if name in accounts[a].coordinators)) for name in names]


def _nested_set(layout: list[tuple[str, str | None, str | None]]) -> list[tuple[int, int]]:
    """Each line's (lft, rgt): Slurm's nested-set numbering, each association spanning those under it."""
    account_line = {account: index for index, (account, user, _) in enumerate(layout) if user is None}
    children: dict[int, list[int]] = {index: [] for index in range(len(layout))}
    for index, (account, user, parent) in enumerate(layout[1:], start=1):
        children[account_line[account] if user is not None else account_line[parent or ROOT]].append(index)
    bounds = [(0, 0)] * len(layout)
    counter = 0

    def visit(index: int) -> None:
        nonlocal counter
        counter += 1
        lft = counter
        for child in children[index]:
            visit(child)
        counter += 1
        bounds[index] = (lft, counter)

    visit(0)
    return bounds


def _run_minutes(running: Iterable[RunningUse]) -> dict[tuple[str, str], dict[str, int]]:
    out: dict[tuple[str, str], dict[str, int]] = {}
    for job in running:
        if job.remaining_s is None:
            continue
        minutes = max(0.0, job.remaining_s) / 60.0
        held = {"cpu": job.cpus, "mem": job.mem_mb, "node": job.nodes, "billing": job.cpus, "gres/gpu": job.gpus}
        counts = out.setdefault((job.account or ROOT, job.user), {})
        for key, value in held.items():
            counts[key] = counts.get(key, 0) + int(value * minutes)
    return out


def _tres(run_mins: Mapping[tuple[str, str], Mapping[str, int]], account: str | None, user: str | None
          ) -> dict[str, int]:
    """The TRES minutes of `account`'s jobs (None: every account's), of `user`'s (None: everyone's), every TRES
    named (0 when none)."""
    totals = dict.fromkeys(TRES, 0)
    for (their_account, their_user), counts in run_mins.items():
        if account in (None, their_account) and user in (None, their_user):
            for name, value in counts.items():
                totals[name] += value
    return totals
