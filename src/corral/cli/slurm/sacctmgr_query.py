"""The conditions of `sacctmgr list user|association|account ...`, read as sacctmgr's `_set_cond` functions read
them: `where` and `set` are skipped, `key=value` keys match by prefix (at least as many letters as each key
needs, case aside), a bare word is a name (a user's, an account's; an association's id), lists are
comma-separated and lower-cased, `format=` gathers the fields.

    parse(entity, words, *, with_assocs=False) -> Query

Raises ConditionError with sacctmgr's lines (` Unknown condition: X`, ...) for a word it does not take.
"""

from __future__ import annotations

from corral.cli.slurm.accounting_text import char_list
from corral.cli.slurm.sacctmgr_fields import matches

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


class ConditionError(Exception):
    """What sacctmgr prints to stderr before it exits 1."""


class Query:
    """The conditions and flags of one listing: each list None when not given."""

    __slots__ = ("names", "users", "accounts", "clusters", "ids", "partitions", "parents", "qos", "default_qos",
                 "default_accounts", "admin_level", "descriptions", "organizations", "fields", "with_assocs",
                 "with_coords", "tree", "only_defaults", "without_limits")

    def __init__(self, *, with_assocs: bool = False) -> None:
        self.names: set[str] | None = None
        self.users: set[str] | None = None
        self.accounts: set[str] | None = None
        self.clusters: set[str] | None = None
        self.ids: set[int] | None = None
        self.partitions: set[str] | None = None
        self.parents: set[str] | None = None
        self.qos: set[str] | None = None
        self.default_qos: set[str] | None = None
        self.default_accounts: set[str] | None = None
        self.admin_level: str | None = None
        self.descriptions: set[str] | None = None
        self.organizations: set[str] | None = None
        self.fields: list[str] = []
        self.with_assocs = with_assocs
        self.with_coords = False
        self.tree = False
        self.only_defaults = False
        self.without_limits = False

    def filters_associations(self) -> bool:
        """Whether a condition on associations is set (a user or account is then listed only with one)."""
        return any(value is not None for value in (self.users, self.accounts, self.clusters, self.ids,
                                                   self.partitions, self.parents, self.qos, self.default_qos)
                   ) or self.only_defaults


def parse(entity: str, words: Sequence[str], *, with_assocs: bool = False) -> Query:
    """The query `words` make for `list <entity>` (user, association or account)."""
    query = Query(with_assocs=with_assocs)
    problems: list[str] = []
    for word in words:
        key, equals, value = _split(word)
        bare = not equals
        if (entity != "association" and _is(key, ("Set", 3))) or (bare and _is(key, ("where", 5))):
            continue
        if not _flag(entity, key, bare, query) and not _condition(entity, key, value, bare, query, problems):
            problems.append(f" Unknown condition: {word}")
            if entity != "association":
                problems.append(" Use keyword 'set' to modify value")
    if problems:
        raise ConditionError("\n".join(problems))
    return query


def _split(word: str) -> tuple[str, str, str]:
    """`key=value` (also `key+=value`, `key-=value`), as parse_option_end finds the key."""
    for index, char in enumerate(word):
        if char == "=":
            return word[:index], "=", word[index + 1:]
        if char in "+-" and word[index + 1:index + 2] == "=":
            return word[:index], "=", word[index + 2:]
    return word, "", ""


def _is(key: str, *names: tuple[str, int]) -> bool:
    return any(matches(key, name, letters) for name, letters in names)


def _flag(entity: str, key: str, bare: bool, query: Query) -> bool:
    if not bare:
        return False
    if entity == "association":
        if _is(key, ("OnlyDefaults", 2)):
            query.only_defaults = True
        elif _is(key, ("Tree", 4)):
            query.tree = True
        elif _is(key, ("WOPLimits", 4), ("WOLimits", 3)):
            query.without_limits = True
        elif not _is(key, ("WithDeleted", 5), ("WithRawQOSLevel", 5), ("WithSubAccounts", 5), ("WOPInfo", 4)):
            return False
        return True
    if _is(key, ("WithAssoc", 5)):
        query.with_assocs = True
    elif _is(key, ("WithCoordinators", 5)):
        query.with_coords = True
    elif not _is(key, ("WithDeleted", 5), ("WithRawQOSLevel", 5), ("WOPLimits", 4)):
        return False
    return True


def _condition(entity: str, key: str, value: str, bare: bool, query: Query, problems: list[str]) -> bool:
    text = key if bare else value
    if entity == "association" and (bare or _is(key, ("Ids", 1), ("Associations", 2))):
        query.ids = (query.ids or set()) | _ids(text, problems)
        return True
    if entity == "user" and (bare or _is(key, ("Names", 1), ("Users", 1))):
        query.names = _more(query.names, text)
        return True
    if entity == "account" and (bare or _is(key, ("Names", 1), ("Accounts", 1), ("Acct", 4))):
        query.names = _more(query.names, text)
        return True
    if bare:
        return False
    if _is(key, ("Format", 1)):
        query.fields.append(value)
        return True
    if entity == "user":
        if _is(key, ("AdminLevel", 2)):
            query.admin_level = _admin_level(value)
            return True
        if _is(key, ("Clusters", 1)):
            query.clusters = _more(query.clusters, value)
            return True
        if _is(key, ("DefaultAccount", 8)):
            query.default_accounts = _more(query.default_accounts, value)
            return True
        if _is(key, ("DefaultWCKey", 8), ("WCKeys", 1)):
            return True  # corral keeps no WCKeys: nothing to narrow
    if entity == "account":
        if _is(key, ("Descriptions", 1)):
            query.descriptions = _more(query.descriptions, value)
            return True
        if _is(key, ("Organizations", 1)):
            query.organizations = _more(query.organizations, value)
            return True
    return _association_condition(key, value, query, problems)


def _association_condition(key: str, value: str, query: Query, problems: list[str]) -> bool:
    """sacctmgr_set_assoc_cond, what every listing takes about associations."""
    if _is(key, ("Accounts", 2), ("Acct", 4)):
        query.accounts = _more(query.accounts, value)
    elif _is(key, ("Ids", 1), ("Associations", 2)):
        query.ids = (query.ids or set()) | _ids(value, problems)
    elif _is(key, ("Clusters", 1)):
        query.clusters = _more(query.clusters, value)
    elif _is(key, ("DefaultQOS", 8)):
        query.default_qos = _more(query.default_qos, value)
    elif _is(key, ("Partitions", 3)):
        query.partitions = _more(query.partitions, value)
    elif _is(key, ("Parents", 4)):
        query.parents = _more(query.parents, value)
    elif _is(key, ("QosLevel", 1)):
        query.qos = _more(query.qos, value)
    elif _is(key, ("Users", 1)):
        query.users = _more(query.users, value)
    else:
        return False
    return True


def _more(current: set[str] | None, value: str) -> set[str]:
    return (current or set()) | set(char_list(_unquoted(value)))


def _unquoted(value: str) -> str:
    """A value in quotes, as slurm_addto_char_list reads it: up to the closing quote."""
    if value[:1] in ("'", '"'):
        return value[1:].split(value[0], 1)[0]
    return value


def _ids(text: str, problems: list[str]) -> set[int]:
    out = set()
    for item in char_list(_unquoted(text)):
        digits = item.lstrip("-")
        if digits.isdigit():
            out.add(int(item))
        else:
            problems.append(f"sacctmgr: error: Invalid value for AssocId ({item})")
    return out


def _admin_level(value: str) -> str:
    """str_2_slurmdb_admin_level's reading, as the Admin column spells the level."""
    text = value.lower()
    if text.startswith("admin"):
        return "administrator"
    if text.startswith("oper"):
        return "operator"
    if text.startswith("none"):
        return "none"
    return "not set"
