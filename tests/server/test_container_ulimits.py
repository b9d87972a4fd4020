"""Container jobs on a root server that may not raise hard limits (no CAP_SYS_RESOURCE, as in a container or
under a unit's capability bounding set), with Podman's real default ulimits, which exceed them: the jobs run,
their limits lowered to what the runtime may set, and the server says so at its start.

The server runs with CAP_SYS_RESOURCE out of its bounding set and lowered hard limits, so the test means the
same on any root machine; the tests' own containers.conf (`default_ulimits = []`) is replaced by one that keeps
Podman's defaults.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import pytest

from corral.home import read_server_info
from tests.conftest import Server

NOFILE = 4096
"""The server's hard limit of open files: far under Podman's 1048576."""
with open("/proc/sys/kernel/pid_max") as _f:
    PID_MAX = int(_f.read())
_NPROC_NOW = resource.getrlimit(resource.RLIMIT_NPROC)[1]
NPROC = PID_MAX if _NPROC_NOW == resource.RLIM_INFINITY else min(PID_MAX, _NPROC_NOW)
"""Its processes: pid_max, under Podman's 1048576 (once any ulimit is set), and enough for Podman to take
pid_max as its built-in default (where the tests' own limit is lower, Podman sets no limit by default)."""
PR_CAPBSET_DROP, CAP_SYS_RESOURCE = 24, 24
SHOW = 'echo "nofile=$(ulimit -Hn):$(ulimit -Sn) nproc=$(ulimit -Hu) stack=$(ulimit -s)"'


def _without_sys_resource() -> None:
    """In the server's process before it runs: what a host without CAP_SYS_RESOURCE gives a root server."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot drop CAP_SYS_RESOURCE")
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, NOFILE))
    resource.setrlimit(resource.RLIMIT_NPROC, (NPROC, NPROC))


def _restricted_server(home: str, conf: str) -> Server:
    """A root server as on such a host, its Podman reading `conf`."""
    server = Server(home=home, gpus=0)
    subprocess.run([sys.executable, "-m", "corral.cli", "up", "--home", home, "--port", "0", "--gpus", "0",
                    "--kill-grace", "1", "--detach"], check=True, capture_output=True, timeout=90,
                   env={**os.environ, "CONTAINERS_CONF": conf}, preexec_fn=_without_sys_resource)
    info = read_server_info(home)
    assert info is not None
    server.pid, server.url = info["pid"], info["url"]
    return server


@pytest.mark.parametrize("defaults", ["built-in", "configured"])
def test_container_jobs_run_within_the_hard_limits_the_server_may_not_raise(defaults, short_tmp, podman,
                                                                            busybox_image):
    """Podman's defaults: its built-in ones, or an admin's list over the limits (Debian's containers.conf
    example, nofile=1048576, and so Podman's nproc=1048576) with a stack limit that fits, which the job keeps."""
    conf = os.path.join(short_tmp, "containers.conf")
    with open(conf, "w") as f:
        if defaults == "configured":
            f.write('[containers]\ndefault_ulimits = ["nofile=1048576:1048576", "stack=16777216:16777216"]\n')
        f.write('[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\nevents_logger = "file"\n')
    server = _restricted_server(os.path.join(short_tmp, "home"), conf)
    try:
        with server.client() as client:
            job = client.submit(["sh", "-c", SHOW], image=busybox_image)
            done = client.wait(job["id"], timeout=120)
            out, _, _ = client.logs(job["id"])
            err, _, _ = client.logs(job["id"], stream="stderr")
    finally:
        server.stop()
    assert (done["state"], done["exit_code"]) == ("COMPLETED", 0), err.decode()
    inherited = resource.getrlimit(resource.RLIMIT_STACK)[0]  # the server's, where Podman sets none
    stack = "16384" if defaults == "configured" else "unlimited" if inherited < 0 else str(inherited // 1024)
    assert out.decode().split() == [f"nofile={NOFILE}:{NOFILE}", f"nproc={NPROC}", f"stack={stack}"]
    with open(os.path.join(server.home, "server.log")) as f:
        said = f.read()
    assert "exceed this server's hard limits" in said and f"nofile={NOFILE}:{NOFILE}" in said, said
    assert "set default_ulimits in containers.conf" in said
