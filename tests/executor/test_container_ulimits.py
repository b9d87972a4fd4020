"""Root Podman's ulimits as corral works them out: what Podman would set (from containers.conf, or its own
defaults), and the `--ulimit` values that keep them within the hard limits. The containers this starts, on a
server that may not raise its limits, are tests/server/test_container_ulimits.py's."""

from __future__ import annotations

import os
import sys

from corral.executor.containers.ulimits import (
    PODMAN_DEFAULT,
    UNLIMITED,
    can_raise_hard_limits,
    clamped,
    containers_conf,
    podman_ulimits,
)

DEFAULT = (PODMAN_DEFAULT, PODMAN_DEFAULT)


def test_podmans_own_defaults_are_nofile_at_1048576_and_nproc_at_pid_max_where_it_may_take_that():
    assert podman_ulimits({}, pid_max=32768, nproc_hard=96363) == {"nofile": DEFAULT, "nproc": (32768, 32768)}
    assert podman_ulimits({}, pid_max=4194304, nproc_hard=UNLIMITED) == {"nofile": DEFAULT,
                                                                          "nproc": (4194304, 4194304)}
    # neither pid_max nor 1048576 is within its hard limit: containers.conf's built-in list is empty, and Podman
    # then sets no limit at all (the container inherits)
    assert podman_ulimits({}, pid_max=4194304, nproc_hard=96363) == {}


def test_containers_confs_list_is_what_podman_sets_with_nofile_and_nproc_at_1048576_where_it_names_neither():
    conf = {"containers": {"default_ulimits": ["memlock=-1:-1", "nofile=65536", "stack=8388608:16777216"]}}
    assert podman_ulimits(conf, pid_max=32768, nproc_hard=96363) == {
        "memlock": (UNLIMITED, UNLIMITED), "nofile": (65536, 65536), "stack": (8388608, 16777216), "nproc": DEFAULT}
    assert podman_ulimits({"containers": {"default_ulimits": []}}, pid_max=32768, nproc_hard=96363) == {}


def test_nothing_is_passed_where_every_limit_fits_and_else_every_one_lowered_to_the_hard_limit():
    hard = {"nofile": 20000, "nproc": 32768, "memlock": 8388608, "stack": UNLIMITED}
    assert clamped({"nofile": (1024, 20000), "nproc": (32768, 32768)}, hard) == ()
    assert clamped({}, hard) == ()
    # one over is enough to pass them all: a --ulimit makes Podman drop containers.conf's whole list
    assert clamped({"nofile": DEFAULT, "nproc": (32768, 32768), "memlock": (UNLIMITED, UNLIMITED),
                    "stack": (8388608, UNLIMITED)}, hard) == (
        "memlock=8388608:8388608", "nofile=20000:20000", "nproc=32768:32768", "stack=8388608:-1")
    assert clamped({"nofile": (1024, PODMAN_DEFAULT)}, {"nofile": 4096}) == ("nofile=1024:4096",)


def test_containers_conf_is_the_one_file_containers_conf_names_its_tables_merged(short_tmp):
    path = os.path.join(short_tmp, "containers.conf")
    with open(path, "w") as f:
        f.write('[containers]\ndefault_ulimits = ["nofile=4096:8192"]\n[engine]\nruntime = "runc"\n')
    assert containers_conf(path) == {"containers": {"default_ulimits": ["nofile=4096:8192"]},
                                     "engine": {"runtime": "runc"}}
    with open(path, "w") as f:
        f.write("[containers\n")
    assert containers_conf(path) == {}  # unreadable: Podman's own message says so when a job runs


def test_whether_a_hard_limit_may_be_raised_is_asked_of_the_kernel():
    # a process without CAP_SYS_RESOURCE in its bounding set, as corral's server on a host that has none
    assert can_raise_hard_limits(("setpriv", "--bounding-set=-sys_resource", sys.executable)) is False
    with open("/proc/self/status") as f:
        effective = int(next(line for line in f if line.startswith("CapEff:")).split()[1], 16)
    with open("/proc/self/uid_map") as f:
        initial_namespace = f.read().split() == ["0", "0", "4294967295"]
    if effective & (1 << 24) and initial_namespace:  # this process may: so may its child
        assert can_raise_hard_limits() is True
