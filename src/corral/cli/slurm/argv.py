"""Command lines read as Slurm's commands read them (getopt_long): `--name=value`, `--name value`,
`-xVALUE`, `-x VALUE`, bundled short flags (`-hl`), unique abbreviations of long names (`--part`),
and `--` to end the options.

An option is declared once: `Option("partition", "p", value=True)`. A repeated option keeps its last
value, except `many=True` options, which keep every value in order (`-j 1 -j 2`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


class UsageError(Exception):
    """A command line the command cannot read: the message says which option and what to do."""


class Option:
    __slots__ = ("key", "long", "short", "value", "many", "optional")

    def __init__(self, long: str, short: str = "", *, value: bool = False, many: bool = False, key: str = "",
                 optional: bool = False) -> None:
        self.long = long
        self.short = short
        self.value = value
        self.many = many
        self.optional = optional  # `--nice` alone or `--nice=10`: a value only after `=`
        self.key = key or long.replace("-", "_")


def parse(argv: Sequence[str], options: Sequence[Option], *, stop_at_first_operand: bool = False
          ) -> tuple[dict[str, object], list[str]]:
    """(the options given, by key; the operands). Flags are True; `many` options are lists.

    `stop_at_first_operand`: what follows the first operand is the operands' (sbatch's script and its
    arguments), not options.

    Raises:
        UsageError: an unknown or ambiguous option, or one missing its value.
    """
    longs = {option.long: option for option in options}
    shorts = {option.short: option for option in options if option.short}
    given: dict[str, object] = {}
    operands: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            operands.extend(argv[i:])
            break
        if token.startswith("--"):
            name, equals, value = token[2:].partition("=")
            option = _long(name, token, longs)
            if option.value and not equals and not option.optional:
                if i >= len(argv):
                    raise UsageError(f"option '--{option.long}' requires an argument")
                value = argv[i]
                i += 1
            elif not option.value and equals:
                raise UsageError(f"option '--{option.long}' doesn't allow an argument")
            _set(given, option, value if option.value and (equals or not option.optional) else True)
        elif token.startswith("-") and len(token) > 1:
            j = 1
            while j < len(token):
                found = shorts.get(token[j])
                if found is None:
                    raise UsageError(f"invalid option -- '{token[j]}'")
                option = found
                j += 1
                if not option.value:
                    _set(given, option, True)
                    continue
                if j < len(token):
                    _set(given, option, token[j:])
                elif option.optional:
                    _set(given, option, True)
                elif i < len(argv):
                    _set(given, option, argv[i])
                    i += 1
                else:
                    raise UsageError(f"option requires an argument -- '{option.short}'")
                break
        else:
            operands.append(token)
            if stop_at_first_operand:
                operands.extend(argv[i:])
                break
    return given, operands


def _long(name: str, token: str, longs: dict[str, Option]) -> Option:
    if name in longs:
        return longs[name]
    matches = [option for long, option in longs.items() if long.startswith(name)]
    if len({id(option) for option in matches}) == 1 and name:
        return matches[0]
    if matches:
        names = " ".join(f"'--{option.long}'" for option in matches)
        raise UsageError(f"option '{token}' is ambiguous; possibilities: {names}")
    raise UsageError(f"unrecognized option '{token}'")  # as glibc's getopt_long words it


def _set(given: dict[str, object], option: Option, value: object) -> None:
    if option.many:
        values = given.setdefault(option.key, [])
        if isinstance(values, list):
            values.append(value)
    else:
        given[option.key] = value


def listed(given: dict[str, object], key: str) -> list[str]:
    """An option's values as Slurm lists them: comma-separated, and for `many` options each time given
    (`-u alice,bob -u carol`)."""
    raw = given.get(key) or []
    values = raw if isinstance(raw, list) else [raw]
    return [part for value in values for part in str(value).split(",") if part]


def option_text(value: object) -> str | None:
    """An option's value as text; None when it was not given."""
    return None if value is None else str(value)
