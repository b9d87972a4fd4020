"""Job dependencies, as sbatch's --dependency writes them.

    afterok:12:13        after 12 and 13 completed successfully
    afternotok:12        after 12 failed (or timed out, was cancelled, ...)
    afterany:12          after 12 ended, however
    after:12             after 12 started (or ended without starting)
    singleton            after every earlier job of the same name and user has ended

Terms are joined with `,` (all must hold) or `?` (any may hold), not both.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from corral.core.jobspec.states import JobState
from corral.errors import InvalidRequest

KINDS = ("after", "afterok", "afternotok", "afterany", "singleton")
_TERM = re.compile(r"^(after|afterok|afternotok|afterany)((?::[0-9]+)+)$")


class Verdict(enum.Enum):
    SATISFIED = "satisfied"
    WAITING = "waiting"
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class Term:
    kind: str
    job_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Dependency:
    terms: tuple[Term, ...]
    any_of: bool = False
    """True for `?` (any term), False for `,` (all terms)."""
    text: str = field(default="", compare=False)
    """As it was written (parsed once, at submit or when read from the store: the spec carries both)."""

    @property
    def job_ids(self) -> tuple[int, ...]:
        return tuple(i for term in self.terms for i in term.job_ids)


def parse_dependency(text: str) -> Dependency:
    """Read `afterok:12:13,singleton` or `afterany:4?afternotok:5`.

    Raises:
        InvalidRequest: naming the part that is not a dependency and the forms that are.
    """
    text = str(text).strip()
    hint = "write e.g. afterok:12, afterany:12:13, after:12, afternotok:12 or singleton; join with , (all) or ? (any)"
    if not text:
        raise InvalidRequest("dependency", "is empty", hint)
    if "," in text and "?" in text:
        raise InvalidRequest("dependency", f"{text!r} mixes , and ?", "use one of them: , means all, ? means any")
    any_of = "?" in text
    terms = []
    for part in text.split("?" if any_of else ","):
        part = part.strip()
        if part == "singleton":
            terms.append(Term("singleton"))
            continue
        match = _TERM.match(part)
        if not match:
            raise InvalidRequest("dependency", f"cannot read {part!r}", hint)
        ids = tuple(int(i) for i in match.group(2).split(":")[1:])
        if any(i <= 0 or i >= 2**31 for i in ids):
            raise InvalidRequest("dependency", f"{part!r} names a job id out of range")
        terms.append(Term(match.group(1), ids))
    return Dependency(tuple(terms), any_of, text)


def evaluate(
    dependency: Dependency, state_of: Callable[[int], tuple[JobState, bool] | None], singleton_clear: bool
) -> Verdict:
    """Whether a job's dependency holds now, may hold later, or never will.

    Args:
        state_of: a job's state and whether it ever started; None for a job that does not exist.
        singleton_clear: no earlier job of the same name and user is still pending or running.
    """
    verdicts = []
    for term in dependency.terms:
        if term.kind == "singleton":
            verdicts.append(Verdict.SATISFIED if singleton_clear else Verdict.WAITING)
            continue
        per_job = [_term_verdict(term.kind, state_of(job_id)) for job_id in term.job_ids]
        verdicts.append(_combine(per_job, any_of=False))
    return _combine(verdicts, any_of=dependency.any_of)


def _term_verdict(kind: str, state: tuple[JobState, bool] | None) -> Verdict:
    if state is None:
        return Verdict.NEVER
    job_state, started = state
    ended = job_state.is_terminal()
    if kind == "after":
        return Verdict.SATISFIED if started or ended else Verdict.WAITING
    if kind == "afterany":
        return Verdict.SATISFIED if ended else Verdict.WAITING
    if kind == "afterok":
        if not ended:
            return Verdict.WAITING
        return Verdict.SATISFIED if job_state is JobState.COMPLETED else Verdict.NEVER
    # afternotok
    if not ended:
        return Verdict.WAITING
    return Verdict.NEVER if job_state is JobState.COMPLETED else Verdict.SATISFIED


def _combine(verdicts: list[Verdict], *, any_of: bool) -> Verdict:
    if any_of:
        if Verdict.SATISFIED in verdicts:
            return Verdict.SATISFIED
        return Verdict.NEVER if all(v is Verdict.NEVER for v in verdicts) else Verdict.WAITING
    if Verdict.NEVER in verdicts:
        return Verdict.NEVER
    return Verdict.SATISFIED if all(v is Verdict.SATISFIED for v in verdicts) else Verdict.WAITING


def render(dependency: Dependency, job_id: Callable[[int], str]) -> str:
    """The dependency as sbatch writes it, each job id as `job_id` names it (another scheduler's ids)."""
    terms = [term.kind if term.kind == "singleton" else ":".join([term.kind, *map(job_id, term.job_ids)])
             for term in dependency.terms]
    return ("?" if dependency.any_of else ",").join(terms)
