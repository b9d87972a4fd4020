"""MLflow's artifact proxy on corral's store: its paths never leave a run, and the files an older corral
kept apart are taken into the store once, none lost."""

from __future__ import annotations

import hashlib
import os

import pytest

from corral.errors import InvalidRequest
from corral.tracking.compat.mlflow_artifacts import artifact_target, import_legacy_files
from tests.tracking.test_artifact_service import blobs, pieces, run_scenario


def test_only_a_runs_artifact_uri_is_a_target():
    assert artifact_target("3/abc123/artifacts/model/w.bin") == ("abc123", "model/w.bin")
    assert artifact_target("0/abc123/artifacts") == ("abc123", "")
    for bad in ("3/abc123", "3/abc123/other/x", "x/abc123/artifacts/y", "3/a.b/artifacts/y", "3/abc/artifacts/../y"):
        with pytest.raises(InvalidRequest):
            artifact_target(bad)


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\\b", "a\x00b", "a/"])
def test_paths_stay_inside_the_run(path):
    with pytest.raises(InvalidRequest):
        artifact_target(f"3/abc123/artifacts/{path}")


def write(path, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def test_an_older_corrals_files_are_taken_in_once_and_none_is_lost(tmp_path):
    legacy = tmp_path / "mlflow"

    async def scenario(tracking, service) -> None:
        run, _ = await tracking.create_run({"project": "mlflow"})
        other, _ = await tracking.create_run({"project": "mlflow"})
        uid = run["uid"]
        write(legacy / uid / "notes.txt", b"hello")
        write(legacy / uid / "model" / "MLmodel", b"flavors")
        write(legacy / uid / "model" / "copy.txt", b"hello")
        write(legacy / uid / ".corral-upload-abc", b"half a fi")  # an upload cut short: nothing to keep
        os.symlink("/etc", legacy / uid / "etc")  # never followed
        write(legacy / other["uid"] / "model.pt", b"corral's own upload of that name differs")
        await service.put_stream(other["id"], "alice", "model.pt", pieces(b"uploaded through corral"))
        write(legacy / "0123456789abcdef0123456789abcdef" / "orphan.txt", b"a run that is gone")

        assert await import_legacy_files(str(legacy), service) == 3
        listed = {a["path"]: (a["size"], a["sha256"]) for a in await tracking.artifacts(uid, type_=None, deleted=False)}
        assert listed == {name: (len(data), hashlib.sha256(data).hexdigest()) for name, data in (
            ("notes.txt", b"hello"), ("model/MLmodel", b"flavors"), ("model/copy.txt", b"hello"))}
        found = await service.open(run["id"], "alice", "model/MLmodel")
        assert b"".join(found.chunks(None)) == b"flavors"
        assert len(blobs(tmp_path)) == 3  # "hello" twice is one blob; plus MLmodel and corral's model.pt
        # what was taken in is gone from there; what could not be stays, and nothing else was touched
        assert sorted(os.listdir(legacy)) == sorted([uid, other["uid"], "0123456789abcdef0123456789abcdef"])
        assert os.listdir(legacy / uid) == ["etc"] and os.path.isdir("/etc")
        assert open(legacy / other["uid"] / "model.pt", "rb").read() == b"corral's own upload of that name differs"
        found = await service.open(other["id"], "alice", "model.pt")
        assert b"".join(found.chunks(None)) == b"uploaded through corral"

        # a second start finds nothing more to do, and changes nothing
        assert await import_legacy_files(str(legacy), service) == 0
        again = {a["path"]: (a["size"], a["sha256"]) for a in await tracking.artifacts(uid, type_=None, deleted=False)}
        assert again == listed

        # an import cut short after the link, before the file went: the file goes, nothing is linked twice
        write(legacy / uid / "notes.txt", b"hello")
        assert await import_legacy_files(str(legacy), service) == 0
        assert not os.path.exists(legacy / uid / "notes.txt")
        assert len(await tracking.artifacts(uid, type_=None, deleted=False)) == 3

    run_scenario(tmp_path, scenario)


def test_nothing_to_take_in_without_an_older_corrals_directory(tmp_path):
    async def scenario(tracking, service) -> None:
        assert await import_legacy_files(str(tmp_path / "mlflow"), service) == 0

    run_scenario(tmp_path, scenario)
