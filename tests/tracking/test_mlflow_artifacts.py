"""The files behind MLflow's artifact proxy: kept per run, replaced whole, bounded, and never outside the run."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest

from corral.errors import InvalidRequest, NotFound
from corral.tracking.mlflow_artifacts import FileEntry, RunArtifactFiles, TooLarge, artifact_target


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def test_a_file_is_stored_listed_and_replaced_whole(tmp_path):
    files = RunArtifactFiles(str(tmp_path))
    assert asyncio.run(files.put("run1", "model/weights.bin", chunks(b"ab", b"cd"))) == 4
    assert open(files.open("run1", "model/weights.bin"), "rb").read() == b"abcd"
    assert files.list("run1", "") == [FileEntry("model", True, None)]
    assert files.list("run1", "model") == [FileEntry("weights.bin", False, 4)]
    assert files.list("run1", "nothing/here") == [] and files.list("run2", "") == []
    asyncio.run(files.put("run1", "model/weights.bin", chunks(b"new")))
    assert open(files.open("run1", "model/weights.bin"), "rb").read() == b"new"
    assert sorted(os.listdir(tmp_path / "run1" / "model")) == ["weights.bin"]  # no temporary file left
    files.delete("run1", "model/weights.bin")
    with pytest.raises(NotFound):
        files.open("run1", "model/weights.bin")


def test_a_file_over_the_limit_is_refused_and_leaves_nothing(tmp_path):
    files = RunArtifactFiles(str(tmp_path), max_bytes=5)
    with pytest.raises(TooLarge):
        asyncio.run(files.put("run1", "big", chunks(b"abc", b"def")))
    assert os.listdir(tmp_path / "run1") == []


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\\b", "a\x00b",
                                  ".corral-upload-x"])
def test_paths_stay_inside_the_run(tmp_path, path):
    files = RunArtifactFiles(str(tmp_path))
    with pytest.raises(InvalidRequest):
        asyncio.run(files.put("run1", path, chunks(b"x")))


def test_a_link_planted_under_a_run_is_never_followed(tmp_path):
    (tmp_path / "run1").mkdir()
    os.symlink("/etc", tmp_path / "run1" / "etc")
    files = RunArtifactFiles(str(tmp_path))
    with pytest.raises(NotFound):
        files.open("run1", "etc/passwd")
    assert files.list("run1", "") == []


def test_only_a_runs_artifact_uri_is_a_target():
    assert artifact_target("3/abc123/artifacts/model/w.bin") == ("abc123", "model/w.bin")
    assert artifact_target("0/abc123/artifacts") == ("abc123", "")
    for bad in ("3/abc123", "3/abc123/other/x", "x/abc123/artifacts/y", "3/a.b/artifacts/y", "3/abc/artifacts/../y"):
        with pytest.raises(InvalidRequest):
            artifact_target(bad)
