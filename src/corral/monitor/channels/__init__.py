"""Where alerts go: checking a channel's definition, sending one notification through it, and
how long to wait before trying again.

Four kinds of channel: a generic JSON webhook, a Slack-compatible incoming webhook (Slack,
Mattermost, Rocket.Chat), email over SMTP, and a local program. Sending is synchronous and
bounded by a timeout, because the dispatcher calls it from a worker thread; it raises
DeliveryError with a message a person can act on. Messages name a URL's host, never its path:
a Slack webhook's path is its secret.

Here: retries and `deliver`; what is sent (`notification`), checking a definition
(`definitions`), and one module a kind of channel (`webhook`, `mail`, `command`).
"""

from __future__ import annotations

from collections.abc import Callable

from corral.monitor.channels.command import send_command
from corral.monitor.channels.definitions import CHANNEL_TYPES, parse_channel
from corral.monitor.channels.mail import send_email
from corral.monitor.channels.notification import Channel, DeliveryError, Notification, SmtpSettings, summary_line
from corral.monitor.channels.webhook import send_slack, send_webhook

__all__ = [
    "CHANNEL_TYPES", "MAX_ATTEMPTS", "Channel", "DeliveryError", "Notification", "SmtpSettings", "deliver",
    "parse_channel", "retry_delay_s", "summary_line",
]

MAX_ATTEMPTS = 8
FIRST_RETRY_DELAY_S = 5.0
MAX_RETRY_DELAY_S = 600.0


def retry_delay_s(attempt: int) -> float | None:
    """Seconds to wait after failed attempt `attempt` (1-based): 5, 10, 20 ... capped at 600;
    None once MAX_ATTEMPTS have failed."""
    if attempt < 1:
        raise ValueError(f"attempts count from 1, got {attempt}")
    if attempt >= MAX_ATTEMPTS:
        return None
    return min(FIRST_RETRY_DELAY_S * 2 ** (attempt - 1), MAX_RETRY_DELAY_S)


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


_SENDERS: dict[str, Callable[[Channel, Notification, SmtpSettings, float], None]] = {
    "webhook": send_webhook, "slack": send_slack, "email": send_email, "command": send_command,
}
