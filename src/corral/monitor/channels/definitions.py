"""Checking a channel's definition: a client's JSON made into a `Channel`, or an `InvalidRequest`
naming the field at fault."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from corral.errors import InvalidRequest
from corral.monitor.channels.notification import Channel

CHANNEL_TYPES = ("webhook", "slack", "email", "command")

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
