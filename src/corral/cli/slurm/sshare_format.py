"""What Slurm 22.05's `sshare` prints (src/sshare/process.c), from the associations of corral's
`GET /api/v1/associations` (their figures: `corral.core.scheduling.associations`).

    sshare_text(associations, *, fields=None, long=False, partitions=False, users=None, accounts=None,
                users_only=False, parsable=None, noheader=False, cluster="corral") -> str

corral's fair share is Slurm's classic one, so the layout is a cluster's with `PriorityFlags=NO_FAIR_TREE`:
no LevelFS by default, and a FairShare on every line. `users`: the users whose lines to show (None: all, `-a`);
account lines are shown whatever it holds, as Slurm shows them. `accounts` (`-A`) keeps the lines of those
accounts alone. `users_only` (`-U`) drops account lines. The Account column is indented by depth, a user's
line naming its account one step in from the account's own line (slurmdb_tree_name_get).

Raises ValueError(`Invalid field requested: "X"`) for a field sshare does not know.
"""

from __future__ import annotations

from corral.cli.slurm import print_fields
from corral.cli.slurm.accounting_text import atoi, char_list, tree_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping
    from typing import Any

# (name, width), in sshare's order: a field is the first whose name starts with what was asked
FIELDS = (
    ("Account", -20), ("Cluster", 10), ("EffectvUsage", 13), ("FairShare", 10), ("GrpTRESMins", 30),
    ("GrpTRESRaw", 30), ("ID", 6), ("LevelFS", 10), ("NormShares", 11), ("NormUsage", 11), ("Partition", 12),
    ("RawShares", 10), ("RawUsage", 11), ("TRESRunMins", 30), ("User", 10),
)
_KINDS = {"EffectvUsage": "f", "FairShare": "f", "ID": "u", "LevelFS": "f", "NormShares": "f", "NormUsage": "f",
          "RawShares": "u", "RawUsage": "u"}
SHORT = "A,User,RawShares,NormShares,RawUsage,Eff,Fairshare"
LONG = "A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,GrpTRESMins,TRESRunMins"
TRES_ORDER = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages", "gres/gpu")


def columns(fields: str | None, *, long: bool = False, partitions: bool = False) -> list[tuple[str, int, str]]:
    """The columns `-o` (or the default, `-l`, `-m`) asks for: `(name, width, kind)`."""
    if fields is None:
        fields = LONG if long else SHORT
        if partitions:
            fields = fields.replace("A,User,", "A,User,P,")
    widths = dict(FIELDS)
    chosen: list[str] = []
    for item in char_list(fields):
        name, percent, width = item.partition("%")
        found = next((field for field, _ in FIELDS if field.lower().startswith(name)), None)
        if found is None:
            raise ValueError(f'Invalid field requested: "{name}"')
        if percent and atoi(width):
            widths[found] = atoi(width)  # Slurm changes its table: a width holds for every use of the field
        chosen.append(found)
    return [(name, widths[name], _KINDS.get(name, "s")) for name in chosen]


def sshare_text(associations: Iterable[Mapping[str, Any]], *, fields: str | None = None, long: bool = False,
                partitions: bool = False, users: Collection[str] | None = None,
                accounts: Collection[str] | None = None, users_only: bool = False, parsable: str | None = None,
                noheader: bool = False, cluster: str = "corral") -> str:
    """sshare's whole output (see the module's docstring)."""
    chosen = columns(fields, long=long, partitions=partitions)
    out = [] if noheader else [print_fields.header(chosen, parsable)]
    wanted_users = None if users is None else {user.lower() for user in users}
    wanted_accounts = None if accounts is None else {account.lower() for account in accounts}
    tree: list[list[Any]] = []  # [name, spaces, print_name, is_user], as slurmdb_tree_name_get keeps them
    for row in associations:
        user = row.get("user")
        if user is not None and wanted_users is not None and str(user).lower() not in wanted_users:
            continue
        if wanted_accounts is not None and str(row["account"]).lower() not in wanted_accounts:
            continue
        if users_only and user is None:
            continue
        name = f"|{user}" if user is not None else str(row["account"])
        parent = row["account"] if user is not None else row.get("parent")
        shown = tree_name(name, parent, tree)
        out.append(print_fields.line(chosen, [_value(field, row, shown, cluster) for field, _, _ in chosen], parsable))
    return "".join(out)


def tres_text(counts: Mapping[str, int] | None) -> str:
    if not counts:
        return ""
    return ",".join(f"{key}={int(counts[key])}" for key in TRES_ORDER if key in counts)


def _value(field: str, row: Mapping[str, Any], shown: str, cluster: str) -> Any:
    root = row.get("parent") is None
    parent_shares = row.get("shares") == "parent"
    if field == "Account":
        return shown
    if field == "User":
        return row.get("user")
    if field == "Cluster":
        return cluster
    if field == "ID":
        return row.get("id")
    if field == "RawShares":
        return None if root else row.get("shares")  # root's are Slurm's NO_VAL
    if field == "NormShares":
        return row.get("norm_shares")
    if field == "RawUsage":
        return row.get("raw_usage")
    if field == "NormUsage":
        return row.get("norm_usage")
    if field == "EffectvUsage":
        return row.get("effective_usage")
    if field == "FairShare":
        return row.get("fairshare")
    if field == "LevelFS":
        level = row.get("level_fs")
        return None if parent_shares or level is None else float(level)
    if field == "Partition":
        return None
    if field == "TRESRunMins":
        return tres_text(row.get("tres_run_mins"))
    if field == "GrpTRESRaw":  # corral keeps usage by user, not by TRES: blank unless the row says
        return tres_text(row.get("grp_tres_raw"))
    return ""  # GrpTRESMins: corral sets no such limits
