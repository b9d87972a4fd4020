"""HTCondor submit file macros: `$(...)` expanded, and the stand-ins for what differs from task to task.

`Macros` expands a command's value from the file's own definitions; `$(Cluster)`, `$(Process)` and the
variables of `queue ... in/from` become private-use characters (`CLUSTER`, `TASK`, `ITEM_BASE` + N)
that `htcondor_commands` and `htcondor_wrapper` turn into corral patterns or the job's shell variables.
`Items` holds those variables' values, task by task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from corral.errors import InvalidRequest

# Stand-ins for $(Process) and $(Cluster) between macro expansion and the place each value goes:
# private-use characters, refused in the file itself, that no quoting rule treats specially.
TASK = "\ue000"
CLUSTER = "\ue001"
# A variable of `queue ... in/from/matching` that differs from task to task: U+E100 + its number.
ITEM_BASE = 0xE100
PLACEHOLDER = re.compile("([\ue000\ue001\ue100-\ue1ff])")

MACRO = re.compile(r"\$(\$?)([A-Za-z_][A-Za-z0-9_]*)?\(([^()]*)\)")
_RUN_TIME_KEYS = "arguments, environment, input, output and error"


@dataclass
class Items:
    names: list[str]
    """Lower-case names: the queue's variables, then step, itemindex and row."""
    rows: list[list[str]]
    """Per task (its process number), the value of each name."""


class Macros:
    """Expands $(...) in values: the file's own definitions, and $(Cluster)/$(Process) as stand-ins."""

    def __init__(self, values: dict[str, str], *, array: bool, items: Items | None = None) -> None:
        self.values = values
        self.array = array
        self.items = items
        self.cluster_only = False

    def expand(self, key: str, *, run_time: bool = False, cluster_only: bool = False) -> str:
        """The value of submit command `key`; `run_time` allows $(Cluster) and $(Process) in it
        (`cluster_only`: $(Cluster) alone)."""
        self.cluster_only = cluster_only
        try:
            return self.expand_text(self.values[key], key, run_time=run_time, stack=(key,))
        finally:
            self.cluster_only = False

    def expand_text(self, text: str, key: str, *, run_time: bool = False, stack: tuple[str, ...] = ()) -> str:
        def replace(match: re.Match[str]) -> str:
            whole = match.group(0)
            if match.group(1):
                raise InvalidRequest(
                    key, f"{whole} takes its value from the machine the job lands on; corral has no machine ClassAds",
                    "write the value out",
                )
            if match.group(2):
                raise InvalidRequest(
                    key, f"the macro function ${match.group(2)}() in {whole} is not supported",
                    "write out its value",
                )
            name, has_default, default = match.group(3).partition(":")
            name = name.strip().lower()
            if self.items is not None and name in self.items.names:
                return self._item(name, whole, key, run_time)
            if name in ("cluster", "clusterid"):
                return self._per_job(CLUSTER, whole, key, run_time)
            if name in ("process", "procid", "step"):
                return self._per_job(TASK, whole, key, run_time)
            if name in ("row", "itemindex"):
                return "0"
            if name == "dollar":
                return "$"
            if name in self.values and not name.startswith("+"):
                if name in stack:
                    raise InvalidRequest(key, f"{whole} refers to itself", "define it without referring back to it")
                return self.expand_text(self.values[name], key, run_time=run_time, stack=(*stack, name))
            if has_default:
                return default
            raise InvalidRequest(
                key, f"unknown macro {whole}",
                "define it in the file (name = value), or write out its value",
            )

        return MACRO.sub(replace, text)

    def _item(self, name: str, whole: str, key: str, run_time: bool) -> str:
        assert self.items is not None
        column = self.items.names.index(name)
        if not self.array:
            return self.items.rows[0][column]  # one job: its value is known now
        if not run_time or self.cluster_only:
            raise InvalidRequest(
                key, f"{whole} differs from job to job, and corral takes one {key} for all of them",
                f"use it only in {_RUN_TIME_KEYS}",
            )
        return chr(ITEM_BASE + column)

    def _per_job(self, placeholder: str, whole: str, key: str, run_time: bool) -> str:
        if placeholder == TASK and not self.array:
            return "0"  # a single job is process 0 of its cluster
        if self.cluster_only and placeholder == TASK:
            raise InvalidRequest(
                key, f"{whole} differs from job to job; corral writes one {key} for the whole cluster",
                "use $(Cluster) alone in it",
            )
        if not run_time:
            raise InvalidRequest(
                key, f"{whole} differs from job to job, and corral takes one {key} for all of them",
                f"use it only in {_RUN_TIME_KEYS}",
            )
        return placeholder
