"""Checking run request bodies and search terms."""

from __future__ import annotations

import pytest

from corral.core.tracking.run_requests import check_search_terms
from corral.errors import InvalidRequest


@pytest.mark.parametrize("project, tag, field", [("a\0b", None, "project"), (None, "\0", "tag"), ("ok", "x\ny", "tag")])
def test_a_search_term_with_a_nul_or_control_character_is_refused_naming_it(project, tag, field) -> None:
    # PostgreSQL refuses a NUL byte even as a query parameter: it must never reach the store
    with pytest.raises(InvalidRequest) as caught:
        check_search_terms(project, tag)
    assert caught.value.field == field


@pytest.mark.parametrize("project, tag", [(None, None), ("mnist", "lr-sweep"), ("", ""), ("x" * 5000, "naïve")])
def test_printable_search_terms_pass_even_if_no_run_could_match(project, tag) -> None:
    check_search_terms(project, tag)
