"""Podman for the tests, and the images they run: made here, never pulled (there is no registry).

A pytest plugin: `podman` points the runtime at a configuration the tests write (this machine's cgroups
are hybrid v1: runc, cgroupfs, no default ulimits) through CONTAINERS_CONF, which the servers and
supervisors the tests start inherit; `busybox_image` is a root filesystem of Debian's busybox-static,
imported; `python_image` holds this interpreter and its standard library (no site-packages), at the paths
it has here, so that `import corral` works inside with the source mounted.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Callable, Iterator

import pytest

BUSYBOX = "/bin/busybox"
CONF_DIR = "/tmp/corral-test-containers"
BUSYBOX_APPLETS = ("sh", "ls", "cat", "id", "sleep", "env", "echo", "pwd", "touch", "dd", "grep", "head", "stat",
                   "kill", "true", "false", "mkdir", "rm", "test", "wc", "tr", "printf", "date")
_SKIPPED_STDLIB = {"test", "idlelib", "tkinter", "ensurepip", "site-packages", "lib2to3", "turtledemo",
                   "config-3.11-x86_64-linux-gnu", "__pycache__"}


def _need_podman() -> str:
    binary = shutil.which("podman")
    if binary is None or os.geteuid() != 0:
        pytest.fail("the container tests need root and Podman: run scripts/containers.sh (the README's test "
                    "command does)")
    return binary


@pytest.fixture(scope="session")
def podman() -> Iterator[str]:
    """Podman's binary, with CONTAINERS_CONF set for this process and what it starts."""
    binary = _need_podman()
    os.makedirs(CONF_DIR, exist_ok=True)
    conf = os.path.join(CONF_DIR, "containers.conf")
    with open(conf + ".tmp", "w") as f:
        f.write('[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\n'
                'events_logger = "file"\n')
    os.replace(conf + ".tmp", conf)
    old = os.environ.get("CONTAINERS_CONF")
    os.environ["CONTAINERS_CONF"] = conf
    yield binary
    if old is None:
        os.environ.pop("CONTAINERS_CONF", None)
    else:
        os.environ["CONTAINERS_CONF"] = old


def _exists(podman: str, image: str) -> bool:
    return subprocess.run([podman, "image", "exists", image], capture_output=True).returncode == 0


def _build(podman: str, image: str, make_tar: Callable[[], bytes], env: list[str]) -> None:
    """Import the image unless it is there; one test process at a time (xdist's workers share Podman)."""
    os.makedirs(CONF_DIR, exist_ok=True)
    with open(os.path.join(CONF_DIR, "build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _exists(podman, image):
            _import(podman, image, make_tar(), env)


def _import(podman: str, image: str, tar_bytes: bytes, env: list[str]) -> None:
    with tempfile.NamedTemporaryFile(suffix=".tar") as f:
        f.write(tar_bytes)
        f.flush()
        changes = [arg for item in env for arg in ("--change", f"ENV {item}")]
        subprocess.run([podman, "import", *changes, f.name, image], check=True, capture_output=True)


def _add_file(tar: tarfile.TarFile, source: str, name: str, mode: int | None = None) -> None:
    info = tar.gettarinfo(source, arcname=name.lstrip("/"))
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    if info.isdir():
        info.mode = 0o755
        tar.addfile(info)
    elif info.issym():
        tar.addfile(info)
    else:
        info.mode = mode if mode is not None else (0o755 if os.access(source, os.X_OK) else 0o644)
        with open(source, "rb") as f:
            tar.addfile(info, f)


def _add_dirs(tar: tarfile.TarFile, path: str, made: set[str]) -> None:
    parts = path.strip("/").split("/")[:-1]
    for i in range(1, len(parts) + 1):
        name = "/".join(parts[:i])
        if name not in made:
            made.add(name)
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)


def busybox_tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        made: set[str] = set()
        for d in ("bin", "tmp", "etc"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
            made.add(d)
        _add_file(tar, BUSYBOX, "bin/busybox", 0o755)
        for applet in BUSYBOX_APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
        passwd = b"root:x:0:0:root:/root:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size, info.mode = len(passwd), 0o644
        tar.addfile(info, io.BytesIO(passwd))
    return buffer.getvalue()


@pytest.fixture(scope="session")
def busybox_image(podman: str) -> str:
    """`localhost/corral-test:2`: busybox's sh and tools, nothing else (PATH=/bin)."""
    image = "localhost/corral-test:2"
    _build(podman, image, busybox_tar, ["PATH=/bin", "IMAGE_OWN=from-the-image"])
    return image


def _libraries(binary: str) -> list[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if path.startswith("/"):
            found.append(path)
    return found


def python_tar() -> bytes:
    """This interpreter, its libraries and standard library, at their paths here; busybox for a shell."""
    buffer = io.BytesIO(busybox_tar())
    with tarfile.open(fileobj=buffer, mode="a") as tar:
        made = {"bin", "tmp", "etc"}
        interpreter = os.path.realpath(sys.executable)
        libraries = set(_libraries(interpreter))
        stdlib = sysconfig.get_paths()["stdlib"]
        for root, dirs, names in os.walk(stdlib):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_STDLIB)
            _add_dirs(tar, os.path.join(root, "x"), made)
            for name in sorted(names):
                if name.endswith((".py", ".so")):
                    _add_file(tar, os.path.join(root, name), os.path.join(root, name))
                if name.endswith(".so"):  # an extension's own libraries (zlib for binascii, libssl...)
                    libraries.update(_libraries(os.path.join(root, name)))
        for path in sorted({interpreter, *libraries}):
            _add_dirs(tar, path, made)
            _add_file(tar, os.path.realpath(path), path, 0o755)
        info = tarfile.TarInfo("bin/python3")
        info.type, info.linkname = tarfile.SYMTYPE, interpreter
        tar.addfile(info)
    return buffer.getvalue()


def python_image_name() -> str:
    key = hashlib.sha256(f"2{sys.version}{os.path.realpath(sys.executable)}".encode()).hexdigest()[:10]
    return f"localhost/corral-test-python:{key}"


@pytest.fixture(scope="session")
def python_image(podman: str) -> str:
    """An image with this Python (`python3` on its PATH) and no packages: corral comes mounted."""
    image = python_image_name()
    _build(podman, image, python_tar, ["PATH=/bin"])
    return image
