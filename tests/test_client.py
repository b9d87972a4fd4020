"""How a client finds its server: a URL a person chose is kept; the one corral gave a job yields to
the job's home, whose address file a restarted server rewrites (on any port)."""

from __future__ import annotations

import json

import pytest

from corral.client import Client, find_server

OLD = "http://127.0.0.1:40001"
NEW = "http://127.0.0.1:40002"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A job's environment: corral's CORRAL_URL and CORRAL_HOME_URL, and a home whose server moved to NEW."""
    path = tmp_path / "home"
    path.mkdir()
    (path / "server.json").write_text(json.dumps({"url": NEW, "socket": str(path / "corral.sock"), "pid": 1}))
    for name, value in (("CORRAL_HOME", str(path)), ("CORRAL_URL", OLD), ("CORRAL_HOME_URL", OLD)):
        monkeypatch.setenv(name, value)
    return path


def test_the_url_corral_gave_a_job_yields_to_its_homes_restarted_server(home):
    assert find_server() == NEW
    assert Client().url == NEW
    (home / "server.json").unlink()  # the restarted server has not announced itself yet
    assert find_server() == OLD


def test_a_url_the_user_chose_is_kept_inside_a_job(home, monkeypatch):
    monkeypatch.setenv("CORRAL_URL", "http://10.0.0.5:8765")  # exported by the job's own script
    assert find_server() == "http://10.0.0.5:8765"
    assert Client("http://10.0.0.6:9000").url == "http://10.0.0.6:9000"
    monkeypatch.delenv("CORRAL_HOME_URL")  # a CORRAL_URL outside a corral job is the user's too
    monkeypatch.setenv("CORRAL_URL", OLD)
    assert find_server() == OLD
