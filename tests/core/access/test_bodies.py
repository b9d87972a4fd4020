"""Hostile request bodies are refused before any model sees them, naming the path at fault."""

from __future__ import annotations

import json

import pytest

from corral.core.access.bodies import MAX_DEPTH, check_text, decode_json
from corral.errors import InvalidRequest


def refused(raw: bytes | str) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        decode_json(raw)
    return caught.value


def nested(depth: int, key: str = "a") -> dict:
    value: dict = {key: 1}
    for _ in range(depth - 1):
        value = {key: value}
    return value


def test_200000_open_brackets_are_refused_without_reaching_the_parsers_recursion():
    error = refused(b"[" * 200_000)
    assert error.field == "body" and f"more than {MAX_DEPTH} levels" in error.message


def test_a_run_config_nested_900_deep_is_refused_naming_where_it_got_too_deep():
    error = refused(json.dumps({"project": "p", "config": nested(900)}))
    assert error.field == "config"
    assert "config.a.a.a" in error.message


def test_brackets_inside_strings_do_not_count_and_64_levels_pass():
    assert decode_json(json.dumps({"text": "[" * 10_000 + '\\"{' * 100}))["text"].startswith("[[[")
    assert decode_json(json.dumps({"config": nested(MAX_DEPTH - 1)}))["config"]["a"]["a"]
    assert refused(json.dumps({"config": nested(MAX_DEPTH)})).field == "config"


def test_the_path_names_list_indexes_and_object_keys():
    body = json.dumps({"points": [[1], [2], {"deep": [[[[[[[[[[]]]]]]]]]]}]})
    error = refused(body.replace("[[[[[[[[[[]]]]]]]]]]", "[" * 100 + "]" * 100))
    assert error.field == "points" and "points[2].deep[0]" in error.message


@pytest.mark.parametrize("body, field", [
    ({"name": "a\ud800"}, "name"),
    ({"command": ["sh", "x\udfff"]}, "command[1]"),
    ({"labels": {"team": "\ud83d"}}, "labels.team"),
    ({"env": {"A": "a\x00b"}}, "env.A"),
    ({"labels": {"\ud800": "x"}}, "labels"),
])
def test_lone_surrogates_and_nul_are_refused_naming_the_field(body, field):
    error = refused(json.dumps(body))
    assert error.field == field and ("surrogate" in error.message or "NUL" in error.message)


def test_a_surrogates_raw_utf8_bytes_are_refused_too():
    assert refused(b'{"name": "\xed\xa0\x80"}').field == "name"


def test_integers_longer_than_18_digits_are_refused_naming_the_field():
    assert decode_json(json.dumps({"a": 10**17, "b": -(10**17), "c": 1.5e300})) == {"a": 10**17, "b": -(10**17), "c": 1.5e300}
    error = refused(json.dumps({"cpus": 10**40}))
    assert error.field == "cpus" and "41 digits" in error.message
    assert refused(b'{"x": [1, 1' + b"9" * 5000 + b"]}").field == "x[1]"


def test_valid_unicode_passes_untouched():
    body = {"name": "日本語 😀 café", "labels": {"k": "ü"}}
    assert decode_json(json.dumps(body)) == body
    assert decode_json(json.dumps(body, ensure_ascii=False).encode()) == body


def test_invalid_json_is_named_as_the_body():
    assert refused(b'{"a": ').field == "body"
    assert refused(b"]]]" * 40).field == "body"


@pytest.mark.parametrize("text", ["a\x1b[2Jb", "a\nb", "a\x7f", "a\x9bb", "evil\u202egnp.sh", "x\u2066y", "a\ud800"])
def test_names_must_be_printable(text):
    with pytest.raises(InvalidRequest) as caught:
        check_text(text, "name")
    assert caught.value.field == "name" and "U+" in caught.value.message


def test_printable_names_pass():
    assert check_text("train résnet-50 (日本)", "name") == "train résnet-50 (日本)"


def test_a_submitters_environment_may_carry_bytes_that_are_not_utf8_and_nothing_else_may():
    body = json.dumps({"environment": {"X": "caf\udce9"}, "env": {"Y": "\udcff"}, "name": "n"})
    assert decode_json(body, bytes_in={"environment", "env"})["environment"]["X"] == "caf\udce9"
    assert refused(body).field == "env.Y"  # elsewhere it is a lone surrogate
    assert refused(json.dumps({"environment": {"X": "\ud800"}})).field == "environment.X"
    with pytest.raises(InvalidRequest) as caught:
        decode_json(json.dumps({"environment": {"X": "a\ud800"}}), bytes_in={"environment"})
    assert caught.value.field == "environment.X"
    with pytest.raises(InvalidRequest):
        decode_json(json.dumps({"name": "caf\udce9"}), bytes_in={"environment"})


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_a_body_in_another_encoding_than_utf8_is_refused_not_read_past_the_checks(encoding):
    body = '{"command": ["true"], "name": "\\ud800x\\u0000"}'.encode(encoding, "surrogatepass")
    with pytest.raises(InvalidRequest) as refused:
        decode_json(body)
    assert refused.value.field == "body"
