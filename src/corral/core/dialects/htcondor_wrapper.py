"""The /bin/sh script a job runs when its command needs values known only at run time.

HTCondor's `$(Cluster)`, `$(Process)` and `queue` variables in arguments, environment and input (and
`queue` variables in output and error) become `$CORRAL_*` and `$_corral_N` in a script that quotes
every literal piece with `shlex.quote`; `item_table` puts a `case` on `$CORRAL_ARRAY_TASK_ID` before
it, setting each task's items.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from corral.core.dialects.htcondor_macros import CLUSTER, ITEM_BASE, PLACEHOLDER, TASK
from corral.errors import InvalidRequest

if TYPE_CHECKING:
    from corral.core.dialects.htcondor_macros import Items, Macros

MAX_ITEM_TABLE_BYTES = 64 * 1024


def wrapper_script(words: list[str], per_job_env: dict[str, str], stdin: str, redirects: list[tuple[str, str]],
                   *, array: bool) -> str:
    """A /bin/sh script that sets the per-job variables and execs the command; only $CORRAL_* and the
    item variables it sets itself are expanded."""
    lines = [f"export {name}={_shell_word(value, array=array)}" for name, value in per_job_env.items()]
    command = "exec " + " ".join(_shell_word(word, array=array) for word in words)
    if stdin:
        command += " < " + _shell_word(stdin, array=array)
    for operator, path in redirects:
        command += f" {operator}" + _shell_word(path, array=array)
    lines.append(command)
    return "\n".join(lines)


def item_redirects(values: dict[str, str], macros: Macros) -> list[tuple[str, str]]:
    """Where output and error name a queue variable: the wrapper opens them (a corral pattern cannot)."""
    if macros.items is None or not macros.array:
        return []
    paths = {
        key: macros.expand(key, run_time=True).strip()
        for key in ("output", "error") if key in values and values[key].strip()
    }
    if not any(re.search("[\ue100-\ue1ff]", path) for path in paths.values()):
        return []
    return [(">", paths.get("output", "/dev/null")), ("2>", paths.get("error", "/dev/null"))]


def item_table(items: Items | None, script: str) -> str:
    """The script, after a `case` that sets each item variable it uses for this task."""
    used = sorted({ord(c) - ITEM_BASE for c in script if ITEM_BASE <= ord(c) < ITEM_BASE + 0x100})
    if items is None or not used:
        return script
    lines = ['case "$CORRAL_ARRAY_TASK_ID" in']
    for task, row in enumerate(items.rows):
        sets = " ".join(f"_corral_{k}={shlex.quote(row[k])}" for k in used)
        lines.append(f"{task}) {sets};;")
    lines.append("esac")
    table = sum(len(line) for line in lines)
    if table > MAX_ITEM_TABLE_BYTES:
        raise InvalidRequest(
            "queue", f"its items take {table // 1024} KB in the job's command; corral takes up to "
            f"{MAX_ITEM_TABLE_BYTES // 1024} KB (an argument the kernel passes whole, kept with every task)",
            "split the sweep into several files, or queue N and read line $(Process) of the list in the job",
        )
    body = PLACEHOLDER.sub(lambda m: f'"$_corral_{ord(m.group(1)) - ITEM_BASE}"'
                            if ord(m.group(1)) >= ITEM_BASE else m.group(1), script)
    return "\n".join([*lines, body])


def _shell_word(text: str, *, array: bool) -> str:
    pieces = []
    for piece in PLACEHOLDER.split(text):
        if len(piece) == 1 and ITEM_BASE <= ord(piece) < ITEM_BASE + 0x100:
            pieces.append(piece)  # item_table makes it "$_corral_N"
        elif piece == TASK:
            pieces.append('"$CORRAL_ARRAY_TASK_ID"')
        elif piece == CLUSTER:
            pieces.append('"$CORRAL_ARRAY_JOB_ID"' if array else '"$CORRAL_JOB_ID"')
        elif piece:
            pieces.append(shlex.quote(piece))
    return "".join(pieces) or "''"

