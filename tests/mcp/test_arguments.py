"""Bad arguments are answered with the field, what it allows, and what was given."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from corral.mcp.arguments import describe_errors, describe_schema, unknown_arguments
from corral.mcp.workload import EnvVar


class Args(BaseModel):
    command: list[str]
    gpus: Annotated[int, Field(ge=0, le=64)] = 1
    tail: Annotated[int, Field(ge=1, le=1000)] = 100
    stream: Literal["stdout", "stderr"] = "stdout"
    env: dict[str, str] | list[EnvVar] | None = None
    memory: int | str | None = None


SCHEMA = Args.model_json_schema()


def errors(**given: object) -> str:
    with pytest.raises(ValidationError) as caught:
        Args.model_validate(given)
    return describe_errors(caught.value, SCHEMA)


def test_each_bad_argument_is_named_with_what_it_allows():
    assert errors(command=["x"], gpus=-1) == "gpus: must be an integer from 0 to 64, got -1"
    assert errors(command=["x"], tail=10**9) == "tail: must be an integer from 1 to 1000, got 1000000000"
    assert errors(command=["x"], stream="both") == 'stream: must be one of "stdout", "stderr", got "both"'
    assert errors(gpus=2) == "command: is required (a list of strings)"
    assert errors(command="python train.py") == 'command: must be a list of strings, got "python train.py"'
    text = errors(command=["x"], env=[{"value": "v"}])
    assert text.startswith("env: must be an object of strings or a list of objects with name, value, got ")
    assert errors(command=["x"], memory=[16]) == "memory: must be an integer or a string, got [16]"


def test_several_bad_arguments_are_all_reported_and_long_values_are_cut():
    text = errors(command=["x" * 500], gpus=99, tail=0)
    assert text.startswith("gpus: must be an integer from 0 to 64, got 99; tail: must be an integer from 1 to 1000")
    assert len(errors(command=["x"], gpus="g" * 10_000)) < 200


def test_unknown_arguments_are_refused_by_name_listing_the_known_ones():
    assert unknown_arguments({"command": 1, "gpus": 1}, SCHEMA) is None
    assert unknown_arguments({"gpu_count": 2}, SCHEMA) == (
        "gpu_count: unknown argument (this tool takes: command, gpus, tail, stream, env, memory)")


def test_schemas_read_as_words():
    assert describe_schema({"type": "boolean"}, {}) == "true or false"
    assert describe_schema({"type": "number", "minimum": 0}, {}) == "a number of at least 0"
    assert describe_schema({"type": "string", "maxLength": 64}, {}) == "a string of at most 64 characters"
    assert describe_schema({"type": "array", "items": {"type": "string"}, "maxItems": 10}, {}) == (
        "a list of at most 10 strings")
