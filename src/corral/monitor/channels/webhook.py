"""Sending through a generic JSON webhook or a Slack-compatible incoming webhook (Slack, Mattermost,
Rocket.Chat). Messages name a URL's host, never its path: a Slack webhook's path is its secret."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from corral.core.units.iso_times import iso_utc
from corral.monitor.channels.notification import (
    EXCERPT_BYTES, Channel, DeliveryError, Notification, SmtpSettings, failure_reason, summary_line, text_value,
)


def send_webhook(channel: Channel, note: Notification, smtp: SmtpSettings, timeout_s: float) -> None:
    _post_json(channel, note.payload(), dict(channel.config.get("headers", {})), timeout_s)


def send_slack(channel: Channel, note: Notification, smtp: SmtpSettings, timeout_s: float) -> None:
    _post_json(channel, slack_body(note), {}, timeout_s)


def slack_body(note: Notification) -> dict[str, Any]:
    """A Slack-compatible incoming-webhook body: the summary, then the facts as fields."""
    summary = _slack_escape(summary_line(note))
    job = "-" if note.job_id is None else str(note.job_id) + (f" ({note.job_name})" if note.job_name else "")
    facts = [("Job", job), ("Severity", note.severity), ("Value", text_value(note.value)),
             ("Fired", iso_utc(note.fired_at))]
    if note.resolved_at is not None:
        facts.append(("Resolved", iso_utc(note.resolved_at)))
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
        raise DeliveryError(f"channel {channel.name!r}: POST to {where} failed: {_redact(failure_reason(reason, timeout_s), url)}") from None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a timeout, reset or garbage while reading the answer
        raise DeliveryError(f"channel {channel.name!r}: POST to {where} failed: {_redact(failure_reason(exc, timeout_s), url)}") from None


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


def _excerpt(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read(EXCERPT_BYTES)
    except (OSError, ValueError):
        return ""
    return " ".join(raw.decode("utf-8", "replace").split())
