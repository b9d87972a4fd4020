"""A run's artifacts and its management are its owner's (or an admin's), proven on a shared server
(root) with two real accounts, each calling with a token of their own."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from corral.client import Client
from corral.errors import Forbidden, NotFound
from tests.conftest import Server, _kill_leftover_supervisors

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a shared server runs as root; CI runs as root")


@pytest.fixture(scope="module")
def shared(os_users) -> Iterator[tuple[Server, Client, Client, Client]]:
    """A shared server; clients for root (an admin), alice and bob (each their own token)."""
    root_dir = tempfile.mkdtemp(prefix="corral-runperm-", dir="/tmp")
    os.chmod(root_dir, 0o711)
    server = Server(home=os.path.join(root_dir, "home")).start()
    admin = server.client()
    alice, bob = (Client(server.url, token=admin.create_token(user=user, expires="1h")["token"]) for user in os_users)
    yield server, admin, alice, bob
    server.stop()
    _kill_leftover_supervisors(root_dir)
    shutil.rmtree(root_dir, ignore_errors=True)


def test_only_the_owner_or_an_admin_reads_uploads_or_manages_a_run(shared, os_users, tmp_path):
    server, admin, alice, bob = shared
    run = alice.create_run(project="perm", name="alices")
    assert run["user"] == os_users[0]
    source = tmp_path / "weights.bin"
    source.write_bytes(os.urandom(10_000))
    alice.upload_artifact(run["id"], str(source), "weights.bin")
    out = io.BytesIO()
    alice.download_artifact(run["id"], "weights.bin", out)
    assert out.getvalue() == source.read_bytes()

    refusals = [
        lambda: bob.artifacts(run["id"]),
        lambda: bob.download_artifact(run["id"], "weights.bin", io.BytesIO()),
        lambda: bob.upload_artifact(run["id"], str(source), "mine.bin"),
        lambda: bob.change_run(run["id"], name="bobs now"),
        lambda: bob.change_run(run["id"], notes="# pwned"),
        lambda: bob.change_run(run["id"], archived=True),
        lambda: bob.tag_run(run["id"], add=["x"]),
        lambda: bob.delete_run(run["id"]),
    ]
    for refused in refusals:
        with pytest.raises(Forbidden):
            refused()
    unchanged = admin.get_run(run["id"])
    assert (unchanged["name"], unchanged["notes"], unchanged["archived"], unchanged["tags"]) == ("alices", None, False, [])

    # bob knowing the content's hash links nothing: his own run must send the bytes
    his = bob.create_run(project="perm")
    sent: list[int] = []
    bob.upload_artifact(his["id"], str(source), "copy.bin", chunk_bytes=4096, on_chunk=sent.append)
    assert sent, "another owner's content is not linked for the asking"

    # the owner and an admin may
    assert alice.change_run(run["id"], name="renamed", notes="**why**")["name"] == "renamed"
    assert admin.change_run(run["id"], archived=True)["archived"] is True
    assert len(admin.artifacts(run["id"])) == 1
    admin.delete_run(run["id"])


def test_a_checkpoint_is_served_only_as_its_owners_file(shared, os_users, tmp_path):
    server, admin, alice, bob = shared
    alice_user, bob_user = os_users
    run = alice.create_run(project="perm")
    mine = tmp_path / "ckpt-alice.pt"
    mine.write_bytes(b"alice's weights")
    shutil.chown(mine, alice_user)
    theirs = tmp_path / "ckpt-bob.pt"
    theirs.write_bytes(b"bob's weights")
    shutil.chown(theirs, bob_user)
    alice.log_artifacts(run["id"], [{"path": str(mine), "type": "checkpoint"},
                                    {"path": str(theirs), "type": "checkpoint"},
                                    {"path": "/etc/shadow", "type": "checkpoint"}])
    out = io.BytesIO()
    alice.download_artifact(run["id"], str(mine), out)
    assert out.getvalue() == b"alice's weights"
    for path in (str(theirs), "/etc/shadow"):  # registered by alice, but not hers: never read for her
        with pytest.raises(NotFound, match="cannot be served"):
            alice.download_artifact(run["id"], path, io.BytesIO())
    with pytest.raises(Forbidden):  # nor for bob, who may not read alice's run at all
        bob.download_artifact(run["id"], str(mine), io.BytesIO())
