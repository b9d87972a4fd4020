"""A small ClassAd expression evaluator for HTCondor `requirements` on a node and its GPUs.

Pure: it parses the text itself (never `eval`) and evaluates against a mapping of attributes.
It reads the forms submit files use to choose machines: comparisons (`>=`, `>`, `<=`, `<`, `==`,
`!=`, `=?=`, `=!=`, `is`, `isnt`), `&&`, `||`, `!`, parentheses, `+ - * /` on numbers, numbers,
strings, `true`/`false`/`undefined`, and attributes with or without a `TARGET.` prefix. As in
ClassAds, `==` on strings ignores case, a comparison with an undefined value is undefined, and a
requirement holds only where it evaluates to true.

The attributes it knows are the machine's GPU properties under HTCondor's names (`CUDACapability`,
`CUDAGlobalMemoryMb`, `CUDADeviceName`; `GPUs_Capability`, ...; and `Capability`, `GlobalMemoryMb`,
`DeviceName` as `require_gpus` writes them), evaluated for one GPU at a time, and the node's
`OpSys`, `Arch`, `Memory`, `Cpus`. Anything else (other attributes, function calls, `MY.`) is
refused with the sub-expression named.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Union

from corral.errors import InvalidRequest

GPU_ATTRIBUTES: dict[str, str] = {
    "cudacapability": "capability", "gpus_capability": "capability", "capability": "capability",
    "cudaglobalmemorymb": "mem_mb", "gpus_globalmemorymb": "mem_mb", "globalmemorymb": "mem_mb",
    "cudadevicename": "name", "gpus_devicename": "name", "devicename": "name",
}
"""HTCondor's names for a GPU's properties -> the property."""
NODE_ATTRIBUTES: dict[str, str] = {"opsys": "opsys", "arch": "arch", "memory": "mem_mb", "cpus": "cpus"}
"""HTCondor's names for a machine's properties -> the property."""

_KNOWN = "CUDACapability, CUDAGlobalMemoryMb, CUDADeviceName, Capability, GlobalMemoryMb, DeviceName, OpSys, Arch, Memory, Cpus"


class _Undefined:
    def __repr__(self) -> str:
        return "UNDEFINED"


UNDEFINED: Any = _Undefined()
Value = Union[bool, int, float, str, _Undefined]


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any
    text: str


@dataclass(frozen=True, slots=True)
class Attribute:
    name: str
    """Lower-case, without its prefix."""
    text: str


@dataclass(frozen=True, slots=True)
class Unary:
    op: str
    operand: Expr
    text: str


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: Expr
    right: Expr
    text: str


Expr = Union[Literal, Attribute, Unary, Binary]

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?)
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    | (?P<op>=\?=|=!=|==|!=|>=|<=|&&|\|\||[<>!()+\-*/])
    | (?P<other>\S)
    )""",
    re.VERBOSE,
)
MAX_LENGTH = 4000
MAX_DEPTH = 32
MAX_TOKENS = 400
_COMPARISONS = ("==", "!=", ">=", "<=", ">", "<", "=?=", "=!=")


def parse(text: str, key: str = "requirements") -> Expr:
    """Parse a ClassAd expression; `key` names the submit command in errors.

    Raises:
        InvalidRequest: naming the sub-expression that corral cannot evaluate.
    """
    if len(text) > MAX_LENGTH:
        raise InvalidRequest(key, f"is {len(text)} characters; corral reads up to {MAX_LENGTH}", "shorten it")
    return _Parser(text, key).parse()


@lru_cache(maxsize=512)
def compiled(text: str) -> Expr:
    """The parsed expression, kept: the scheduler evaluates the same text for every GPU on every pass."""
    return parse(text)


def attributes(expr: Expr) -> set[str]:
    """The lower-case attribute names an expression refers to."""
    if isinstance(expr, Attribute):
        return {expr.name}
    if isinstance(expr, Unary):
        return attributes(expr.operand)
    if isinstance(expr, Binary):
        return attributes(expr.left) | attributes(expr.right)
    return set()


def uses_gpu(expr: Expr) -> bool:
    """Whether an expression refers to GPU properties (so it is evaluated once per GPU)."""
    return any(name in GPU_ATTRIBUTES for name in attributes(expr))


def conjuncts(expr: Expr) -> list[Expr]:
    """The parts of a top-level `a && b && c`, to name the one that nothing satisfies."""
    if isinstance(expr, Binary) and expr.op == "&&":
        return [*conjuncts(expr.left), *conjuncts(expr.right)]
    return [expr]


def holds(expr: Expr, machine: Mapping[str, Any]) -> bool:
    """Whether the expression evaluates to true for a machine's properties (see GPU/NODE_ATTRIBUTES)."""
    return evaluate(expr, machine) is True


def evaluate(expr: Expr, machine: Mapping[str, Any]) -> Value:
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, Attribute):
        prop = GPU_ATTRIBUTES.get(expr.name) or NODE_ATTRIBUTES[expr.name]
        value = machine.get(("gpu." if expr.name in GPU_ATTRIBUTES else "node.") + prop)
        return UNDEFINED if value is None else value
    if isinstance(expr, Unary):
        operand: Any = evaluate(expr.operand, machine)
        if expr.op == "!":
            return not operand if isinstance(operand, bool) else UNDEFINED
        return -operand if _is_number(operand) else UNDEFINED
    op = expr.op
    if op in ("&&", "||"):
        first = _truth(evaluate(expr.left, machine))
        if op == "&&" and first is False or op == "||" and first is True:
            return first
        second = _truth(evaluate(expr.right, machine))
        if op == "&&":
            return False if second is False else (UNDEFINED if UNDEFINED in (first, second) else True)
        return True if second is True else (UNDEFINED if UNDEFINED in (first, second) else False)
    left: Any = evaluate(expr.left, machine)
    right: Any = evaluate(expr.right, machine)
    a: Any
    b: Any
    if op == "=?=":
        return _identical(left, right)
    if op == "=!=":
        return not _identical(left, right)
    if left is UNDEFINED or right is UNDEFINED:
        return UNDEFINED
    if op in "+-*/":
        if not (_is_number(left) and _is_number(right)):
            return UNDEFINED
        if op == "+":
            return left + right
        if op == "-":
            return left - right
        if op == "*":
            return left * right
        return UNDEFINED if right == 0 else left / right
    if isinstance(left, str) and isinstance(right, str):
        a, b = left.lower(), right.lower()
    elif _is_number(left) and _is_number(right):
        a, b = left, right
    elif isinstance(left, bool) and isinstance(right, bool) and op in ("==", "!="):
        a, b = left, right
    else:
        return UNDEFINED  # ClassAds make this an error; either way the requirement does not hold
    return {"==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b}[op]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _truth(value: Value) -> Value:
    return value if isinstance(value, bool) else UNDEFINED


def _identical(left: Value, right: Value) -> bool:
    if left is UNDEFINED or right is UNDEFINED:
        return left is right
    if type(left) is bool or type(right) is bool:
        return type(left) is type(right) and left == right
    if isinstance(left, str) or isinstance(right, str):
        return isinstance(left, str) and isinstance(right, str) and left == right  # case-sensitive
    return bool(left == right)


class _Parser:
    def __init__(self, text: str, key: str) -> None:
        self.text = text
        self.key = key
        self.tokens: list[tuple[str, str, int, int]] = []
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                break
            kind = match.lastgroup or ""
            self.tokens.append((kind, match.group(kind), match.start(kind), match.end(kind)))
            pos = match.end()
        self.i = 0
        self.depth = 0

    def parse(self) -> Expr:
        if len(self.tokens) > MAX_TOKENS:  # a chain of operators is a tree as deep as it is long
            raise InvalidRequest(self.key, f"has {len(self.tokens)} terms and operators; corral reads up to {MAX_TOKENS}",
                                 "shorten it")
        if not self.tokens:
            raise InvalidRequest(self.key, "is empty", "write an expression, e.g. (CUDACapability >= 7.0)")
        expr = self._or()
        if self.i < len(self.tokens):
            raise self._refuse(self.text[self.tokens[self.i][2]:].strip(), "cannot read the expression from here")
        return expr

    def _refuse(self, part: str, why: str) -> InvalidRequest:
        return InvalidRequest(
            self.key, f"cannot evaluate {part!r}: {why}",
            f"corral evaluates comparisons, &&, ||, ! and parentheses over {_KNOWN}; remove the rest",
        )

    def _peek(self) -> tuple[str, str, int, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self, *ops: str) -> tuple[str, str, int, int] | None:
        token = self._peek()
        if token is not None and token[0] in ("op", "name") and token[1].lower() in ops:
            self.i += 1
            return token
        return None

    def _span(self, start: int) -> str:
        return self.text[start:self.tokens[self.i - 1][3]].strip()

    def _or(self) -> Expr:
        start = self._start()
        left = self._and()
        while self._take("||"):
            left = Binary("||", left, self._and(), self._span(start))
        return left

    def _and(self) -> Expr:
        start = self._start()
        left = self._comparison()
        while self._take("&&"):
            left = Binary("&&", left, self._comparison(), self._span(start))
        return left

    def _comparison(self) -> Expr:
        start = self._start()
        left = self._sum()
        token = self._take(*_COMPARISONS, "is", "isnt")
        if token is None:
            return left
        op = {"is": "=?=", "isnt": "=!="}.get(token[1].lower(), token[1])
        right = self._sum()
        if self._take(*_COMPARISONS, "is", "isnt"):
            raise self._refuse(self._span(start), "chained comparisons: put each one in parentheses")
        return Binary(op, left, right, self._span(start))

    def _sum(self) -> Expr:
        start = self._start()
        left = self._product()
        while (token := self._take("+", "-")) is not None:
            left = Binary(token[1], left, self._product(), self._span(start))
        return left

    def _product(self) -> Expr:
        start = self._start()
        left = self._unary()
        while (token := self._take("*", "/")) is not None:
            left = Binary(token[1], left, self._unary(), self._span(start))
        return left

    def _unary(self) -> Expr:
        start = self._start()
        token = self._take("!", "-", "+")
        if token is None:
            return self._primary()
        operand = self._nested(self._unary, start)
        if token[1] == "+":
            return operand
        return Unary(token[1], operand, self._span(start))

    def _nested(self, parse: Callable[[], Expr], start: int) -> Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self._refuse(self.text[start:start + 40].strip() + "...", f"nested more than {MAX_DEPTH} deep")
        try:
            return parse()
        finally:
            self.depth -= 1

    def _start(self) -> int:
        token = self._peek()
        return token[2] if token is not None else len(self.text)

    def _primary(self) -> Expr:
        token = self._peek()
        if token is None:
            raise self._refuse(self.text.strip(), "it ends where a value should follow")
        kind, text, start, _ = token
        self.i += 1
        if kind == "number":
            value = float(text) if any(c in text for c in ".eE") else int(text)
            return Literal(value, text)
        if kind == "string":
            return Literal(re.sub(r"\\(.)", r"\1", text[1:-1]), text)
        if kind == "op" and text == "(":
            inner = self._nested(self._or, start)
            if not self._take(")"):
                raise self._refuse(self.text[start:].strip(), "a parenthesis is never closed")
            return inner
        if kind == "name":
            following = self._peek()
            if following is not None and following[1] == "(":
                raise self._refuse(self._call_text(start), f"the function {text}() is not supported")
            lower = text.lower()
            if lower in ("true", "false"):
                return Literal(lower == "true", text)
            if lower in ("undefined", "error"):
                return Literal(UNDEFINED, text)
            prefix, _, bare = lower.rpartition(".")
            if prefix == "my":
                raise self._refuse(text, "MY. refers to the job's own attributes, which corral does not keep")
            if prefix not in ("", "target"):
                raise self._refuse(text, f"the scope {prefix.upper()}. is not supported; write TARGET. or nothing")
            if bare not in GPU_ATTRIBUTES and bare not in NODE_ATTRIBUTES:
                raise self._refuse(text, "corral does not know this machine attribute")
            return Attribute(bare, text)
        if kind == "other":
            raise self._refuse(self.text[start:].strip(), f"the character {text!r} is not part of the forms corral reads")
        raise self._refuse(self.text[start:].strip(), f"{text!r} cannot start a value")

    def _call_text(self, start: int) -> str:
        depth = 0
        for end in range(start, len(self.text)):
            if self.text[end] == "(":
                depth += 1
            elif self.text[end] == ")":
                depth -= 1
                if depth == 0:
                    return self.text[start:end + 1]
        return self.text[start:]
