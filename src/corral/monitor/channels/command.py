"""Sending a notification to a local program: the JSON payload on its stdin, CORRAL_ALERT_* in its
environment, killed with everything it started once the timeout passes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from typing import IO

from corral.monitor.channels.notification import (
    EXCERPT_BYTES, Channel, DeliveryError, Notification, SmtpSettings, text_value,
)


def send_command(channel: Channel, note: Notification, smtp: SmtpSettings, timeout_s: float) -> None:
    argv = [str(arg) for arg in channel.config["argv"]]
    program = argv[0]
    env = {**os.environ, **alert_environment(note)}
    payload = json.dumps(note.payload(), allow_nan=False).encode()
    # Output goes to files, not pipes: a helper the program leaves running in the background
    # would hold a pipe open and make a finished command look hung.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env,
                                       start_new_session=True)  # its own process group, so a timeout ends all of it
        except FileNotFoundError:
            raise DeliveryError(f"channel {channel.name!r}: there is no program {program!r}") from None
        except PermissionError:
            raise DeliveryError(f"channel {channel.name!r}: {program!r} is not executable") from None
        except OSError as exc:
            raise DeliveryError(f"channel {channel.name!r}: cannot run {program!r}: {exc.strerror or exc}") from None
        with process:
            try:
                process.communicate(payload, timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                raise DeliveryError(f"channel {channel.name!r}: {program} did not finish within {timeout_s:g} s "
                                    "and was killed") from None
        code = process.returncode
        if code == 0:
            return
        tail = _tail(err) or _tail(out)
    ending = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with code {code}"
    raise DeliveryError(f"channel {channel.name!r}: {program} {ending}" + (f": {tail}" if tail else ""))


def alert_environment(note: Notification) -> dict[str, str]:
    """The CORRAL_ALERT_* variables a command channel's program sees."""
    values = {
        "CORRAL_ALERT_FIRING_ID": str(note.firing_id),
        "CORRAL_ALERT_RULE": note.rule,
        "CORRAL_ALERT_SEVERITY": note.severity,
        "CORRAL_ALERT_STATUS": note.status,
        "CORRAL_ALERT_JOB_ID": "" if note.job_id is None else str(note.job_id),
        "CORRAL_ALERT_JOB_NAME": note.job_name or "",
        "CORRAL_ALERT_USER": note.user or "",
        "CORRAL_ALERT_MESSAGE": note.message,
        "CORRAL_ALERT_VALUE": "" if note.value is None else text_value(note.value),
    }
    return {key: value.replace("\0", "") for key, value in values.items()}  # exec refuses NUL in the environment


def _tail(file: IO[bytes]) -> str:
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - EXCERPT_BYTES))
    return " ".join(file.read().decode("utf-8", "replace").split())


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
