"""`sprio` in Slurm 22.05's columns (priority/multifactor), from corral's `GET /api/v1/priority` answer.

- `sprio(rows, weights=, long=, normalized=, show_weights=, fmt=, no_header=, show_user=)`: the text
  `sprio [-l] [-n] [-w] [-o FORMAT] [-h] [-u USERS]` prints; rows are the API's PriorityOut dicts (id,
  partition, user, priority, age, fairshare, job_size, partition_factor, qos_factor, nice), sorted by
  job id as Slurm's default `-S i`.
- `default_format(weights, long=, normalized=, show_user=)`: the format Slurm picks: `JOBID PARTITION
  PRIORITY SITE` then a column for each factor whose weight is not 0 (AGE, ASSOC, FAIRSHARE, JOBSIZE,
  PARTITION, QOS, TRES), as src/sprio/sprio.c builds it; `-l` shows them all, with USER and NICE.
- `NO_MATCH`: what sprio says when `-j`/`-u` match no pending job.
- `DEFAULT_WEIGHTS`: corral's default priority weights (`corral.core.scheduling.schedconfig.PriorityWeights`),
  for a caller that has no others.

The real testbed runs priority/basic, where sprio only refuses; this layout follows Slurm's
src/sprio/print.c: weighted factors are the factor times its weight printed `%.0f`, normalized ones
(`-n`) the factor printed `%.7f`, the normalized PRIORITY `%16.14f` of priority/2^32-1, each cut to
its column as Slurm cuts. corral has no site factor, association factor or TRES weights: SITE is 0,
and the ASSOC and TRES columns appear only in `-l`, empty or 0 as Slurm shows an unset weight.
"""

from __future__ import annotations

from corral.cli.slurm.values import percent_fields

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    Row = Mapping[str, Any]

NO_MATCH = "Unable to find jobs matching user/id(s) specified\n"
DEFAULT_WEIGHTS = {"age": 1000, "fairshare": 10000, "job_size": 0, "partition": 1000, "qos": 1000}

HEADERS = {
    "i": "JOBID", "r": "PARTITION", "u": "USER", "c": "CLUSTER", "Y": "PRIORITY", "y": "PRIORITY", "S": "SITE",
    "A": "AGE", "a": "AGE", "B": "ASSOC", "b": "ASSOC", "F": "FAIRSHARE", "f": "FAIRSHARE", "J": "JOBSIZE",
    "j": "JOBSIZE", "P": "PARTITION", "p": "PARTITION", "Q": "QOS", "q": "QOS", "N": "NICE", "T": "TRES",
    "t": "TRES",
}
# code (weighted upper case, normalized lower case) -> (API row key, weight key)
_FACTORS = {"a": ("age", "age"), "b": ("", "assoc"), "f": ("fairshare", "fairshare"),
            "j": ("job_size", "job_size"), "p": ("partition_factor", "partition"), "q": ("qos_factor", "qos")}


def default_format(weights: Mapping[str, int], *, long: bool = False, normalized: bool = False,
                   show_user: bool = False) -> str:
    """The format sprio uses without `-o` (src/sprio/sprio.c)."""
    if long:
        if normalized:
            return "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t"
        return "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T"
    fmt = "%.15i %9r" + (" %.8u" if show_user else "")
    fmt += " %10y" if normalized else " %.10Y %.10S"
    for code, (_, weight) in _FACTORS.items():
        if weights.get(weight):
            fmt += f" %10{code}" if normalized else f" %.10{code.upper()}"
    return fmt


def sprio(rows: Iterable[Row], *, weights: Mapping[str, int] | None = None, long: bool = False,
          normalized: bool = False, show_weights: bool = False, fmt: str | None = None, no_header: bool = False,
          show_user: bool = False) -> str:
    """What sprio prints for these pending jobs (see the module's docstring).

    `show_weights` (`-w`): the header and one `Weights` line instead of the jobs.
    """
    weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
    fields = _parse(fmt if fmt is not None else default_format(weights, long=long, normalized=normalized,
                                                                show_user=show_user))
    lines = []
    if not no_header:
        lines.append(_line(fields, lambda code: HEADERS.get(code, "")))
    if show_weights:
        lines.append(_line(fields, lambda code: _weight(code, weights)))
        return "".join(lines)
    for row in sorted(rows, key=lambda r: int(r["id"])):
        lines.append(_line(fields, lambda code, row=row: _value(code, row, weights)))
    return "".join(lines)


def _parse(fmt: str) -> list[tuple[str, int, bool, str]]:
    """`%[.][width]code[suffix]` fields; text before the first `%` is kept as a field of its own."""
    prefix, _, rest = fmt.partition("%")
    fields = [("", 0, False, prefix)] if prefix else []
    if not rest and "%" not in fmt:
        return fields
    return fields + percent_fields("%" + rest)


def _line(fields: list[tuple[str, int, bool, str]], text: Any) -> str:
    out = []
    for code, width, right, suffix in fields:
        if code:
            out.append(_cell(text(code), width, right))
        out.append(suffix)
    return "".join(out) + "\n"


def _cell(text: str, width: int, right: bool) -> str:
    """Slurm's `_print_str` as sprio calls it (always cut): `%Ns`/`%.Ns` cut to the width, then padded."""
    if width == 0:
        return text
    text = f"{text:>{width}}" if right else text
    return f"{text[:width]:<{width}}"


def _value(code: str, row: Row, weights: Mapping[str, int]) -> str:
    if code == "i":
        return str(row["id"])
    if code == "r":
        return str(row.get("partition") or "")
    if code == "u":
        return str(row.get("user") or "")
    if code == "c":
        return ""
    if code == "Y":
        return str(int(row.get("priority") or 0))
    if code == "y":
        return f"{int(row.get('priority') or 0) / 4294967295:16.14f}"
    if code == "S":
        return "0"
    if code == "N":
        return str(int(row.get("nice") or 0))
    if code in "Tt":
        return ""
    factor = _FACTORS.get(code.lower())
    if factor is None:
        return ""
    key, weight = factor
    value = float(row.get(key) or 0.0) if key else 0.0
    if code.islower():
        return f"{value if weights.get(weight) else 0.0:.7f}"
    return f"{value * weights.get(weight, 0):.0f}"


def _weight(code: str, weights: Mapping[str, int]) -> str:
    if code == "i":
        return "Weights"
    if code == "S":
        return "1"
    factor = _FACTORS.get(code.lower())
    if factor is not None:
        return str(weights.get(factor[1], 0))
    return ""
