"""The errors corral raises, one hierarchy for the server, the CLI and the client.

    CorralError                  base of everything below
    ├── InvalidRequest           bad input: names the field and the fix (HTTP 422); `problems` lists
    │                            each of several at once (a batch script's directives)
    │   ├── Unsatisfiable        a valid request that no node could ever run (HTTP 422)
    │   └── OverLimit            a valid value past a limit the server sets (a partition's max_time; HTTP 422)
    ├── NotFound                 no such job (HTTP 404)
    ├── Conflict                 the request clashes with the job's state (HTTP 409)
    ├── Unauthenticated          the server cannot tell who is calling (HTTP 401)
    ├── Forbidden                the caller may not do this (HTTP 403)
    ├── RateLimited              too many requests; `retry_after` says when to try again (HTTP 429)
    └── ServerUnavailable        the client found no server to talk to (CLI only)

`corral.api.errors` turns these into HTTP responses and `error_from_answer` (below; the
client and the CLI call it) turns those responses back into the same types, so the CLI prints one message for
one mistake whether it was caught locally or by the server.
"""

from __future__ import annotations


class CorralError(Exception):
    """Base class; `message` is what a person reads."""

    status = 500
    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, object]:
        return {"code": self.code, "message": self.message}


class InvalidRequest(CorralError):
    """Input that cannot be accepted; `field` names it, `hint` says what would be.

    `problems`: when one input has several faults (a script's directives), each one as a line a
    person reads, with where it is and its fix; `message` then lists them all too.
    """

    status = 422
    code = "invalid"

    def __init__(self, field: str, message: str, hint: str | None = None, problems: tuple[str, ...] = ()) -> None:
        text = f"{field}: {message}" if field else message
        if hint:
            text = f"{text} ({hint})"
        super().__init__(text)
        self.field = field
        self.hint = hint
        self.problems = tuple(problems)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"code": self.code, "message": self.message, "field": self.field, "hint": self.hint}
        if self.problems:
            out["problems"] = list(self.problems)
        return out


def several_problems(field: str, what: str, problems: list[str]) -> InvalidRequest:
    """One error for every fault found in `field` (`what` says where they are), each on a line of its own."""
    if len(problems) == 1:
        return InvalidRequest(field, problems[0], problems=(problems[0],))
    listed = "".join(f"\n  {problem}" for problem in problems)
    return InvalidRequest(field, f"{len(problems)} problems in {what}, all listed here:{listed}", problems=tuple(problems))


class Unsatisfiable(InvalidRequest):
    """A well-formed request larger than any node: it would wait forever."""

    code = "unsatisfiable"


class OverLimit(InvalidRequest):
    """A well-formed value past a limit the server's configuration sets (a --time past its partition's max_time):
    the job would wait forever, so it is refused. Slurm's commands print Slurm's words for it."""

    code = "over_limit"


class NotFound(CorralError):
    status = 404
    code = "not_found"


class Conflict(CorralError):
    status = 409
    code = "conflict"


class Unauthenticated(CorralError):
    status = 401
    code = "unauthenticated"


class Forbidden(CorralError):
    status = 403
    code = "forbidden"


class RateLimited(CorralError):
    status = 429
    code = "rate_limited"

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServerUnavailable(CorralError):
    status = 503
    code = "unavailable"


ERROR_TYPES: dict[str, type[CorralError]] = {
    cls.code: cls for cls in (CorralError, InvalidRequest, Unsatisfiable, OverLimit, NotFound, Conflict, Unauthenticated, Forbidden,
                              RateLimited, ServerUnavailable)
}


def error_from_answer(status: int, data: bytes) -> CorralError:
    """The CorralError a server's refusal names (its `code`), with its message and, for InvalidRequest, its
    problems: how `corral.client` and the CLI turn an HTTP answer back into what the server raised."""
    from corral import lean_json  # the C scanner alone: the CLI's quick commands import this module

    try:
        body = lean_json.loads(data)["error"]
        code = body.get("code", "")
    except (ValueError, KeyError, TypeError, AttributeError):
        error = CorralError(f"the server answered HTTP {status}: {data[:200]!r}")
        error.status = status
        return error
    cls = ERROR_TYPES.get(code, CorralError)
    if issubclass(cls, InvalidRequest):
        problems = body.get("problems")
        error = cls(body.get("field") or "", "", None,
                    tuple(str(p) for p in problems) if isinstance(problems, list) else ())
    else:
        error = cls("")
    error.message = body.get("message", "")
    error.args = (error.message,)
    error.status = status
    return error
