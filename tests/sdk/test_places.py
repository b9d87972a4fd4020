"""Where runs spool when the chosen directory cannot be written: a private place of the user's,
said once, and found again by `corral sync`; never a directory someone else controls."""

from __future__ import annotations

import logging
import os
import stat
import tempfile

import pytest

import corral
from corral.sdk.places import SpoolPlaces
from corral.sdk.sync import sync_spool

pytestmark = pytest.mark.usefixtures("sdk_env")
FAST = {"flush_interval_s": 0.05, "retry_interval_s": 0.1}


def unwritable(tmp_path, name: str) -> str:
    """A path no one can make, root included: its parent is a plain file."""
    blocker = tmp_path / f"{name}-is-a-file"
    blocker.write_text("")
    return str(blocker / name)


def test_an_unwritable_spool_falls_back_to_a_private_one_says_so_once_and_sync_finds_it(fake, monkeypatch, tmp_path,
                                                                                        caplog):
    caplog.set_level(logging.WARNING, logger="corral.sdk")
    monkeypatch.setenv("CORRAL_SPOOL_DIR", unwritable(tmp_path, "spool"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = corral.init(project="p", client=fake, **FAST)
    run.log({"loss": 0.0}, step=0)
    run.flush()
    fake.down = True
    for i in range(1, 4):
        run.log({"loss": float(i)}, step=i)
        run.flush()
    run.finish(timeout=10)  # the server is still down: the end is spooled too

    messages = [r.getMessage() for r in caplog.records]
    assert sum("cannot write the spool in" in m for m in messages) == 1, messages
    assert not [m for m in messages if "dropping data" in m or "lost" in m]
    fallback = SpoolPlaces.resolve().fallbacks[0]
    assert fallback.startswith(str(tmp_path / "cache" / "corral" / "spool"))
    assert stat.S_IMODE(os.stat(fallback).st_mode) == 0o700 and os.listdir(fallback) == [run.uid]

    fake.down = False
    (report,) = sync_spool(client=fake)
    assert (report.run_id, report.points, report.state, report.error) == (run.id, 3, "finished", None)
    assert fake.steps(run.id, "loss") == [0, 1, 2, 3]
    assert os.listdir(fallback) == []


@pytest.mark.parametrize("planted", ["another user's directory", "a symlink"])
def test_a_fallback_planted_by_someone_else_is_never_written_through(monkeypatch, tmp_path, planted):
    if planted == "another user's directory" and os.geteuid() != 0:
        pytest.skip("giving a directory to another uid needs root (CI runs as root)")
    monkeypatch.setenv("CORRAL_SPOOL_DIR", unwritable(tmp_path, "spool"))
    monkeypatch.setenv("XDG_CACHE_HOME", unwritable(tmp_path, "cache"))
    shared_tmp = tmp_path / "tmp"
    shared_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared_tmp))
    places = SpoolPlaces.resolve()
    trap = tmp_path / "trap"
    trap.mkdir()
    if planted == "a symlink":
        os.symlink(trap, places.fallbacks[1])
    else:
        os.mkdir(places.fallbacks[1])
        os.chmod(places.fallbacks[1], 0o777)
        os.chown(places.fallbacks[1], 4242, 4242)
        trap = places.fallbacks[1]
    with pytest.raises(OSError, match="not a private directory of yours"):
        places.create("a1b2c3d4e5f60718", {"uid": "a1b2c3d4e5f60718"})
    assert os.listdir(trap) == []
    assert places.existing() == [places.chosen]  # and sync reads nothing from it

