"""What an alert sends and where: a channel, the notification, the server's mail relay, and the
error a failed delivery raises; the texts every kind of channel shares (the summary line, values)."""

from __future__ import annotations

import math
import ssl
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from corral.core.units.iso_times import iso_utc
from corral.core.tracking.nonfinite import json_number

EXCERPT_BYTES = 200
"""How much of a failed peer's answer, or a failed program's output, a delivery error quotes."""
_SUMMARY_CHARS = 200


@dataclass(frozen=True)
class Channel:
    """A named destination; `config` is the normalized, type-specific part of its definition."""

    name: str
    type: str
    config: Mapping[str, Any]


@dataclass(frozen=True)
class SmtpSettings:
    """The server's mail relay (the `[smtp]` section of its config file)."""

    host: str = "localhost"
    port: int = 25
    sender: str = "corral@localhost"
    username: str | None = None
    password: str | None = None
    starttls: bool = False
    timeout_s: float = 10.0
    domain: str | None = None
    """Where users' mail goes by default (Slurm's MailDomain): sbatch --mail-type mails USER@domain; None: the
    sender's domain."""


@dataclass(frozen=True)
class Notification:
    """One alert firing, or its resolution, as it is sent."""

    firing_id: int
    rule: str
    severity: str  # info | warning | critical
    status: str  # firing | resolved
    condition: str
    message: str
    job_id: int | None
    job_name: str | None
    user: str | None
    value: float | str | None
    fired_at: float
    resolved_at: float | None

    def payload(self) -> dict[str, Any]:
        """The generic webhook's JSON body: every field, the times also as ISO-8601 UTC, and the summary line."""
        body = asdict(self)
        body["value"] = json_number(self.value)
        body["fired_at_iso"] = iso_utc(self.fired_at)
        body["resolved_at_iso"] = iso_utc(self.resolved_at) if self.resolved_at is not None else None
        body["summary"] = summary_line(self)
        return body


class DeliveryError(Exception):
    """A notification did not get through; `message` names the channel and the cause."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def summary_line(note: Notification) -> str:
    """One line for a subject or a chat message: `[CRITICAL] job 12 (train) rule: message`."""
    label = "RESOLVED" if note.status == "resolved" else note.severity.upper()
    if note.job_id is not None:
        subject = f"job {note.job_id}" + (f" ({note.job_name})" if note.job_name else "")
    else:
        subject = f"job {note.job_name}" if note.job_name else ""
    head = " ".join(part for part in (f"[{label}]", subject, note.rule) if part)
    text = f"{head}: {note.message}" if note.message.strip() else head
    text = " ".join(text.split())  # one line, whatever the message held: it becomes a mail header
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"


def failure_reason(exc: BaseException, timeout_s: float) -> str:
    """Why a connection or a request failed, in words a person acts on."""
    if isinstance(exc, TimeoutError) or str(exc) == "timed out":
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is it running, on that port?)"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"its TLS certificate is not trusted ({exc.verify_message})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def text_value(value: float | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.6g}"
    return str(json_number(value))
