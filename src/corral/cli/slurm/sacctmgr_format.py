"""What Slurm 22.05's `sacctmgr list user|association|account` print (src/sacctmgr/user_functions.c,
association_functions.c, account_functions.c), from corral's `GET /api/v1/associations`.

    listing(entity, answer, query, *, parsable=None, noheader=False) -> str

`entity` is "user", "association" or "account"; `query` the conditions read off the command line
(`corral.cli.slurm.sacctmgr_query.Query`). Users come in name order, each user's associations in the tree's
order; associations in the tree's order (root, root's users, each account then its users); accounts in name
order, each with its own association, then its users' (last added first in Slurm's database: here by name,
last first).

corral sets no limits on associations: their limit columns are blank, as Slurm shows an unset limit. A field
that says nothing of what is listed prints what Slurm prints for it there: a number 0, a time 00:00:00, text
blank (Slurm prints a NULL through the field's printer).

Raises ValueError(`Unknown field 'X'`) for a field sacctmgr does not know.
"""

from __future__ import annotations

from corral.cli.slurm import print_fields
from corral.cli.slurm.sacctmgr_fields import lookup
from corral.cli.slurm.accounting_text import atoi, char_list, tree_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from corral.cli.slurm.sacctmgr_query import Query

    Row = Mapping[str, Any]
    Column = tuple[str, str, int, str]

USER_FIELDS = "U,DefaultA,Ad"
USER_ASSOC_FIELDS = "Cl,Acc,Part,Share,Priority,MaxJ,MaxN,MaxCPUs,MaxS,MaxW,MaxCPUMins,QOS,DefaultQOS"
ASSOC_FIELDS = "Cluster,Account,User,Part"
ASSOC_LIMIT_FIELDS = ("Share,Priority,GrpJ,GrpTRES,GrpS,GrpWall,GrpTRESMins,MaxJ,MaxTRES,MaxTRESPerN,MaxS,MaxW,"
                      "MaxTRESMins,QOS,DefaultQOS,GrpTRESRunMins")
ACCOUNT_FIELDS = "Acc,Des,O"
ACCOUNT_ASSOC_FIELDS = ("Cl,ParentN,U,Share,Priority,GrpJ,GrpN,GrpCPUs,GrpMEM,GrpS,GrpWall,GrpCPUMins,MaxJ,MaxN,"
                        "MaxCPUs,MaxS,MaxW,MaxCPUMins,QOS,DefaultQOS")
# what an association may limit; corral sets none of it, so each is Slurm's unset: blank
LIMITS = frozenset({
    "grp_cpus", "grp_cpu_mins", "grp_cpu_run_mins", "grp_tres", "grp_tres_mins", "grp_tres_run_mins", "grp_jobs",
    "grp_jobs_accrue", "grp_mem", "grp_nodes", "grp_submit", "grp_wall", "max_cpu_mins", "max_cpu_run_mins",
    "max_cpus", "max_tres_mins", "max_tres_run_mins", "max_tres", "max_tres_pn", "max_jobs", "max_jobs_accrue",
    "min_prio_thresh", "max_nodes", "max_submit", "max_wall", "priority", "partition",
})
NULL = object()  # a value Slurm passes as NULL: printed by the field's kind


def columns(fields: Sequence[str], default: str, *, tree: bool = False) -> list[Column]:
    """`(key, header, width, kind)` per field asked for (`format=`), else of `default`."""
    out = []
    for item in char_list(",".join(fields)) if fields else char_list(default.lower()):
        name, percent, width_text = item.partition("%")
        found = lookup(name)
        if found is None:
            raise ValueError(f"Unknown field '{name}'")
        key, header, width, kind = found
        if key == "account" and tree:
            width = -20
        if percent and atoi(width_text):
            width = atoi(width_text)
        out.append((key, header, width, kind))
    return out


def listed_columns(entity: str, query: Query) -> list[Column]:
    """The columns `list <entity>` prints: `format=`'s, else sacctmgr's default for the entity and its flags."""
    if entity == "user":
        default = USER_FIELDS + (",Coord" if query.with_coords else "")
        default += "," + USER_ASSOC_FIELDS if query.with_assocs else ""
    elif entity == "association":
        default = ASSOC_FIELDS + ("" if query.without_limits else "," + ASSOC_LIMIT_FIELDS)
    else:
        default = ACCOUNT_FIELDS + ("," + ACCOUNT_ASSOC_FIELDS if query.with_assocs else "")
        default += ",Coord" if query.with_coords else ""
    return columns(query.fields, default, tree=entity == "association" and query.tree)


def listing(entity: str, answer: Mapping[str, Any], query: Query, *, parsable: str | None = None,
            noheader: bool = False) -> str:
    """sacctmgr's output for `list <entity>` (see the module's docstring)."""
    chosen = listed_columns(entity, query)
    if entity == "user":
        lines = _users(answer, query, chosen)
    elif entity == "association":
        lines = _associations(answer, query, chosen)
    else:
        lines = _accounts(answer, query, chosen)
    head = [] if noheader else [print_fields.header([(h, w, k) for _, h, w, k in chosen], parsable)]
    printed = [(h, w, "s" if k == "t" else k) for _, h, w, k in chosen]
    return "".join(head + [print_fields.line(printed, [_shown(v, k) for v, (_, _, _, k) in zip(values, chosen)],
                                             parsable) for values in lines])


def _users(answer: Mapping[str, Any], query: Query, chosen: list[Column]) -> list[list[Any]]:
    rows = _matching_associations(answer, query)
    lines = []
    for user in answer["users"]:
        name = user["name"]
        if query.names is not None and name.lower() not in query.names:
            continue
        if query.default_accounts is not None and user["default_account"].lower() not in query.default_accounts:
            continue
        if query.admin_level is not None and _admin(user).lower() != query.admin_level:
            continue
        own = [row for row in rows if row.get("user") == name]
        if query.filters_associations() and not own:
            continue
        if query.with_assocs:
            lines += [[_user_value(key, user) if key in _USER_KEYS else _association_value(key, row, answer, None)
                       for key, _, _, _ in chosen] for row in own]
            continue
        lines.append([_user_value(key, user) if key in _USER_KEYS
                      else None if key in ("qos", "priority") else NULL for key, _, _, _ in chosen])
    return lines


def _associations(answer: Mapping[str, Any], query: Query, chosen: list[Column]) -> list[list[Any]]:
    tree: list[list[Any]] = []
    lines = []
    for row in _matching_associations(answer, query):
        shown = None
        if query.tree:
            user = row.get("user")
            shown = tree_name(f"|{row['account']}" if user else str(row["account"]),
                              row["account"] if user else row.get("parent"), tree)
        lines.append([_association_value(key, row, answer, shown) for key, _, _, _ in chosen])
    return lines


def _accounts(answer: Mapping[str, Any], query: Query, chosen: list[Column]) -> list[list[Any]]:
    rows = _matching_associations(answer, query)
    lines = []
    for account in sorted(answer["accounts"], key=lambda a: a["name"]):
        name = account["name"]
        if query.names is not None and name.lower() not in query.names:
            continue
        if query.descriptions is not None and account["description"].lower() not in query.descriptions:
            continue
        if query.organizations is not None and account["organization"].lower() not in query.organizations:
            continue
        own = [row for row in rows if row["account"] == name]
        if query.filters_associations() and not own:
            continue
        if not query.with_assocs:
            lines.append([_account_value(key, account) if key in _ACCOUNT_KEYS
                          else None if key in ("qos", "priority") else NULL for key, _, _, _ in chosen])
            continue
        own = [row for row in own if row.get("user") is None] + sorted(
            (row for row in own if row.get("user") is not None), key=lambda row: row["user"], reverse=True)
        lines += [[_account_value(key, account) if key in _ACCOUNT_KEYS
                   else _association_value(key, row, answer, None) for key, _, _, _ in chosen] for row in own]
    return lines


def _matching_associations(answer: Mapping[str, Any], query: Query) -> list[Row]:
    out = []
    for row in answer["associations"]:
        user = row.get("user")
        if query.clusters is not None and answer["cluster"] not in query.clusters:
            continue
        if query.accounts is not None and row["account"].lower() not in query.accounts:
            continue
        if query.users is not None and (user is None or user.lower() not in query.users):
            continue
        if query.ids is not None and row["id"] not in query.ids:
            continue
        if query.partitions is not None:  # corral's associations name no partition
            continue
        if query.parents is not None and (user is not None or (row.get("parent") or "").lower() not in query.parents):
            continue
        if query.only_defaults and not row.get("is_default"):
            continue
        if query.qos is not None and not set(query.qos) & {q.lower() for q in answer["qos"]}:
            continue
        if query.default_qos is not None and (answer.get("default_qos") or "").lower() not in query.default_qos:
            continue
        out.append(row)
    return out


_USER_KEYS = frozenset({"admin", "coordinators", "default_account", "default_wckey", "user"})
_ACCOUNT_KEYS = frozenset({"account", "coordinators", "description", "organization"})


def _admin(user: Row) -> str:
    return "Administrator" if user.get("admin") else "None"


def _user_value(key: str, user: Row) -> Any:
    if key == "admin":
        return _admin(user)
    if key == "coordinators":
        return ",".join(sorted(user.get("coordinates") or ())) or None
    if key == "default_account":
        return user.get("default_account")
    if key == "user":
        return user["name"]
    return None  # DefaultWCKey: corral keeps no WCKeys


def _account_value(key: str, account: Row) -> Any:
    if key == "coordinators":
        return ",".join(account.get("coordinators") or ()) or None
    return account.get("name" if key == "account" else key)


def _association_value(key: str, row: Row, answer: Mapping[str, Any], shown: str | None) -> Any:
    if key == "account":
        return shown if shown is not None else row["account"]
    if key == "cluster":
        return answer["cluster"]
    if key == "default_qos":
        return answer.get("default_qos") or ""
    if key == "shares":
        return row.get("shares")
    if key in LIMITS:
        return None
    if key in ("id", "lft", "rgt"):
        return row.get(key)
    if key == "parent_id":
        return row.get("parent_id") or 0
    if key == "parent_name":
        return row.get("parent") if row.get("user") is None else None
    if key == "qos":
        return ",".join(answer["qos"])
    if key == "qos_raw":
        return ",".join(str(index + 1) for index in range(len(answer["qos"])))
    if key == "user":
        return row.get("user")
    return NULL


def _shown(value: Any, kind: str) -> Any:
    if value is not NULL:
        return value
    return 0 if kind == "u" else "00:00:00" if kind == "t" else None
