"""Real receivers for alert tests: an HTTP server and an SMTP server on free local ports, and their
fixtures (`http`, `smtp_server`; a plugin of tests/conftest.py)."""

from __future__ import annotations

import socket
import threading
from email import message_from_bytes
from email.message import Message
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Iterator
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


class HttpReceiver:
    """A real HTTP server on a free port that records each request and answers as told."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.answer = b"ok"
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append({"path": self.path, "headers": self.headers, "body": body})
                self.send_response(receiver.status)
                self.send_header("Content-Length", str(len(receiver.answer)))
                self.end_headers()
                self.wfile.write(receiver.answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class MailCollector:
    """An aiosmtpd handler that keeps every message and refuses addresses at nowhere.test."""

    def __init__(self) -> None:
        self.envelopes: list[Any] = []
        self.logins: list[tuple[str, str]] = []

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):  # noqa: N802 (aiosmtpd's hook name)
        if address.endswith("@nowhere.test"):
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):  # noqa: N802
        self.envelopes.append(envelope)
        return "250 Message accepted"

    def authenticate(self, server, session, envelope, mechanism, auth_data):
        self.logins.append((auth_data.login.decode(), auth_data.password.decode()))
        return AuthResult(success=auth_data.password == b"hunter2")

    def message(self, index: int = 0) -> Message:
        return message_from_bytes(self.envelopes[index].content, policy=default_policy)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_smtp(collector: MailCollector, **kwargs: Any) -> Controller:
    controller = Controller(collector, hostname="127.0.0.1", port=free_port(), **kwargs)
    controller.start()
    return controller


@pytest.fixture
def http() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver()
    yield receiver
    receiver.close()


@pytest.fixture
def smtp_server() -> Iterator[tuple[MailCollector, int]]:
    collector = MailCollector()
    controller = start_smtp(collector)
    yield collector, controller.port
    controller.stop()
