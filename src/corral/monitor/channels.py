"""Where alerts go: checking a channel's definition, sending one notification through it, and
how long to wait before trying again.

Four kinds of channel: a generic JSON webhook, a Slack-compatible incoming webhook (Slack,
Mattermost, Rocket.Chat), email over SMTP, and a local program. Sending is synchronous and
bounded by a timeout, because the dispatcher calls it from a worker thread; it raises
DeliveryError with a message a person can act on. Messages name a URL's host, never its path:
a Slack webhook's path is its secret.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import re
import shlex
import signal
import smtplib
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import IO, Any
from urllib.parse import urlsplit

from corral.errors import InvalidRequest

log = logging.getLogger("corral.monitor")

CHANNEL_TYPES = ("webhook", "slack", "email", "command")
MAX_ATTEMPTS = 8
FIRST_RETRY_DELAY_S = 5.0
MAX_RETRY_DELAY_S = 600.0

_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")  # an HTTP token (RFC 9110)
# One @, and nothing that would end the address in a header: whitespace, separators, quotes.
_ADDRESS = re.compile(r"[^@\s,;:<>\"()\[\]\\]+@[^@\s,;:<>\"()\[\]\\]+")
_HOST = re.compile(r"[A-Za-z0-9.:_-]{1,253}")
_KEYS = {
    "webhook": {"name", "type", "url", "headers"},
    "slack": {"name", "type", "url"},
    "email": {"name", "type", "to", "smtp_host", "smtp_port", "sender"},
    "command": {"name", "type", "argv", "command"},
}
_MAX_RECIPIENTS = 50
_MAX_ARGS = 256
_EXCERPT_BYTES = 200
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
        body["value"] = _json_value(self.value)
        body["fired_at_iso"] = _iso(self.fired_at)
        body["resolved_at_iso"] = _iso(self.resolved_at) if self.resolved_at is not None else None
        body["summary"] = summary_line(self)
        return body


class DeliveryError(Exception):
    """A notification did not get through; `message` names the channel and the cause."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def retry_delay_s(attempt: int) -> float | None:
    """Seconds to wait after failed attempt `attempt` (1-based): 5, 10, 20 ... capped at 600;
    None once MAX_ATTEMPTS have failed."""
    if attempt < 1:
        raise ValueError(f"attempts count from 1, got {attempt}")
    if attempt >= MAX_ATTEMPTS:
        return None
    return min(FIRST_RETRY_DELAY_S * 2 ** (attempt - 1), MAX_RETRY_DELAY_S)


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


# --- checking a definition -------------------------------------------------------------------


def parse_channel(body: Any) -> Channel:
    """A channel from a client's JSON definition.

    Raises:
        InvalidRequest: naming the field at fault.
    """
    if not isinstance(body, Mapping):
        raise InvalidRequest("body", f"must be a JSON object, got {type(body).__name__}",
                             'e.g. {"name": "ops", "type": "webhook", "url": "https://..."}')
    kind = body.get("type")
    if kind not in CHANNEL_TYPES:
        raise InvalidRequest("type", "missing" if kind is None else f"unknown channel type {kind!r}",
                             f"use one of {', '.join(CHANNEL_TYPES)}")
    unknown = set(body) - _KEYS[kind]
    if unknown:
        raise InvalidRequest(sorted(unknown)[0], f"unknown field for a {kind} channel: {', '.join(sorted(unknown))}",
                             f"a {kind} channel takes {', '.join(sorted(_KEYS[kind]))}")
    name = body.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidRequest("name", "missing" if name is None else f"{name!r} is not a channel name",
                             "use 1-64 letters, digits, -, _ or .")
    config = _CONFIG_PARSERS[kind](body)
    try:
        json.dumps(config, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise InvalidRequest("body", "holds text that is not valid Unicode (a lone surrogate)") from None
    return Channel(name=name, type=kind, config=config)


def _webhook_config(body: Mapping[str, Any]) -> dict[str, Any]:
    return {"url": _url(body.get("url")), "headers": _headers(body.get("headers", {}))}


def _slack_config(body: Mapping[str, Any]) -> dict[str, Any]:
    return {"url": _url(body.get("url"))}


def _email_config(body: Mapping[str, Any]) -> dict[str, Any]:
    to = body.get("to")
    if to is None:
        raise InvalidRequest("to", "missing", 'give an address or a list, e.g. "to": ["oncall@example.com"]')
    addresses = [to] if isinstance(to, str) else to
    if not isinstance(addresses, list) or not addresses:
        raise InvalidRequest("to", "must be an address or a non-empty list of addresses")
    if len(addresses) > _MAX_RECIPIENTS:
        raise InvalidRequest("to", f"has {len(addresses)} addresses", f"give at most {_MAX_RECIPIENTS}; use a list address")
    checked = [_address(a, f"to[{i}]" if isinstance(to, list) else "to") for i, a in enumerate(addresses)]
    config: dict[str, Any] = {"to": list(dict.fromkeys(checked))}
    if "smtp_host" in body:
        host = body["smtp_host"]
        if not isinstance(host, str) or not _HOST.fullmatch(host) or any(len(part) > 63 for part in host.split(".")):
            raise InvalidRequest("smtp_host", f"{host!r} is not a host name", "e.g. smtp.example.com or 10.0.0.5")
        config["smtp_host"] = host
    if "smtp_port" in body:
        port = body["smtp_port"]
        if type(port) is not int or not 0 < port < 65536:
            raise InvalidRequest("smtp_port", f"{port!r} is not a port", "give a number from 1 to 65535, e.g. 25 or 587")
        config["smtp_port"] = port
    if "sender" in body:
        config["sender"] = _address(body["sender"], "sender")
    return config


def _command_config(body: Mapping[str, Any]) -> dict[str, Any]:
    hint = 'e.g. "argv": ["/usr/local/bin/page-oncall", "--team", "ml"]; it runs without a shell'
    if "argv" in body and "command" in body:
        raise InvalidRequest("command", "give argv or command, not both", hint)
    if "command" in body:
        field, command = "command", body["command"]
        if not isinstance(command, str):
            raise InvalidRequest(field, f"must be a string, got {type(command).__name__}", hint)
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise InvalidRequest(field, f"cannot split into arguments: {exc}", "balance the quotes, or give argv") from None
    elif "argv" in body:
        field, argv = "argv", body["argv"]
    else:
        raise InvalidRequest("argv", "missing", hint)
    if not isinstance(argv, list) or not argv:
        raise InvalidRequest(field, "must name a program to run", hint)
    if len(argv) > _MAX_ARGS:
        raise InvalidRequest(field, f"has {len(argv)} arguments", f"give at most {_MAX_ARGS}")
    for i, arg in enumerate(argv):
        if not isinstance(arg, str) or "\0" in arg or len(arg) > 4096:
            raise InvalidRequest(f"argv[{i}]", f"{arg!r} is not an argument", "give strings without NUL, up to 4096 characters")
    if not argv[0].strip():
        raise InvalidRequest("argv[0]", "is empty", hint)
    return {"argv": list(argv)}


_CONFIG_PARSERS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "webhook": _webhook_config, "slack": _slack_config, "email": _email_config, "command": _command_config,
}


def _url(value: Any) -> str:
    # Never echo the URL in these messages: a Slack webhook URL is a credential.
    hint = "give the full address, e.g. https://hooks.example.com/alerts"
    if value is None:
        raise InvalidRequest("url", "missing", hint)
    if not isinstance(value, str) or not value or len(value) > 2048:
        raise InvalidRequest("url", "must be a URL of at most 2048 characters", hint)
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidRequest("url", "contains spaces or control characters", "percent-encode them")
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidRequest("url", f"must use http or https, not {parts.scheme or 'no scheme'!r}", hint)
    if not parts.hostname:
        raise InvalidRequest("url", "has no host", hint)
    if parts.username is not None or parts.password is not None:
        raise InvalidRequest("url", "carries a user name or password", "send credentials in headers instead")
    try:
        parts.port
    except ValueError:
        raise InvalidRequest("url", "has a port that is not a number from 0 to 65535", hint) from None
    return value


def _headers(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise InvalidRequest("headers", "must be an object of header names to values", 'e.g. {"Authorization": "Bearer ..."}')
    headers = {}
    for key, text in value.items():
        if not isinstance(key, str) or not _HEADER_NAME.fullmatch(key):
            raise InvalidRequest("headers", f"{key!r} is not a header name", "use letters, digits and -")
        # A newline in a value would let the definition forge headers or a second request.
        if not isinstance(text, str) or len(text) > 8192 or any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in text):
            raise InvalidRequest(f"headers.{key}", "must be a single-line string of at most 8192 characters")
        headers[key] = text
    return headers


def _address(value: Any, field: str) -> str:
    # A newline or comma here would add headers or recipients to every message the channel sends.
    if not isinstance(value, str) or len(value) > 254 or not _ADDRESS.fullmatch(value) or not value.isprintable():
        raise InvalidRequest(field, f"{value!r} is not an email address", "give a bare address such as oncall@example.com")
    return value


# --- sending ---------------------------------------------------------------------------------


def deliver(channel: Channel, note: Notification, smtp: SmtpSettings = SmtpSettings(), timeout_s: float = 10.0) -> None:
    """Send `note` through `channel`, waiting at most about `timeout_s` for any one step.

    HTTP and SMTP timeouts bound each network operation; a command is killed, with every
    process it started, once `timeout_s` has passed.

    Raises:
        DeliveryError: the channel did not accept the notification.
    """
    send = _SENDERS.get(channel.type)
    if send is None:
        raise DeliveryError(f"channel {channel.name!r}: unknown type {channel.type!r}")
    try:
        send(channel, note, smtp, timeout_s)
    except DeliveryError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a library raises is a failed delivery, never a stuck queue
        # an HTTP library's message may quote the URL, whose path is a secret: name the error only
        detail = type(exc).__name__ if channel.type in ("webhook", "slack") else f"{type(exc).__name__}: {exc}"
        raise DeliveryError(f"channel {channel.name!r}: failed unexpectedly ({detail})") from exc


def _send_webhook(channel: Channel, note: Notification, smtp: SmtpSettings, timeout_s: float) -> None:
    _post_json(channel, note.payload(), dict(channel.config.get("headers", {})), timeout_s)


def _send_slack(channel: Channel, note: Notification, smtp: SmtpSettings, timeout_s: float) -> None:
    _post_json(channel, slack_body(note), {}, timeout_s)


def slack_body(note: Notification) -> dict[str, Any]:
    """A Slack-compatible incoming-webhook body: the summary, then the facts as fields."""
    summary = _slack_escape(summary_line(note))
    job = "-" if note.job_id is None else str(note.job_id) + (f" ({note.job_name})" if note.job_name else "")
    facts = [("Job", job), ("Severity", note.severity), ("Value", _text_value(note.value)),
             ("Fired", _iso(note.fired_at))]
    if note.resolved_at is not None:
        facts.append(("Resolved", _iso(note.resolved_at)))
    if note.user:
        facts.append(("User", note.user))
    return {
        "text": summary,  # what notifications and clients without blocks show
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": summary[:3000]}},
            {"type": "section", "fields": [
                {"type": "mrkdwn", "text": f"*{label}*\n{_slack_escape(value)[:1900]}"} for label, value in facts
            ]},
            {"type": "context", "elements": [
                {"type": "mrkdwn", "text": _slack_escape(f"rule {note.rule}: {note.condition} · firing {note.firing_id}")[:2900]},
            ]},
        ],
    }


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A webhook that moves is misconfigured; following it would re-send the payload elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_RefuseRedirects)


def _post_json(channel: Channel, body: Any, headers: dict[str, str], timeout_s: float) -> None:
    url = str(channel.config["url"])
    where = _host(url)
    request = urllib.request.Request(
        url, data=json.dumps(body, allow_nan=False).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "corral", **headers},
    )
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            response.read(64 * 1024)
    except urllib.error.HTTPError as exc:
        excerpt = _redact(_excerpt(exc), url)
        exc.close()
        raise DeliveryError(f"channel {channel.name!r}: {where} answered HTTP {exc.code}"
                            + (f": {excerpt}" if excerpt else "")) from None
    except urllib.error.URLError as exc:
        reason = exc.reason if isinstance(exc.reason, BaseException) else OSError(str(exc.reason))
        raise DeliveryError(f"channel {channel.name!r}: POST to {where} failed: {_redact(_why(reason, timeout_s), url)}") from None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a timeout, reset or garbage while reading the answer
        raise DeliveryError(f"channel {channel.name!r}: POST to {where} failed: {_redact(_why(exc, timeout_s), url)}") from None


def _send_email(channel: Channel, note: Notification, smtp: SmtpSettings, timeout_s: float) -> None:
    config = channel.config
    host = config.get("smtp_host", smtp.host)
    port = config.get("smtp_port", smtp.port)
    sender = config.get("sender", smtp.sender)
    to = list(config["to"])
    # The server's credentials (and its TLS setting) belong to the server's own relay: a channel
    # that names another host must not be able to collect them.
    own_relay = (host, port) == (smtp.host, smtp.port)
    message = email_message(note, sender, to)
    where = f"{host}:{port}"
    try:
        client = smtplib.SMTP(host, port, timeout=min(timeout_s, smtp.timeout_s))
        try:
            if own_relay and smtp.starttls:
                client.ehlo()
                if not client.has_extn("starttls"):
                    raise DeliveryError(
                        f"channel {channel.name!r}: the mail server {where} does not offer STARTTLS, and [smtp] "
                        "starttls = true asks for it (set starttls = false in the [smtp] section of the server's "
                        "config.toml for a relay without TLS, such as one on this machine or this network; mail and "
                        "any password then cross the network unencrypted)")
                client.starttls(context=ssl.create_default_context())
            if own_relay and smtp.username:
                client.login(smtp.username, smtp.password or "")
            refused = client.send_message(message, from_addr=sender, to_addrs=to)
        except BaseException:
            client.close()
            raise
        _quit(client)
    except smtplib.SMTPRecipientsRefused as exc:
        raise DeliveryError(f"channel {channel.name!r}: {where} refused every recipient: {_refusals(exc.recipients)}") from None
    except smtplib.SMTPResponseException as exc:
        raise DeliveryError(f"channel {channel.name!r}: {where} answered {exc.smtp_code} {_smtp_text(exc.smtp_error)}") from None
    except smtplib.SMTPException as exc:
        raise DeliveryError(f"channel {channel.name!r}: mail to {where} failed: {exc}") from None
    except OSError as exc:
        raise DeliveryError(f"channel {channel.name!r}: cannot reach mail server {where}: {_why(exc, timeout_s)}") from None
    if refused:
        # The others have the message; failing the delivery would send it to them again on every retry.
        log.warning("channel %r: %s refused some recipients: %s", channel.name, where, _refusals(refused))


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
        ("Job", job), ("User", note.user or "-"), ("Value", _text_value(note.value)),
        ("Fired at", _iso(note.fired_at)),
        ("Resolved at", _iso(note.resolved_at) if note.resolved_at is not None else "-"),
        ("Firing", str(note.firing_id)),
    ]
    facts = "\n".join(f"{label + ':':<13}{value}" for label, value in rows)
    message.set_content(f"{summary_line(note)}\n\n{note.message}\n\n{facts}\n\n-- \nSent by corral\n")
    return message


def _send_command(channel: Channel, note: Notification, smtp: SmtpSettings, timeout_s: float) -> None:
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
        "CORRAL_ALERT_VALUE": "" if note.value is None else _text_value(note.value),
    }
    return {key: value.replace("\0", "") for key, value in values.items()}  # exec refuses NUL in the environment


_SENDERS: dict[str, Callable[[Channel, Notification, SmtpSettings, float], None]] = {
    "webhook": _send_webhook, "slack": _send_slack, "email": _send_email, "command": _send_command,
}


# --- small pieces ----------------------------------------------------------------------------


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _json_value(value: float | str | None) -> float | str | None:
    """NaN and infinities as strings: bare NaN is not JSON, and "loss is NaN" is a common alert."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _text_value(value: float | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.6g}"
    return str(_json_value(value))


def _slack_escape(text: str) -> str:
    # Slack reads <...> as links and mentions; these three are the escapes it documents.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _host(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{parts.port}" if parts.port else host


def _redact(text: str, url: str) -> str:
    """`text` without the URL's path or query, which may be the secret that authorizes it."""
    parts = urlsplit(url)
    for secret in sorted((parts.path, parts.query), key=len, reverse=True):
        if len(secret) > 1:
            text = text.replace(secret, "/…")
    return text


def _why(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, TimeoutError) or str(exc) == "timed out":
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is it running, on that port?)"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"its TLS certificate is not trusted ({exc.verify_message})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _excerpt(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read(_EXCERPT_BYTES)
    except (OSError, ValueError):
        return ""
    return " ".join(raw.decode("utf-8", "replace").split())


def _tail(file: IO[bytes]) -> str:
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - _EXCERPT_BYTES))
    return " ".join(file.read().decode("utf-8", "replace").split())


def _quit(client: smtplib.SMTP) -> None:
    """End a session whose message was accepted; a failure now must not make the delivery look failed."""
    try:
        client.quit()
    except (smtplib.SMTPException, OSError):
        client.close()


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


def _refusals(recipients: Mapping[str, tuple[int, bytes]]) -> str:
    return "; ".join(f"{address} ({code} {_smtp_text(text)})" for address, (code, text) in recipients.items())


def _smtp_text(text: bytes | str) -> str:
    return " ".join((text.decode("utf-8", "replace") if isinstance(text, bytes) else text).split())
