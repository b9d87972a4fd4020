"""What Slurm's accounting commands (sacctmgr, sshare) share in reading lists and drawing their tree."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def char_list(text: str) -> list[str]:
    """Slurm's slurm_addto_char_list: comma-separated, lower-cased, blanks dropped, a repeated name moved last."""
    out: list[str] = []
    for item in text.split(","):
        if not item:
            continue
        item = item.lower()
        if item in out:
            out.remove(item)
        out.append(item)
    return out


def tree_name(name: str, parent: str | None, tree: list[list[Any]]) -> str:
    """The Account column's text: a name indented one space more than its parent's line, which a user's line
    names (Slurm's slurmdb_tree_name_get, `|user` standing for a user's line)."""
    found = None
    above = None
    for entry in tree:
        if entry[3]:
            continue
        if entry[0] == name:
            found = entry
            break
        if parent is not None and entry[0] == parent:
            above = entry
    if parent is not None and found is not None:
        return str(found[2])
    spaces = " " + above[1] if above is not None else ""
    is_user = name.startswith("|")
    shown = spaces + (str(parent) if is_user else name)
    tree.append([name, spaces, shown, is_user])
    return shown


def atoi(text: str) -> int:
    """C's atoi: the leading whole number, 0 without one."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    number = ""
    for char in digits:
        if not char.isdigit():
            break
        number += char
    return sign * int(number) if number else 0
