"""sbatch-style dependencies: parsing and when they hold."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.jobspec.dependency import Dependency, Term, Verdict, evaluate, parse_dependency
from corral.core.dialects.sbatch import parse_script
from corral.core.jobspec.states import JobState
from corral.errors import InvalidRequest


def test_parse_terms_ids_and_joins():
    assert parse_dependency("afterok:12:13,singleton") == Dependency((Term("afterok", (12, 13)), Term("singleton")))
    assert parse_dependency("afterany:4?afternotok:5").any_of is True
    assert parse_dependency("after:7").job_ids == (7,)


@pytest.mark.parametrize("text", ["", "afterok", "afterok:", "afterok:x", "before:3", "afterok:1,afterany:2?after:3",
                                  "afterok:99999999999"])
def test_bad_dependencies_are_refused_with_the_forms_that_work(text):
    with pytest.raises(InvalidRequest) as err:
        parse_dependency(text)
    assert err.value.field == "dependency"


def test_a_scripts_dependency_directive_is_read():
    assert parse_script("#!/bin/sh\n#SBATCH --dependency=afterok:3\n#SBATCH --kill-on-invalid-dep=yes\ntrue\n").fields == {
        "dependency": "afterok:3", "kill_on_invalid_dep": "yes"}


STATES = {
    1: (JobState.COMPLETED, True), 2: (JobState.FAILED, True), 3: (JobState.RUNNING, True),
    4: (JobState.PENDING, False), 5: (JobState.CANCELLED, False),
}


def verdict(text: str, singleton_clear: bool = True) -> Verdict:
    return evaluate(parse_dependency(text), STATES.get, singleton_clear)


@pytest.mark.parametrize("text, expected", [
    ("afterok:1", Verdict.SATISFIED), ("afterok:2", Verdict.NEVER), ("afterok:3", Verdict.WAITING),
    ("afternotok:2", Verdict.SATISFIED), ("afternotok:1", Verdict.NEVER), ("afternotok:4", Verdict.WAITING),
    ("afterany:2", Verdict.SATISFIED), ("afterany:5", Verdict.SATISFIED), ("afterany:3", Verdict.WAITING),
    ("after:3", Verdict.SATISFIED), ("after:4", Verdict.WAITING), ("after:5", Verdict.SATISFIED),
    ("afterok:1:3", Verdict.WAITING), ("afterok:1,afterany:2", Verdict.SATISFIED),
    ("afterok:2,afterany:3", Verdict.NEVER), ("afterok:2?afterany:3", Verdict.WAITING),
    ("afterok:2?afterok:1", Verdict.SATISFIED), ("afterok:2?afternotok:1", Verdict.NEVER),
    ("afterok:42", Verdict.NEVER),
])
def test_when_a_dependency_holds(text, expected):
    assert verdict(text) is expected


def test_singleton_waits_for_the_earlier_job_of_the_same_name():
    assert verdict("singleton", singleton_clear=False) is Verdict.WAITING
    assert verdict("singleton", singleton_clear=True) is Verdict.SATISFIED


_state = st.sampled_from([JobState.PENDING, JobState.RUNNING, JobState.COMPLETED, JobState.FAILED,
                          JobState.CANCELLED, JobState.TIMEOUT])


@settings(max_examples=300)
@given(
    terms=st.lists(st.tuples(st.sampled_from(["after", "afterok", "afternotok", "afterany"]),
                             st.lists(st.integers(1, 6), min_size=1, max_size=3)), min_size=1, max_size=3),
    any_of=st.booleans(),
    states=st.dictionaries(st.integers(1, 6), st.tuples(_state, st.booleans()), min_size=6, max_size=6),
)
def test_a_satisfied_dependency_never_violates_a_term(terms, any_of, states):
    states = {i: (s, started or s is JobState.RUNNING) for i, (s, started) in states.items()}
    dependency = Dependency(tuple(Term(kind, tuple(ids)) for kind, ids in terms), any_of)
    holds = {
        "afterok": lambda s: s[0] is JobState.COMPLETED,
        "afternotok": lambda s: s[0].is_terminal() and s[0] is not JobState.COMPLETED,
        "afterany": lambda s: s[0].is_terminal(),
        "after": lambda s: s[1] or s[0].is_terminal(),
    }
    term_holds = [all(holds[t.kind](states[i]) for i in t.job_ids) for t in dependency.terms]
    verdict = evaluate(dependency, states.get, True)
    if verdict is Verdict.SATISFIED:
        assert any(term_holds) if any_of else all(term_holds)
    else:
        assert not (any(term_holds) if any_of else all(term_holds))
