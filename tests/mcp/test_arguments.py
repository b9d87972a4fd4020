"""Bad arguments are answered with the field, what it allows, and what was given; before any request."""

from __future__ import annotations

import functools
import tempfile
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
import pytest
from mcp import Client as MCPClient
from pydantic import BaseModel, Field, ValidationError

from corral.errors import InvalidRequest
from corral.mcp.arguments import describe_errors, describe_schema, unknown_arguments
from corral.mcp.inputs import given_id, job_ref, log_file_place
from corral.mcp.server import build_server
from corral.mcp.workload import EnvVar

if TYPE_CHECKING:
    from corral.client import Client


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


def refusals(*calls: tuple[str, dict[str, Any]]) -> list[str]:
    """The error text of each tool call, made in-process to a server with no corral server behind it
    (arguments are checked before any request, so none is needed)."""

    def connect(token: str | None, timeout: float | None = None) -> Client:
        raise AssertionError("a refused call must not reach the corral server")

    async def session() -> list[str]:
        async with MCPClient(build_server(connect, cwd=tempfile.gettempdir())) as agent:
            texts = []
            for tool, arguments in calls:
                result = await agent.call_tool(tool, arguments)
                assert result.is_error, (tool, arguments, result.structured_content)
                texts.append(result.content[0].text)
            return texts

    return anyio.run(session)


def test_types_are_strict_a_bool_is_not_a_job_and_text_is_not_a_number():
    assert refusals(
        ("view_gpu_job", {"job_id": True}),
        ("create_gpu_job", {"command": "true", "env": {"A": True}}),
        ("workload_submit", {"command": ["true"], "preemptible": "yes"}),
        ("create_gpu_job", {"command": "true", "gpus": "2"}),
        ("workload_submit", {"command": ["true"], "gpus": 1.0}),
        ("alert_create", {"name": "a", "condition": "state == FAILED", "workloadId": False}),
        ("workload_logs", {"workloadId": "1", "since": 2**53 + 1}),
    ) == [
        "job_id: must be an integer or a string, got true",
        "env: must be an object of strings or integers or numbers, got true",
        'preemptible: must be true or false, got "yes"',
        'gpus: must be an integer from 0 to 1024, got "2"',
        "gpus: must be an integer from 0 to 1024, got 1.0",
        "workloadId: must be an integer or a string, got false",
        f"since: must be an integer from 0 to {2**53}, got {2**53 + 1}",
    ]


def test_a_job_id_that_is_not_one_is_answered_with_what_to_give():
    expected = "give a job number like 12, or 12_3 for task 3 of array 12, got "
    assert refusals(
        ("view_gpu_job", {"job_id": "12; rm -rf /"}),
        ("stop_gpu_job", {"job_id": "9" * 40}),
        ("diagnose_job", {"job_id": 0}),
        ("workload_get", {"workloadId": "12_x"}),
        ("metrics_query", {"metric": "loss", "workloadId": 2**31}),
    ) == [
        f'job_id: {expected}"12; rm -rf /"', f'job_id: {expected}"{"9" * 39}…', f"job_id: {expected}0",
        f'workloadId: {expected}"12_x"', f"workloadId: {expected}{2**31}",
    ]
    assert job_ref(12, "job_id") == "12" and job_ref("3012_1", "job_id") == "3012_1"
    assert given_id("12") == 12 and given_id("3012_1") == "3012_1"


def test_a_log_file_must_stay_in_the_working_directory_or_corral_home(tmp_path):
    work, home, elsewhere = tmp_path / "work", tmp_path / "home", tmp_path / "elsewhere"
    for directory in (work, home, elsewhere):
        directory.mkdir()
    (work / "out").symlink_to(elsewhere)  # a directory inside that leads outside
    place = functools.partial(log_file_place, workdir=str(work), home=str(home), name="train", user="ada")
    assert place("train-%j.log") == str(work / "train-1.log")  # relative: in the working directory
    assert place("logs/../%x.log") == str(work / "train.log")
    assert place(str(home / "logs" / "%j.out")) == str(home / "logs" / "1.out")
    for outside in ("../escape.log", str(elsewhere / "x.log"), "out/x.log", str(work), str(tmp_path / "work2/x")):
        with pytest.raises(InvalidRequest) as refused:
            place(outside)
        assert refused.value.field == "log_file" and "use a path under the working directory" in refused.value.message
    with pytest.raises(InvalidRequest):
        log_file_place("%x", workdir=str(work), home=None, name="..", user="ada")  # a name cannot climb out
