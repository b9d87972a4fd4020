"""Directories checked as their user: real accounts, the real kernel, and no other thread touched."""

from __future__ import annotations

import grp
import os
import pwd
import threading

import pytest

from corral.executor.directory_access import DirectoryAccess, can_enter
from tests.users import EXTRA_GROUP

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="checking as another user needs root; CI runs as root")


@pytest.fixture
def places(os_users, shared_dir):
    """bob's private directory (0700) with a project inside; a directory only corral-extra (alice) may enter."""
    alice, bob = os_users
    bob_entry = pwd.getpwnam(bob)
    private = os.path.join(shared_dir, "bob-private")
    os.makedirs(os.path.join(private, "project"))
    os.chown(private, bob_entry.pw_uid, bob_entry.pw_gid)
    os.chmod(private, 0o700)
    extra = os.path.join(shared_dir, "extra-only")
    os.mkdir(extra, 0o750)
    os.chown(extra, 0, grp.getgrnam(EXTRA_GROUP).gr_gid)
    plain_file = os.path.join(shared_dir, "file")
    open(plain_file, "w").close()
    return {"private": private, "project": os.path.join(private, "project"), "missing": os.path.join(private, "nope"),
            "extra": extra, "file": plain_file, "shared": shared_dir}


def test_a_user_enters_only_the_directories_they_could_cd_into(os_users, places):
    alice, bob = os_users
    access = DirectoryAccess()
    try:
        as_alice, as_bob = access.checker(alice), access.checker(bob)
        assert as_bob(places["private"]) and as_bob(places["project"]) and not as_bob(places["missing"])
        # inside bob's 0700 directory, alice cannot tell a project from nothing
        assert not as_alice(places["project"]) and not as_alice(places["missing"]) and not as_alice(places["private"])
        # a supplementary group counts (alice is in corral-extra, bob is not)
        assert as_alice(places["extra"]) and not as_bob(places["extra"])
        assert as_alice(places["shared"]) and not as_alice(places["file"]) and not as_alice("/no/such/dir")
        assert access.checker("root") is can_enter and can_enter(places["project"])  # root's own: root's rights
    finally:
        access.close()


def _fs_uids() -> dict[int, int]:
    """Each thread of this process: its filesystem uid (the fourth of /proc's Uid: line)."""
    found = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                line = next(line for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue  # a thread that just ended
        found[int(tid)] = int(line.split()[4])
    return found


def test_checking_as_a_user_changes_no_other_threads_credentials(os_users, places):
    alice, _ = os_users
    access = DirectoryAccess()
    try:
        check = access.checker(alice)
        checker_tid = access._thread.submit(threading.get_native_id).result()
        seen_by_root, foreign = [], []
        stop = threading.Event()

        def root_work() -> None:
            while not stop.is_set():
                seen_by_root.append(can_enter(places["project"]))  # root's own rights all along
                foreign.extend(uid for tid, uid in _fs_uids().items() if tid != checker_tid and uid != 0)

        other = threading.Thread(target=root_work)
        other.start()
        answers = [check(places["project"]) for _ in range(2000)]
        stop.set()
        other.join()
        assert not any(answers)
        assert seen_by_root and all(seen_by_root) and foreign == []
        assert set(_fs_uids().values()) == {0}  # the checking thread is root's again too
        assert sorted(access._thread.submit(os.getgroups).result()) == sorted(os.getgroups())
    finally:
        access.close()


def test_a_directory_that_hangs_is_answered_no_in_bounded_time_and_later_checks_still_work(os_users, places,
                                                                                           monkeypatch):
    alice, _ = os_users
    access = DirectoryAccess()
    hang, checks = threading.Event(), []
    real = access._as_owner

    def as_owner(path, owner):  # what a stat on a dead NFS mount does: never return
        checks.append(path)
        if path == "/hangs":
            hang.wait(30)
        return real(path, owner)

    monkeypatch.setattr(access, "_as_owner", as_owner)
    try:
        check = access.checker(alice)
        assert check("/hangs") is False
        assert check("/tmp") is True  # on a fresh thread: the hung one blocks nobody
        assert checks == ["/hangs", "/tmp"]
    finally:
        hang.set()
        access.close()
