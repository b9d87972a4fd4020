"""The directory `corral slurm-path` prints: Slurm's command names, each a small script that runs corral's
version of it. A directory of their own, so a real Slurm on PATH is shadowed only when asked for.

The scripts run the interpreter with `-S` (no site, no .pth files) and put corral's own directory on
the path themselves: they import nothing from site-packages, and skip the few milliseconds site costs.
"""

from __future__ import annotations

import os
import stat
import sys

import corral

COMMANDS = ("sbatch", "squeue", "scancel", "sacct", "scontrol", "sinfo", "seff", "sprio", "srun", "salloc", "sacctmgr",
            "sshare")
SCRIPT = """#!{python} -S
# corral's {name}: Slurm's command spoken to a corral server (see `corral slurm-path`); made by corral, do not edit
import sys
sys.path.insert(0, {root!r})
from corral.cli.slurm.command import run
from corral.cli.slurm.{module} import main
sys.exit(run({name!r}, main))
"""


def slurm_bin_dir() -> str:
    """The directory holding the commands, brought up to date: beside the interpreter when its owner
    runs this (or someone did before), else in the caller's own data directory."""
    shared = os.path.join(sys.prefix, "libexec", "corral-slurm")
    if _current(shared) or _writable(sys.prefix):
        write_scripts(shared)
        return shared
    own = os.path.join(os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "corral", "slurm-bin")
    write_scripts(own)
    return own


def scripts(python: str | None = None) -> dict[str, str]:
    """Each command's script, run by `python` (default: this interpreter; any Python >= 3.11 will do)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(corral.__file__)))
    return {name: SCRIPT.format(python=python or sys.executable, name=name, module=name, root=root)
            for name in COMMANDS}


def closed_to_others(python: str | None = None, root: str | None = None) -> str | None:
    """The first path other accounts cannot pass to run the commands or `import corral`, or None: the
    interpreter as named (a virtualenv's `bin/python` under a private home, even when it links to an open
    one), the file it resolves to, this interpreter's standard library, corral's own directory, or a
    directory above any of them. A root server puts the commands first on every job's PATH; where its users
    cannot run them, their shells fall through to whatever `srun` comes next."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(corral.__file__)))
    named = os.path.abspath(python or sys.executable)
    targets = [(named, stat.S_IXOTH), (os.path.realpath(named), stat.S_IXOTH)]
    if python is None:
        targets.append((os.path.dirname(os.path.abspath(os.__file__)), stat.S_IXOTH | stat.S_IROTH))
    targets.append((root, stat.S_IXOTH | stat.S_IROTH))
    for target, needed in targets:
        path = "/"
        for part in target.strip("/").split("/"):
            path = os.path.join(path, part)
            try:
                mode = os.stat(path).st_mode
            except OSError:
                return path
            want = needed if path == target else stat.S_IXOTH
            if mode & want != want:
                return path
    return None


def _current(directory: str) -> bool:
    """Every script there as this installation writes it, in a directory only its owner (or root) may change."""
    try:
        _check_owner(directory)
        return all(_read(os.path.join(directory, name)) == text for name, text in scripts().items())
    except OSError:
        return False


def write_scripts(directory: str, python: str | None = None) -> None:
    """The commands' scripts written into `directory` (made if need be), each replaced atomically."""
    os.makedirs(directory, mode=0o755, exist_ok=True)
    _check_owner(directory)
    for name, text in scripts(python).items():
        path = os.path.join(directory, name)
        if _read(path) == text:
            continue
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w") as f:
            f.write(text)
        os.chmod(temporary, 0o755)
        os.replace(temporary, path)


def _check_owner(directory: str) -> None:
    """Refuse a directory another user could write to: they could put their own `sbatch` in it."""
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (0, os.geteuid()) or info.st_mode & 0o022:
        raise PermissionError(f"{directory} is not a directory that only its owner may change; remove it and "
                              "run `corral slurm-path` again")


def _writable(directory: str) -> bool:
    try:
        return os.access(directory, os.W_OK) and os.stat(directory).st_uid == os.geteuid()
    except OSError:
        return False


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None
