"""Slurm's commands as a user runs them: `export PATH="$(corral slurm-path):$PATH"`, then the commands."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from corral.cli.slurm.install import write_scripts


@pytest.fixture(scope="session")
def slurm_path() -> str:
    out = subprocess.run([sys.executable, "-m", "corral.cli", "--home", "/nonexistent-home", "slurm-path"],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


Shell = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def slurm_shell(slurm_path: str) -> Callable[[str], Shell]:
    """`shell(home)(script)`: runs `script` in bash with corral's Slurm commands first on PATH, for `home`'s server."""

    def for_home(home: str) -> Shell:
        def shell(script: str, *, cwd: str | None = None, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
            environment = {k: v for k, v in os.environ.items() if not k.startswith(("SBATCH_", "SLURM_", "CORRAL_"))}
            environment.update(PATH=f"{slurm_path}:{os.environ['PATH']}", CORRAL_HOME=home, **env)
            return subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=cwd, env=environment,
                                  timeout=timeout)
        return shell

    return for_home


@pytest.fixture
def testbed_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The testbed's local time, in which Slurm printed the captures, is UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# the commands need any Python >= 3.11; the test venv's own may sit where other accounts cannot run it
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/usr/local/bin")


@pytest.fixture
def as_user(shared_dir):
    """`as_user(user, home, script)`: runs `script` in bash as `user`, with corral's Slurm commands first on PATH."""
    if SYSTEM_PYTHON is None or subprocess.run([SYSTEM_PYTHON, "-c", "import sys; sys.exit(sys.version_info < (3, 11))"]
                                               ).returncode:
        pytest.skip("needs a Python >= 3.11 that every account may run (/usr/bin/python3)")
    bin_dir = os.path.join(shared_dir, "slurm-bin")
    write_scripts(bin_dir, SYSTEM_PYTHON)

    def run(user: str, home: str, script: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CORRAL_HOME": home, "HOME": "/tmp", "USER": user}
        return subprocess.run(["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                               "bash", "-c", script], capture_output=True, text=True, timeout=120, cwd="/tmp")

    return run
