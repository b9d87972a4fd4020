"""A shared (root) server installed as the README says, in a virtualenv of a system Python at a path every
account can read (/opt/corral there; a directory of the same modes here): another user's job runs corral's
srun and scontrol and imports corral. Installed where the other accounts cannot read (a private home, as
`scripts/install.sh` makes a checkout's .venv), `corral up` says so, naming the path and the fix.

The install is the documented one, but for the server's own dependencies: pip would put them in the
virtualenv; here a .pth file lends it the test interpreter's (root reads them where they are), which needs
no network. What the jobs use (the interpreter, corral, the standard library) is the install's own.
"""

from __future__ import annotations

import glob
import os
import shutil
import site
import subprocess
import pytest

import corral
from corral.client import Client
from corral.home import read_server_info
from tests.conftest import _kill_leftover_supervisors

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
                                reason="a shared server runs as root (CI does), from a system python3")
WARNING = "other users' jobs cannot run corral's srun and scontrol, nor import corral"


def install(prefix: str) -> tuple[str, str]:
    """`python3 -m venv PREFIX && PREFIX/bin/pip install corral`: its interpreter and its site-packages."""
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", prefix], check=True, timeout=120)
    (packages,) = glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages"))
    shutil.copytree(os.path.dirname(corral.__file__), os.path.join(packages, "corral"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(packages, "server-dependencies.pth"), "w") as f:
        f.write("\n".join(p for p in site.getsitepackages() if os.path.isdir(p)) + "\n")
    return os.path.join(prefix, "bin", "python"), packages


def up(python: str, home: str) -> subprocess.CompletedProcess:
    done = subprocess.run([python, "-m", "corral.cli", "up", "--home", home, "--port", "0", "--gpus", "0",
                           "--kill-grace", "1", "--detach"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def down(python: str, home: str) -> None:
    subprocess.run([python, "-m", "corral.cli", "--home", home, "down"], capture_output=True, timeout=60)
    _kill_leftover_supervisors(home)


def job_of(user: str, home: str, script: str) -> tuple[dict, str, str]:
    """Run `script` as `user`'s batch job on the server of `home`: (the ended job, stdout, stderr)."""
    with Client(home=home) as root:
        token = root.create_token(user=user, expires="1h")["token"]
        with Client(root.url, token=token) as as_user:
            job = as_user.submit(script=script, submit_dir="/tmp", time="10m", env={"PATH": "/usr/bin:/bin"})
        ended = root.wait(job["id"], timeout=120)
        out, err = (root.logs(job["id"], stream=s)[0].decode() for s in ("stdout", "stderr"))
        return ended, out, err


def test_another_users_job_runs_srun_scontrol_and_imports_corral_from_the_documented_install(os_users, shared_dir):
    alice, _ = os_users
    os.chmod(shared_dir, 0o755)  # /opt: every account lists and enters it
    python, packages = install(os.path.join(shared_dir, "opt", "corral"))
    home = os.path.join(shared_dir, "home")
    started = up(python, home)
    try:
        assert WARNING not in started.stderr + started.stdout
        ended, out, err = job_of(alice, home, "#!/bin/sh\nsrun hostname\nscontrol show job $SLURM_JOB_ID | head -n 1\n"
                                              f"{python} -c 'import corral; print(\"imported\", corral.__file__)'\n")
        assert (ended["state"], ended["user"]) == ("COMPLETED", alice), err
        lines = out.splitlines()
        assert lines[0] == os.uname().nodename and lines[1].startswith(f"JobId={ended['id']} ")
        assert lines[2] == "imported " + os.path.join(packages, "corral", "__init__.py")
        with open(os.path.join(home, "server.log")) as f:
            assert WARNING not in f.read()
    finally:
        down(python, home)


def test_corral_up_as_root_names_a_private_install_and_the_fix(os_users, shared_dir):
    alice, _ = os_users
    private = os.path.join(shared_dir, "root-home")  # root's 0700 home, where install.sh put the checkout's .venv
    os.makedirs(private, mode=0o700)
    python, _ = install(os.path.join(private, "corral", ".venv"))
    home = os.path.join(shared_dir, "home")
    started = up(python, home)
    try:
        said = started.stderr
        assert f"{WARNING} from it: {private} (mode 700) is closed to them; install corral where every account " \
               "can read it" in said, said
        assert "python3 -m venv /opt/corral" in said and "Running corral as a shared service" in said
        with open(os.path.join(home, "server.log")) as f:
            assert f"{private} (mode 700)" in f.read()  # and in the log of the server a service manager starts
        ended, _, err = job_of(alice, home, f"#!/bin/sh\n{python} -c 'import corral'\n")
        assert ended["state"] == "FAILED" and "Permission denied" in err  # what the warning warned of
    finally:
        down(python, home)
    assert read_server_info(home) is None
