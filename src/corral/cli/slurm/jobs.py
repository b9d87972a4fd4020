"""The jobs Slurm's commands read: the queue and the history, a page at a time, and job ids as Slurm
writes them (`12`, `12_3`, `12_[1-3,7]`, with a step: `12.batch`, `12_3.0`)."""

from __future__ import annotations

from corral.cli.slurm.argv import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

    from corral.cli.wire import Server

PAGE = 10000
STEP_NAMES = ("batch", "extern", "interactive")


def active_jobs(service: Server) -> list[dict[str, Any]]:
    """Every pending and running job, in id order."""
    jobs: list[dict[str, Any]] = []
    after = 0
    while True:
        page = service.ask("GET", f"/api/v1/jobs?scope=active&limit={PAGE}&after={after}")
        jobs.extend(page["jobs"])
        if page.get("next_cursor") is None:
            return jobs
        after = page["next_cursor"]


def finished_jobs(service: Server, ended_after: float | None = None) -> Iterator[dict[str, Any]]:
    """Ended jobs, newest first: those that ended at or after `ended_after` (epoch seconds); without
    their timelines, which no Slurm command shows."""
    before = ""
    since = "" if ended_after is None else f"&ended_after={max(ended_after, 0):.3f}"
    while True:
        page = service.ask("GET", f"/api/v1/jobs?scope=finished&events=false&limit={PAGE}{since}{before}")
        yield from page["jobs"]
        if page.get("next_cursor") is None:
            return
        before = f"&before={page['next_cursor']}"


def expand_refs(operands: Sequence[str]) -> list[str]:
    """Job ids as the API names them: `12_[1-3,7]` is 12_1, 12_2, 12_3 and 12_7; `12,13` is two.

    Raises:
        UsageError: something that is not a job id.
    """
    refs: list[str] = []
    for operand in operands:
        for text in _split_top(operand):
            job, underscore, tasks = text.partition("_")
            if not job.isdigit() or (underscore and not tasks):
                raise UsageError(f"Invalid job id: {text}")
            if not underscore:
                refs.append(job)
            elif tasks.startswith("[") and tasks.endswith("]"):
                refs.extend(f"{job}_{task}" for task in task_ids(tasks[1:-1], text))
            elif tasks.isdigit():
                refs.append(f"{job}_{tasks}")
            else:
                raise UsageError(f"Invalid job id: {text}")
    return refs


def split_step(text: str) -> tuple[str, str | None]:
    """Slurm's `JOBID[.STEP]`: `12.batch` is ("12", "batch"), `12_3.0` ("12_3", "0"), `12` ("12", None).

    Raises:
        UsageError: a step that is neither a number nor batch, extern or interactive.
    """
    job, dot, step = text.partition(".")
    if dot and not (step.isdigit() or step in STEP_NAMES):
        raise UsageError(f"Bad step specified: {text}")
    return job, step if dot else None


def task_ids(ranges: str, text: str = "") -> list[int]:
    """`1-3,7` (a `%N` limit ignored) as [1, 2, 3, 7]."""
    out: list[int] = []
    for part in ranges.partition("%")[0].split(","):
        low, dash, high = part.partition("-")
        high, _, step = high.partition(":")
        if not low.isdigit() or (dash and not high.isdigit()) or (step and not step.isdigit()):
            raise UsageError(f"Invalid job id: {text or ranges}")
        out.extend(range(int(low), int(high if dash else low) + 1, int(step or 1) or 1))
    return out


def _split_top(text: str) -> list[str]:
    """`12,13_[1,2]` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part for part in parts if part]
