"""Shared fixtures: real databases (SQLite and PostgreSQL) and real corral servers."""

from __future__ import annotations

import collections
import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import settings

from corral.client import Client
from corral.cli.daemon import stop_server
from corral.errors import CorralError
from corral.home import read_server_info
from tests.forked_servers import FORKED

pytest_plugins = [
    "tests.containers",  # podman, busybox_image, python_image: container jobs' runtime and images
    "tests.monitor.receivers",  # the http and smtp_server fixtures
    "tests.slurm_testbed",  # slurm_cluster and slurm: a server on the Slurm testbed
    "tests.users",  # os_users and shared_dir: real accounts for jobs that run as their owner
]

# Property tests check what holds, not how fast: a deadline only measures how busy the machine is (four workers
# and real servers share two cores in CI).
settings.register_profile("corral", deadline=None)
settings.load_profile("corral")

# A suite started in the background of a script (`cmd &` in a non-interactive shell, as CI runners may) inherits
# SIGINT ignored, and so would every program a test starts: the tests that press Ctrl-C on srun or snakemake need
# what a terminal gives them.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

PG_ADMIN_URL = os.environ.get("CORRAL_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
DATABASES = ["sqlite", "postgresql"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """scripts/test.sh runs each file in one pytest-xdist worker (the Slurm testbed's tests live in one file;
    each cancels only its own server's jobs), then the tests marked serial alone. Serial too:
    a second file on the Slurm testbed, the tests that count every process of a test account, the
    restarts timed against running jobs, and the browser tests (Playwright's sync API leaves an event
    loop in its worker's thread, which the MCP tests' asyncio.run would then refuse)."""
    alone = ("test_slurm_session.py", "test_run_as_owner.py", "test_hostile_jobs.py", "test_recovery.py")
    for item in items:
        if item.path.name in alone or item.path.parent.name == "web":
            item.add_marker(pytest.mark.serial)
    # Workers take files in this order (scripts/test.sh: --no-loadscope-reorder): the files that take minutes
    # first, the longest first, so that none of them is the one still running after the others are done, then the
    # rest, most tests first (xdist's own order).
    per_file = collections.Counter(str(item.path) for item in items)
    items.sort(key=lambda item: (_long_rank(item.path), -per_file[str(item.path)]))


def _long_rank(path: pathlib.Path) -> int:
    """Where the file stands in LONG_FILES (the first entry it falls under), or after all of them."""
    relative = str(path.relative_to(TESTS))
    return next((rank for rank, prefix in enumerate(LONG_FILES) if relative.startswith(prefix)), len(LONG_FILES))


TESTS = pathlib.Path(__file__).parent
# Each takes a minute or more of one worker, the longest first (their times on two workers at the last look: 3.5 min
# for the container races down to half a minute): a Slurm time limit counts in minutes, training frameworks start
# up, some hold few tests but long ones (MLflow's client, GPU faults, server restarts), which by their count of
# tests alone would start last. A file falls under the first entry it matches (integrations/ takes the rest of
# that folder). Not the interactive srun tests: relaying a terminal is what a machine this loaded (all of these at
# once) disturbs.
LONG_FILES = ("executor/test_container_races.py", "backends/slurm/test_against_slurm.py",
              "integrations/test_snakemake.py", "examples/", "api/test_fuzz.py", "api/test_mlflow_api.py",
              "integrations/test_submitit.py", "integrations/test_srun_frameworks.py", "sdk/test_shared_server.py",
              "cli/slurm/test_gpu_faults.py", "cli/test_monitoring_cli.py", "integrations/", "sdk/test_sender.py")


@contextlib.contextmanager
def _fresh_pg_schema() -> Iterator[str]:
    import psycopg

    schema = f"corral_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')  # a generated identifier, not user input
    try:
        yield f"{PG_ADMIN_URL}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped afterwards."""
    with _fresh_pg_schema() as url:
        yield url


@pytest.fixture(params=DATABASES)
def db_url(request: pytest.FixtureRequest, tmp_path) -> str | None:
    """None (SQLite in the server's home) or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("pg_schema_url")


@dataclass
class Server:
    """A real `corral up --detach` process on its own home."""

    home: str
    db: str | None = None
    gpus: int | None = 4
    """Declared A100 80G GPUs; None: declares none, and detects them (from $CORRAL_GPU_REPLAY's first frame)."""
    extra: list[str] = field(default_factory=list)
    pid: int = 0
    url: str = ""
    began: int | None = None
    """The server process's start time (clock ticks since boot): the pid is its own while this matches."""

    def start(self) -> Server:
        declared = ["--gpus", str(self.gpus), "--gpu-type", "A100", "--gpu-mem", "80G"] if self.gpus is not None else []
        up = ["up", "--home", self.home, "--port", "0", *declared, "--kill-grace", "1", *self.extra]
        if self.db:
            up += ["--db", self.db]
        info = FORKED.start(up, self.home)  # as `corral up --detach`, without its imports (tests/forked_servers.py)
        if info is None:
            subprocess.run([sys.executable, "-m", "corral.cli", *up, "--detach"], check=True, capture_output=True,
                           timeout=90)
            info = read_server_info(self.home)
        assert info is not None
        self.pid, self.url = info["pid"], info["url"]
        self.began = _began(self.pid)
        return self

    def client(self) -> Client:
        return Client(home=self.home)

    def stop(self) -> None:
        try:  # what `corral down` does, without an interpreter of its own
            if stop_server(self.home, 60) is not None:
                return
        except (CorralError, OSError):
            pass
        # its home may be gone already (a fixture torn down first): then `down` cannot find it
        if self.began is None or _began(self.pid) != self.began:
            return  # gone, and the pid is someone else's now
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        self._wait_gone()

    def kill9(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self._wait_gone()

    def _wait_gone(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.02)


def _began(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rpartition(")")[2].split()[19])
    except (FileNotFoundError, IndexError, ValueError):
        return None


@pytest.fixture
def short_tmp() -> Iterator[str]:
    """A short temporary directory (pytest's tmp_path can be long)."""
    path = tempfile.mkdtemp(prefix="corral-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def server_factory(short_tmp: str) -> Iterator:
    started: list[Server] = []

    def make(db: str | None = None, gpus: int = 4, extra: list[str] | None = None, home: str | None = None) -> Server:
        server = Server(home=home or os.path.join(short_tmp, f"home{len(started)}"), db=db, gpus=gpus, extra=extra or [])
        started.append(server.start())
        return server

    yield make
    for server in started:
        server.stop()
        _kill_leftover_supervisors(server.home)  # a home outside short_tmp (a shared one) too
    _kill_leftover_supervisors(short_tmp)


def _kill_leftover_supervisors(root: str) -> None:
    """Jobs outlive servers by design; a test's jobs must not outlive the test."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"corral.executor.supervisor" in cmdline and root.encode() in cmdline:
            try:
                os.kill(int(entry), signal.SIGTERM)
            except ProcessLookupError:
                pass


@pytest.fixture
def server(server_factory, db_url) -> Server:
    """A running server with 4 declared A100s, on SQLite and on PostgreSQL."""
    return server_factory(db=db_url)


@contextlib.contextmanager
def module_server(database: str, extra: list[str] | None = None) -> Iterator[Server]:
    """A server, on SQLite or a fresh PostgreSQL schema, for the tests of one module to share."""
    root = tempfile.mkdtemp(prefix="corral-")
    with contextlib.ExitStack() as stack:
        db = stack.enter_context(_fresh_pg_schema()) if database == "postgresql" else None
        server = Server(home=os.path.join(root, "home"), db=db, extra=extra or []).start()
        try:
            yield server
        finally:
            server.stop()
            _kill_leftover_supervisors(root)
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module", params=DATABASES)
def refusing_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """One server, on SQLite and on PostgreSQL, for a module's tests whose every request is refused: what they
    send changes nothing, so they need not pay for a server each (a server start is most of such a test)."""
    with module_server(request.param) as server:
        yield server
