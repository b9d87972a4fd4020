"""A job's client follows its home's address file to a restarted server only where the file can be the
server's alone (root's or the job's own user's, in a home nobody else may write, not a link) and names the
same host: another account's file never gets the job's token. Real accounts (tests/users.py) play the job's
owner and the hostile user; a listener stands where the planted file points."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import threading

import pytest

import corral

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="real accounts need root; CI runs as root")

TOKEN = "corral-job-token-under-test"
PROBE = "from corral.client import Client; print(Client().url)"


class Listener:
    """A TCP listener on 127.0.0.1 that keeps whatever a connection sends."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.received = b""
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.received += conn.recv(65536)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener():
    found = Listener()
    yield found
    found.close()


@pytest.fixture
def lib(shared_dir) -> str:
    """A copy of the package the accounts can read (the checkout may lie under a private home)."""
    path = os.path.join(shared_dir, "lib")
    shutil.copytree(os.path.dirname(corral.__file__), os.path.join(path, "corral"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return path


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def home_with(path: str, url: str, owner: str | None = None, home_mode: int = 0o711) -> str:
    """A home holding an address file that names `url`, made as root, then given to `owner`."""
    os.makedirs(path)
    with open(os.path.join(path, "server.json"), "w") as f:
        json.dump({"url": url, "socket": os.path.join(path, "corral.sock"), "pid": 1}, f)
    if owner is not None:
        entry = pwd.getpwnam(owner)
        for target in (path, os.path.join(path, "server.json")):
            os.chown(target, entry.pw_uid, entry.pw_gid)
    os.chmod(path, home_mode)
    return path


def job_client_url(user: str, lib: str, home: str, given: str) -> str:
    """The URL a job's client of `user`'s picks, given CORRAL_URL = CORRAL_HOME_URL = `given` and a token."""
    env = {"PYTHONPATH": lib, "CORRAL_HOME": home, "CORRAL_URL": given, "CORRAL_HOME_URL": given,
           "CORRAL_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
                           "/usr/bin/python3", "-c", PROBE + "\ntry:\n    Client().whoami()\nexcept Exception:\n    pass"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_servers_own_address_file_is_followed_to_its_new_port(os_users, shared_dir, lib):
    alice, _ = os_users
    given, moved = dead_url(), dead_url()
    home = home_with(os.path.join(shared_dir, "root-home"), moved)  # root's, as a shared server's
    assert job_client_url(alice, lib, home, given) == moved


def test_another_users_address_file_is_not_followed_and_gets_no_token(os_users, shared_dir, lib, listener):
    alice, bob = os_users
    given = dead_url()
    planted = f"http://127.0.0.1:{listener.port}"
    # bob made the home where alice's job looks (on a compute node where the server's home is missing, say)
    bobs = home_with(os.path.join(shared_dir, "bobs-home"), planted, owner=bob, home_mode=0o755)
    assert job_client_url(alice, lib, bobs, given) == given
    # a home root made, but that anybody may write: whoever wrote the file in it is not known
    open_to_all = home_with(os.path.join(shared_dir, "open-home"), planted, home_mode=0o777)
    assert job_client_url(alice, lib, open_to_all, given) == given
    # the file a link to bob's, in a home of root's
    linked = os.path.join(shared_dir, "linked-home")
    os.makedirs(linked, mode=0o711)
    os.symlink(os.path.join(bobs, "server.json"), os.path.join(linked, "server.json"))
    assert job_client_url(alice, lib, linked, given) == given
    # root's own file naming another host: the token stays with the host it came from
    elsewhere = home_with(os.path.join(shared_dir, "elsewhere"), planted.replace("127.0.0.1", "localhost"))
    assert job_client_url(alice, lib, elsewhere, given) == given
    assert TOKEN.encode() not in listener.received and listener.received == b""
