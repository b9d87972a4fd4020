"""Default run names: what sets a run apart from its nearest neighbour, else an adjective-noun pair."""

from __future__ import annotations

import re

from corral.core.tracking.run_names import default_name, differing_keys


def test_the_first_run_of_a_project_gets_an_adjective_noun_and_its_number():
    name = default_name({"lr": 0.1}, [], seed="abc", number=1)
    assert re.fullmatch(r"[a-z]+-[a-z]+-1", name) and name == default_name({}, [], seed="abc", number=1)


def test_a_run_is_named_by_what_sets_it_apart_from_its_nearest_neighbour():
    others = [{"lr": 0.1, "bs": 64, "seed": 1}, {"lr": 0.3, "bs": 32, "seed": 2}]
    assert default_name({"lr": 0.0003, "bs": 64, "seed": 1}, others, seed="x", number=3) == "lr=0.0003"
    assert differing_keys({"lr": 0.3, "bs": 32, "seed": 3, "nested": {"a": 1}}, others) == ["seed"]


def test_at_most_three_keys_and_long_values_are_shortened():
    config = {f"k{i}": "v" * 40 for i in range(5)}
    name = default_name(config, [{}], seed="x", number=2)
    assert name.count("=") == 3 and name.startswith("k0=" + "v" * 23 + "…")


def test_a_repeat_of_a_run_has_nothing_apart():
    assert re.fullmatch(r"[a-z]+-[a-z]+-4", default_name({"lr": 0.1}, [{"lr": 0.1}, {"lr": 0.2}], seed="s", number=4))
