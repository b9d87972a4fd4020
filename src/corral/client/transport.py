"""What a `Client` sends its requests through: one kept-alive `http.client` connection to the server, over TCP
or, when the home has one, the server's Unix socket, with the token, a 429's retries and the reconnects.

`Transport` is `Client`'s base: the server's answers come back as JSON, or as corral's own errors through
`corral.errors.error_from_answer`. Plain `http.client` underneath: the CLI imports this on every call and must
start fast.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.parse
from typing import Any

from corral.errors import InvalidRequest, ServerUnavailable, error_from_answer
from corral.home import resolve_home
from corral.server_address import chosen_url, locate, no_server_message, retrying_rate_limits

# uvicorn closes a kept-alive connection idle for 30 s; reconnect well before rather than
# retry a POST that the server might have seen
IDLE_RECONNECT_S = 20.0


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over the server's Unix socket: the server learns the caller's uid from the kernel (SO_PEERCRED)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class Transport:
    """The requests to one corral server, on a connection kept alive between them."""

    def __init__(self, url: str | None = None, *, home: str | None = None, timeout: float = 60.0,
                 token: str | None = None) -> None:
        """`token`: an API token (`corral token create`), else `$CORRAL_TOKEN`; local callers need none."""
        self.home = resolve_home(home)
        self.url, self._socket = locate(url, home)
        self._explicit_url = chosen_url(url)[1]
        self._token = token or os.environ.get("CORRAL_TOKEN") or None
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname:
            raise InvalidRequest("url", f"cannot use {self.url!r}", "give http://HOST:PORT; for https, put a TLS proxy in front")
        self._host = parts.hostname
        self._port = parts.port or 80
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._last_used = 0.0

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        status, _, data = self._raw(method, path, body)
        if status >= 400:
            raise error_from_answer(status, data)
        return json.loads(data) if data else None

    def _raw(self, method: str, path: str, body: Any = None, *,
             content_type: str = "application/json") -> tuple[int, dict[str, str], bytes]:
        """One request; a 429 (not processed) is tried again after the server's Retry-After, a few times.
        `body`: JSON, or bytes sent as they are with `content_type`."""
        return retrying_rate_limits(lambda: self._send(method, path, body, content_type))

    def _auth(self, headers: dict[str, str]) -> None:
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"

    def _connection(self) -> http.client.HTTPConnection:
        """A connection of its own (a download streams on it while the client's stays free)."""
        return (_UnixConnection(self._socket, self._timeout) if self._socket else
                http.client.HTTPConnection(self._host, self._port, timeout=self._timeout))

    def _send(self, method: str, path: str, body: Any = None,
              content_type: str = "application/json") -> tuple[int, dict[str, str], bytes]:
        if isinstance(body, bytes):
            payload: bytes | None = body
        else:
            payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": content_type} if payload is not None else {}
        self._auth(headers)
        if self._conn is not None and time.monotonic() - self._last_used > IDLE_RECONNECT_S:
            self.close()
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = self._connection()
            try:
                self._conn.request(method, path, body=payload, headers=headers)
                response = self._conn.getresponse()
                data = response.read()
                self._last_used = time.monotonic()
                return response.status, {k.lower(): v for k, v in response.getheaders()}, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # a kept-alive connection the server closed: one fresh try, for reads only
                self.close()
                if attempt == 2 or method != "GET":
                    raise ServerUnavailable(f"the corral server at {self.url} closed the connection") from None
            except OSError as exc:  # refused, unknown host, timeout
                self.close()
                reason = exc.strerror or str(exc) or type(exc).__name__
                advice = "check the URL" if self._explicit_url else no_server_message(self.home)
                raise ServerUnavailable(f"cannot reach the corral server at {self.url}: {reason}; {advice}") from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
