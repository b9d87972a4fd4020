"""The server's home directory, every path in it, and the address file that lets every CLI call find the server.

    <home>/server.json      the running server's address and pid (the one file a shared home's users read)
    <home>/server.lock      flock-ed by the server for its whole life: one server per home
    <home>/server.log       a detached server's output (`corral up -d`)
    <home>/corral.sock      local callers connect here; the kernel tells the server who they are
    <home>/config.toml      the server's settings, under its command line
    <home>/webhook.token    the secret Slurm's epilog sends
    <home>/corral.db        the SQLite database (without --db)
    <home>/jobs/<id>/       each job's directory, for its supervisor (corral.executor.files names its files)
    <home>/checkpoints/<id>/  each job's $CORRAL_CHECKPOINT_DIR
    <home>/logs/<user>/     each user's default log directory
    <home>/log_ledgers/<user>  root's: the log space each user's running jobs hold (corral.executor.log_ledger)
    <home>/spool/           where the SDK spools what it could not send (a shared server's: one per user)
    <home>/artifacts/       the artifact store: uploaded blobs by sha256, partial uploads ([tracking] artifact_dir moves it)

Only the standard library: the SDK and the CLI import this on their way up.
"""

from __future__ import annotations

import os

from corral import lean_json

TYPE_CHECKING = False  # typing and dataclasses cost a CLI call more than the rest of it
if TYPE_CHECKING:
    from typing import Any

SERVER_FILE = "server.json"
LOCK_FILE = "server.lock"
SERVER_LOG_FILE = "server.log"
SOCKET_FILE = "corral.sock"
CONFIG_FILE = "config.toml"
WEBHOOK_TOKEN_FILE = "webhook.token"
DATABASE_FILE = "corral.db"
JOBS_DIR = "jobs"
CHECKPOINTS_DIR = "checkpoints"
LOGS_DIR = "logs"
LOG_LEDGERS_DIR = "log_ledgers"
SPOOL_DIR = "spool"
ARTIFACTS_DIR = "artifacts"
SYSTEM_HOME = "/var/lib/corral"  # the shared service's home (deploy/corral.service)


class HomeLayout:
    """Every path in one corral home (the module's docstring draws it), named once."""

    __slots__ = ("root",)
    root: str

    def __init__(self, root: str) -> None:
        object.__setattr__(self, "root", root)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"HomeLayout is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HomeLayout) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __repr__(self) -> str:
        return f"HomeLayout(root={self.root!r})"

    def _path(self, *names: str) -> str:
        return os.path.join(self.root, *names)

    @property
    def server_info(self) -> str:
        return self._path(SERVER_FILE)

    @property
    def lock(self) -> str:
        return self._path(LOCK_FILE)

    @property
    def server_log(self) -> str:
        return self._path(SERVER_LOG_FILE)

    @property
    def socket(self) -> str:
        return self._path(SOCKET_FILE)

    @property
    def config(self) -> str:
        return self._path(CONFIG_FILE)

    @property
    def webhook_token(self) -> str:
        return self._path(WEBHOOK_TOKEN_FILE)

    @property
    def database(self) -> str:
        return self._path(DATABASE_FILE)

    @property
    def jobs(self) -> str:
        return self._path(JOBS_DIR)

    @property
    def checkpoints(self) -> str:
        return self._path(CHECKPOINTS_DIR)

    @property
    def logs(self) -> str:
        return self._path(LOGS_DIR)

    @property
    def spool(self) -> str:
        return self._path(SPOOL_DIR)

    @property
    def artifacts(self) -> str:
        return self._path(ARTIFACTS_DIR)

    def job_dir(self, job_id: int) -> str:
        return self._path(JOBS_DIR, str(job_id))

    def checkpoint_dir(self, job_id: int) -> str:
        return self._path(CHECKPOINTS_DIR, str(job_id))

    def user_logs(self, user: str) -> str:
        return self._path(LOGS_DIR, user)

    @property
    def log_ledgers(self) -> str:
        return self._path(LOG_LEDGERS_DIR)

    def log_ledger(self, user: str) -> str:
        """The ledger of `user`'s log quota; a name that is no plain file name is spelled in hex."""
        plain = user and "/" not in user and "\0" not in user and user not in (".", "..")
        return self._path(LOG_LEDGERS_DIR, user if plain else "x" + user.encode().hex())

    @property
    def mlflow_artifacts(self) -> str:
        """`<home>/artifacts/mlflow/`: where an older corral kept the files MLflow's clients uploaded, one
        directory per run; the server takes them into the artifact store at its start
        (`tracking.compat.mlflow_artifacts.import_legacy_files`)."""
        return self._path("artifacts", "mlflow")

    @property
    def job_facing_dirs(self) -> tuple[str, ...]:
        """What a job reaches by name in the home: its job directory's script, its checkpoints, its logs."""
        return (self.jobs, self.checkpoints, self.logs)


def resolve_home(home: str | None = None) -> str:
    """`--home`, else `$CORRAL_HOME`, else `~/.corral`; always absolute."""
    return os.path.abspath(os.path.expanduser(home or os.environ.get("CORRAL_HOME") or "~/.corral"))


def system_home() -> str:
    """Where the machine's shared corral service lives: `$CORRAL_SYSTEM_HOME`, else /var/lib/corral."""
    return os.environ.get("CORRAL_SYSTEM_HOME") or SYSTEM_HOME


def read_server_info(home: str) -> dict[str, Any] | None:
    try:
        with open(HomeLayout(home).server_info) as f:
            info: dict[str, Any] = lean_json.loads(f.read())
            return info
    except (FileNotFoundError, ValueError):
        return None


def read_trusted_server_info(home: str, owners: tuple[int, ...]) -> dict[str, Any] | None:
    """The home's address file, if it can only be the server's: the home directory and the file (a regular
    file, not a link) are owned by one of `owners` and writable by nobody else. None otherwise, or where
    there is none.

    What a job's client follows to a server on another port, with the job's token: a file another account
    wrote (a home it made where the job's is missing, on a compute node; a directory others may write)
    would send the token to that account's listener. The directory is opened once and the file read
    through it, so what is checked is what is read.

    Raises:
        OSError: the home cannot be opened (no such directory, not ours to enter).
    """
    # O_PATH: a shared server's home is 0711, entered but not listed; the descriptor is only looked at and passed
    folder = os.open(home, getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if not _owned_by(os.fstat(folder), owners):
            return None
        try:
            fd = os.open(SERVER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        except FileNotFoundError:
            return None
        except OSError:  # a link (ELOOP), or what we may not read: not the server's to follow
            return None
        with open(fd, closefd=True) as f:
            found = os.fstat(f.fileno())
            if not _owned_by(found, owners) or (found.st_mode & 0o170000) != 0o100000:
                return None
            try:
                info: dict[str, Any] = lean_json.loads(f.read())
            except ValueError:
                return None
            return info if isinstance(info, dict) else None
    finally:
        os.close(folder)


def _owned_by(found: os.stat_result, owners: tuple[int, ...]) -> bool:
    return found.st_uid in owners and not found.st_mode & 0o022


def write_server_info(home: str, info: dict[str, Any]) -> None:
    from corral.atomic import write_json_atomic

    write_json_atomic(HomeLayout(home).server_info, info)


def remove_server_info(home: str, pid: int) -> None:
    """Remove the address file if it still names this server (a newer one may have replaced it)."""
    info = read_server_info(home)
    if info is not None and info.get("pid") == pid:
        try:
            os.unlink(HomeLayout(home).server_info)
        except FileNotFoundError:
            pass
