"""Sending a notification by email, through the server's relay (`[smtp]`) or the host a channel names."""

from __future__ import annotations

import logging
import smtplib
import ssl
from collections.abc import Mapping
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from corral.core.units.iso_times import iso_utc
from corral.monitor.channels.notification import (
    Channel, DeliveryError, Notification, SmtpSettings, failure_reason, summary_line, text_value,
)

log = logging.getLogger("corral.monitor")


def send_email(channel: Channel, note: Notification, smtp: SmtpSettings, timeout_s: float) -> None:
    config = channel.config
    host = config.get("smtp_host", smtp.host)
    port = config.get("smtp_port", smtp.port)
    sender = config.get("sender", smtp.sender)
    to = list(config["to"])
    message = email_message(note, sender, to)
    where = f"{host}:{port}"
    try:
        refused = relay(host, port, smtp, message, sender, to, min(timeout_s, smtp.timeout_s))
    except _NoStartTls:
        raise DeliveryError(
            f"channel {channel.name!r}: the mail server {where} does not offer STARTTLS, and [smtp] "
            "starttls = true asks for it (set starttls = false in the [smtp] section of the server's "
            "config.toml for a relay without TLS, such as one on this machine or this network; mail and "
            "any password then cross the network unencrypted)") from None
    except smtplib.SMTPRecipientsRefused as exc:
        raise DeliveryError(f"channel {channel.name!r}: {where} refused every recipient: {_refusals(exc.recipients)}") from None
    except smtplib.SMTPResponseException as exc:
        raise DeliveryError(f"channel {channel.name!r}: {where} answered {exc.smtp_code} {_smtp_text(exc.smtp_error)}") from None
    except smtplib.SMTPException as exc:
        raise DeliveryError(f"channel {channel.name!r}: mail to {where} failed: {exc}") from None
    except OSError as exc:
        raise DeliveryError(f"channel {channel.name!r}: cannot reach mail server {where}: {failure_reason(exc, timeout_s)}") from None
    if refused:
        # The others have the message; failing the delivery would send it to them again on every retry.
        log.warning("channel %r: %s refused some recipients: %s", channel.name, where, _refusals(refused))


class _NoStartTls(smtplib.SMTPException):
    """The server's relay offers no STARTTLS, and [smtp] starttls asks for it."""


def relay(host: str, port: int, smtp: SmtpSettings, message: EmailMessage, sender: str, to: list[str],
          timeout_s: float) -> Mapping[str, tuple[int, bytes]]:
    """Send one message through `host`: with the server's TLS setting and credentials only when it is the
    server's own relay (`[smtp]`). Returns the recipients refused; raises smtplib's and socket errors."""
    # The server's credentials (and its TLS setting) belong to the server's own relay: a channel
    # that names another host must not be able to collect them.
    own_relay = (host, port) == (smtp.host, smtp.port)
    client = smtplib.SMTP(host, port, timeout=timeout_s)
    try:
        if own_relay and smtp.starttls:
            client.ehlo()
            if not client.has_extn("starttls"):
                raise _NoStartTls("the relay offers no STARTTLS")
            client.starttls(context=ssl.create_default_context())
        if own_relay and smtp.username:
            client.login(smtp.username, smtp.password or "")
        refused = client.send_message(message, from_addr=sender, to_addrs=to)
    except BaseException:
        client.close()
        raise
    _quit(client)
    return refused


def email_message(note: Notification, sender: str, to: list[str]) -> EmailMessage:
    """The mail for `note`: the summary as subject, every field in a plain-text body."""
    message = EmailMessage()
    message["Subject"] = summary_line(note)
    message["From"] = sender
    message["To"] = ", ".join(to)
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    job = "-" if note.job_id is None else str(note.job_id) + (f" ({note.job_name})" if note.job_name else "")
    rows = [
        ("Status", note.status), ("Severity", note.severity), ("Rule", note.rule), ("Condition", note.condition),
        ("Job", job), ("User", note.user or "-"), ("Value", text_value(note.value)),
        ("Fired at", iso_utc(note.fired_at)),
        ("Resolved at", iso_utc(note.resolved_at) if note.resolved_at is not None else "-"),
        ("Firing", str(note.firing_id)),
    ]
    facts = "\n".join(f"{label + ':':<13}{value}" for label, value in rows)
    message.set_content(f"{summary_line(note)}\n\n{note.message}\n\n{facts}\n\n-- \nSent by corral\n")
    return message


def _quit(client: smtplib.SMTP) -> None:
    """End a session whose message was accepted; a failure now must not make the delivery look failed."""
    try:
        client.quit()
    except (smtplib.SMTPException, OSError):
        client.close()


def _refusals(recipients: Mapping[str, tuple[int, bytes]]) -> str:
    return "; ".join(f"{address} ({code} {_smtp_text(text)})" for address, (code, text) in recipients.items())


def _smtp_text(text: bytes | str) -> str:
    return " ".join((text.decode("utf-8", "replace") if isinstance(text, bytes) else text).split())
