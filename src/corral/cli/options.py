"""Command lines of `corral`'s quick commands (submit, queue, show, cancel, logs), read as click reads them,
without importing click: its import alone costs twice the call.

A command's options and operands are declared once, here (`Command`, `Opt`), and read by `parse` with
click's rules and words (`--name=value`, `--name value`, `-xVALUE`, bundled short flags, no abbreviations;
`No such option '--bogus'.`, exit status 2). `corral.cli.main` builds the click parameters of the same
declarations, for `corral --help` and `corral submit --help`: click then writes the help, as it always has.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

TEXT, INT, FLAG, CHOICE = "text", "int", "flag", "choice"
_UNSET = object()


class Opt:
    """One option: its names (`-J`, `--job-name`), the key its value goes under, and its kind.

    `default` is what a missing option reads as: None, a flag's False (a flag declared with default=None
    is left out of a job's fields unless given). `many`: repeatable, every value kept in order.
    """

    __slots__ = ("names", "key", "kind", "help", "choices", "metavar", "many", "default")

    def __init__(self, *names: str, key: str = "", kind: str = TEXT, help: str = "", choices: Sequence[str] = (),
                 metavar: str | None = None, many: bool = False, default: object = _UNSET) -> None:
        self.names = names
        self.key = key or next(name for name in names if name.startswith("--"))[2:].replace("-", "_")
        self.kind = kind
        self.help = help
        self.choices = tuple(choices)
        self.metavar = metavar
        self.many = many
        self.default = (False if kind == FLAG else None) if default is _UNSET else default


SERVER_OPTIONS = (
    Opt("--home", key="home", help="The server's state directory (as the global --home) [default: ~/.corral]."),
    Opt("--url", key="url", help="Talk to the server at this URL instead of the home's (as the global --url)."),
)
"""Every command takes its server's options after its name too (`corral down --home DIR`, as `corral up
--home DIR`): given there, they win over the global ones."""


class Command:
    """A command's declaration: its name, its help (the first line is what `corral --help` lists), its
    options (`SERVER_OPTIONS` added) and its operand (`required`: at least one; `many`: any number)."""

    __slots__ = ("name", "help", "options", "operand", "many", "required", "interspersed", "takes_command")

    def __init__(self, name: str, help: str, options: Sequence[Opt], operand: str | None = None, *,
                 many: bool = False, required: bool = True, interspersed: bool = True, takes_command: bool = False
                 ) -> None:
        self.name = name
        self.help = help
        self.options = (*options, *SERVER_OPTIONS)
        self.operand = operand
        self.many = many
        self.required = required
        self.interspersed = interspersed  # False: options end at the first operand (submit's SCRIPT ARGS...)
        self.takes_command = takes_command  # everything after the first `--` is a command to run, as given

    def usage(self) -> str:
        """click's usage line: `Usage: corral show [OPTIONS] JOB_ID`."""
        operand = ""
        if self.operand:
            metavar = self.operand.upper() + ("..." if self.many else "")
            operand = " " + (metavar if self.required else f"[{self.operand.upper()}]...")
        return f"Usage: corral {self.name} [OPTIONS]{operand}"


class UsageError(Exception):
    """A command line that cannot be read; printed as click prints it, exit status 2.

    `usage`: the usage line and click's hint come first (as click shows them for most mistakes).
    """

    def __init__(self, message: str, usage: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage


class HelpRequested(Exception):
    """`-h`/`--help`: click writes the help (corral.cli.main), from the same declarations."""


def parse(command: Command, argv: Sequence[str]) -> tuple[dict[str, object], list[str]]:
    """(each option's value by key, defaults filled in; the operands).

    Raises:
        HelpRequested: `-h` or `--help` among the options.
        UsageError: what click would refuse, in click's words.
    """
    longs: dict[str, Opt] = {}
    shorts: dict[str, Opt] = {}
    for declared in command.options:
        for name in declared.names:
            (longs if name.startswith("--") else shorts)[name] = declared
    seen: list[tuple[Opt, str, object]] = []  # (option, the name it was given as, its raw value)
    operands: list[str] = []
    wants_help = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            operands.extend(argv[i:])
            break
        if arg in ("-h", "--help"):
            wants_help = True
            continue
        if arg[:1] != "-" or len(arg) == 1:
            operands.append(arg)
            if not command.interspersed:
                operands.extend(argv[i:])
                break
            continue
        name, equals, explicit = arg.partition("=")
        if name == "--help":
            raise UsageError("Option '--help' does not take a value.", usage=False)
        option: Opt | None = longs.get(name)
        if option is None and arg[:2] == "--":
            raise UsageError(_no_such_option(name, [*longs, "--help"]))
        if option is not None:
            if option.kind == FLAG:
                if equals:
                    raise UsageError(f"Option '{name}' does not take a value.", usage=False)
                seen.append((option, name, True))
            elif equals:
                seen.append((option, name, explicit))
            elif i < len(argv):
                seen.append((option, name, argv[i]))
                i += 1
            else:
                raise UsageError(f"Option '{name}' requires an argument.", usage=False)
            continue
        j = 1
        while j < len(arg):  # short options, bundled: -Hc2
            short = "-" + arg[j]
            j += 1
            if short == "-h":
                wants_help = True
                continue
            found = shorts.get(short)
            if found is None:
                raise UsageError(f"No such option '{short}'.")
            if found.kind == FLAG:
                seen.append((found, short, True))
                continue
            if j < len(arg):
                seen.append((found, short, arg[j:]))
            elif i < len(argv):
                seen.append((found, short, argv[i]))
                i += 1
            else:
                raise UsageError(f"Option '{short}' requires an argument.", usage=False)
            break
    if wants_help:
        raise HelpRequested()
    if command.operand and command.required and not operands:
        raise UsageError(f"Missing argument '{command.operand.upper()}{'...' if command.many else ''}'.")
    values: dict[str, object] = {}
    for option, name, raw in seen:
        value = _converted(option, raw)
        if option.many:
            values.setdefault(option.key, [])
            values[option.key].append(value)  # type: ignore[attr-defined]
        else:
            values[option.key] = value
    for option in command.options:
        if option.key not in values:
            values[option.key] = [] if option.many else option.default
    limit = None if command.many or not command.interspersed else (1 if command.operand else 0)
    if limit is not None and len(operands) > limit:
        extra = operands[limit:]
        plural = "s" if len(extra) > 1 else ""
        raise UsageError(f"Got unexpected extra argument{plural} ({' '.join(extra)})")
    return values, operands


def _converted(option: Opt, raw: object) -> object:
    if option.kind == INT:
        try:
            return int(str(raw))
        except ValueError:
            raise UsageError(f"Invalid value for {_hint(option)}: {raw!r} is not a valid integer.") from None
    if option.kind == CHOICE and raw not in option.choices:
        choices = ", ".join(repr(choice) for choice in option.choices)
        raise UsageError(f"Invalid value for {_hint(option)}: {raw!r} is not one of {choices}.")
    return raw


def _hint(option: Opt) -> str:
    return " / ".join(repr(name) for name in option.names)


def _no_such_option(name: str, possibilities: list[str]) -> str:
    from difflib import get_close_matches  # only on the way to an error

    close = sorted(get_close_matches(name, possibilities))
    text = f"No such option '{name}'."
    if len(close) == 1:
        return f"{text} Did you mean {close[0]!r}?"
    if close:
        return f"{text} (Did you mean one of: {', '.join(repr(c) for c in close)}?)"
    return text
