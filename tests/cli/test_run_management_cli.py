"""`corral artifacts list/get` and `corral run rename/note/tag/archive/delete` against a live server,
in-process with click's CliRunner; and the readable names runs get without one."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

from corral.cli.main import cli
from tests.conftest import Server, module_server


@pytest.fixture(scope="module")
def live() -> Iterator[Server]:
    with module_server("sqlite") as server:
        yield server


def invoke(server: Server, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--home", server.home, *args], input=input)


def ok(server: Server, *args: str, input: str | None = None) -> str:
    result = invoke(server, *args, input=input)
    assert result.exit_code == 0, result.output
    return result.output


def test_artifacts_list_and_get_one_a_directory_or_all(live, tmp_path):
    client = live.client()
    run = client.create_run(project="cli-art")
    for name, data in (("model/a.bin", b"A" * 1000), ("model/sub/b.bin", b"B" * 10), ("report.txt", b"ok\n")):
        source = tmp_path / "src"
        source.write_bytes(data)
        client.upload_artifact(run["id"], str(source), name, type="model" if name.startswith("model") else "file")
    listing = ok(live, "artifacts", "list", str(run["id"]))
    assert re.search(r"model\s+1000B\s+store\s+[0-9a-f]{12}\s+model/a\.bin", listing)
    out = tmp_path / "out"
    ok(live, "artifacts", "get", str(run["id"]), "report.txt", "-o", str(out / "r.txt"))
    assert (out / "r.txt").read_bytes() == b"ok\n"
    # as cp -r: a new name becomes the directory's copy (the README's `-o ./model12`) ...
    ok(live, "artifacts", "get", str(run["id"]), "model", "-o", str(out / "m"))
    assert (out / "m" / "sub" / "b.bin").read_bytes() == b"B" * 10 and (out / "m" / "a.bin").stat().st_size == 1000
    assert sorted(os.listdir(out / "m")) == ["a.bin", "sub"]
    # ... an existing directory receives it under its own name, as `mlflow artifacts download -d` writes it
    (out / "dl").mkdir()
    ok(live, "artifacts", "get", str(run["id"]), "model/", "-o", str(out / "dl"))
    assert os.listdir(out / "dl") == ["model"] and (out / "dl" / "model" / "sub" / "b.bin").read_bytes() == b"B" * 10
    # one file into an existing directory keeps its name
    ok(live, "artifacts", "get", str(run["id"]), "model/a.bin", "-o", str(out / "dl"))
    assert (out / "dl" / "a.bin").stat().st_size == 1000
    ok(live, "artifacts", "get", str(run["id"]), "-o", str(out / "all"))
    assert sorted(os.listdir(out / "all")) == ["model", "report.txt"]
    missing = invoke(live, "artifacts", "get", str(run["id"]), "nope")
    assert missing.exit_code == 1 and "no artifact 'nope'" in missing.output


def test_rename_note_tag_archive_and_delete_after_a_confirmation(live, tmp_path):
    client = live.client()
    run = client.create_run(project="cli-manage", name="first")
    source = tmp_path / "w.bin"
    source.write_bytes(b"x" * 2048)
    client.upload_artifact(run["id"], str(source), "w.bin")
    ref = str(run["id"])
    assert "now named better name" in ok(live, "run", "rename", ref, "better name")
    ok(live, "run", "note", ref, "--file", "-", input="## Why\nlr was **too high**\n")
    ok(live, "run", "tag", ref, "best", "keep", "draft")
    assert "tags best,keep\n" in ok(live, "run", "tag", ref, "--remove", "draft")
    shown = ok(live, "run", "show", ref)
    assert "better name" in shown and "Notes:\n  ## Why\n  lr was **too high**" in shown and "best,keep" in shown
    ok(live, "run", "archive", ref)
    assert "better name" not in ok(live, "runs", "-p", "cli-manage")
    assert "better name" in ok(live, "runs", "-p", "cli-manage", "--archived")
    assert [r["id"] for r in client.runs(project="cli-manage")] == []
    assert [r["id"] for r in client.runs(project="cli-manage", archived=True)] == [run["id"]]
    ok(live, "run", "archive", "--undo", ref)
    assert [r["id"] for r in client.runs(project="cli-manage")] == [run["id"]]
    declined = invoke(live, "run", "delete", ref, input="n\n")
    assert declined.exit_code == 1 and "2.0K of artifacts" in declined.output
    assert client.get_run(run["id"])["name"] == "better name"
    assert "deleted (2.0K freed)" in ok(live, "run", "delete", ref, input="y\n")
    gone = invoke(live, "run", "show", ref)
    assert gone.exit_code == 1 and "no run" in gone.output


def test_runs_without_a_name_get_readable_ones(live):
    client = live.client()
    first = client.create_run(project="names", config={"lr": 0.001, "bs": 64, "seed": 1})
    assert re.fullmatch(r"[a-z]+-[a-z]+-1", first["name"]), first["name"]
    second = client.create_run(project="names", config={"lr": 0.0003, "bs": 64, "seed": 1})
    assert second["name"] == "lr=0.0003"
    third = client.create_run(project="names", config={"lr": 0.0003, "bs": 128, "seed": 2})
    assert third["name"] == "bs=128 seed=2"
    again = client.create_run(project="names", config={"lr": 0.0003, "bs": 128, "seed": 2, "opt": "adam"})
    assert again["name"] == "opt=adam"  # apart from the nearest run, not from all of them
    repeat = client.create_run(project="names", config={"lr": 0.0003, "bs": 64, "seed": 1})
    assert re.fullmatch(r"[a-z]+-[a-z]+-5", repeat["name"]), "the same config as a run before: nothing sets it apart"
    named = client.create_run(project="names", name="mine", config={"lr": 1.0})
    assert named["name"] == "mine"
