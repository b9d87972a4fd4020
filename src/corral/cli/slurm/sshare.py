"""`sshare`: the associations' fair share, as Slurm's sshare prints it, from corral's own fair share."""

from __future__ import annotations

import sys

from corral.cli.slurm.argv import Option, listed, parse
from corral.cli.slurm.command import Refused, answered, caller, server
from corral.cli.slurm.sshare_format import FIELDS, sshare_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

OPTIONS = [
    Option("accounts", "A", value=True, many=True), Option("all", "a"), Option("helpformat", "e"),
    Option("long", "l"), Option("partition", "m"), Option("cluster", value=True, key="clusters"),
    Option("clusters", "M", value=True), Option("noheader", "n"), Option("format", "o", value=True, many=True),
    Option("parsable", "p"), Option("parsable2", "P"), Option("users", "u", value=True, many=True),
    Option("Users", "U", key="users_only"), Option("verbose", "v"), Option("version", "V"), Option("help"),
    Option("usage"), Option("noheader", "h"),  # -h is -n too
]

USAGE = """\
Usage:  sshare [OPTION]                                                    
  Valid OPTIONs are:                                                       
    -a or --all            list all users                                  
    -A or --accounts=      display specific accounts (comma separated list)
    -e or --helpformat     Print a list of fields that can be specified    
                           with the '--format' option                      
    -l or --long           include normalized usage in output              
    -m or --partition      print the partition part of the association     
    -M or --cluster=names  clusters to issue commands to.                  
                           NOTE: SlurmDBD must be up.                      
    -n or --noheader       omit header from output                         
    -o or --format=        Comma separated list of fields (use             
                           "--helpformat" for a list of available fields).
    -p or --parsable       '|' delimited output with a trailing '|'        
    -P or --parsable2      '|' delimited output without a trailing '|'     
    -u or --users=         display specific users (comma separated list)   
    -U or --Users          display only user information                   
    -v or --verbose        display more information                        
    -V or --version        display tool version number                     
          --help           display this usage description                  
          --usage          display this usage description                  
                                                                           

"""  # noqa: W291 - sshare's own text, trailing spaces and all


def main(argv: Sequence[str]) -> int:
    given, _ = parse(argv, OPTIONS)  # sshare reads no operands: getopt leaves them and nothing looks
    if answered(given, USAGE):
        return 0
    if given.get("helpformat"):
        sys.stdout.write(helpformat())
        return 0
    clusters = listed(given, "clusters")
    for name in clusters:
        if name != "corral":
            raise Refused(f"No cluster '{name}' known by database.\nsshare: error: '{name}' can't be reached now, "
                          "or it is an invalid entry for --cluster.  Use 'sacctmgr list clusters' to see available "
                          "clusters.")
    try:
        users = _users(given)
    except LookupError as exc:  # sshare's own words, without its name
        print(exc.args[0], file=sys.stderr)
        return 1
    accounts = listed(given, "accounts") or None
    formats = given.get("format")
    fields = ",".join(str(f) for f in formats) + "," if isinstance(formats, list) else None
    parsable = "" if given.get("parsable2") else "|" if given.get("parsable") else None
    answer = server().ask("GET", "/api/v1/associations")
    try:
        text = sshare_text(answer["associations"], fields=fields, long=bool(given.get("long")),
                           partitions=bool(given.get("partition")), users=users, accounts=accounts,
                           users_only=bool(given.get("users_only")), parsable=parsable,
                           noheader=bool(given.get("noheader")), cluster=answer["cluster"])
    except ValueError as exc:
        raise Refused(str(exc)) from None
    if clusters:
        text = "\n".join(f"CLUSTER: {name}\n{text}" for name in dict.fromkeys(clusters))
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def helpformat() -> str:
    """`-e`: the field names, four a line."""
    out = []
    for index, (name, _) in enumerate(FIELDS):
        out.append(" " if index & 3 else "\n" if index else "")
        out.append(f"{name:<17}")
    return "".join(out) + "\n"


def _users(given: dict[str, object]) -> list[str] | None:
    """The users whose lines to show: `-u`'s (uids named as their users), all with `-a` or `-u -1`, else the
    caller's own, as sshare asks the controller."""
    names = listed(given, "users")
    if given.get("all") or "-1" in names:
        return None
    if not names:
        return [caller()]
    import pwd

    out = []
    for name in names:
        if name.isdigit():
            try:
                name = pwd.getpwuid(int(name)).pw_name
            except KeyError:
                raise LookupError(f"Invalid user id: {name}") from None
        out.append(name)
    return out
