"""One HTTP request to the corral server, on a bare socket: `corral submit/queue/show/cancel/logs` and
Slurm's commands make one or two calls and exit, so they skip http.client, ssl and even the `socket`
module's Python layer (their imports alone cost more than the call). `corral.client.Client`, which keeps
a connection open for many calls, is the SDK's and the MCP server's.

Over the home's Unix socket the server learns the caller from the kernel (SO_PEERCRED); over TCP,
`$CORRAL_TOKEN` says who the caller is, as for `corral`.
"""

from __future__ import annotations

import _socket
import os

from corral import lean_json as json
from corral.errors import InvalidRequest, ServerUnavailable, error_from_answer
from corral.home import resolve_home
from corral.server_address import chosen_url, locate, no_server_message, retrying_rate_limits

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TIMEOUT_S = 60.0


class Server:
    """Where to send requests: found once per command, as `corral` finds it (`--url`/`$CORRAL_URL`, the
    home's address file, the machine's shared service)."""

    def __init__(self, url: str | None = None, home: str | None = None) -> None:
        self.url, self.socket_path = locate(url, home)
        self.home = home
        self.explicit = chosen_url(url)[1]
        rest = self.url.partition("://")[2]
        hostport = rest.partition("/")[0]
        host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "80")
        self.address = (host.strip("[]"), int(port or 80))
        self.token = os.environ.get("CORRAL_TOKEN") or None

    def require_http(self) -> Server:
        """This server, if its URL is one corral can speak to (what `corral.client.Client` checks first)."""
        if self.url.partition("://")[0] != "http" or not self.address[0]:
            raise InvalidRequest("url", f"cannot use {self.url!r}", "give http://HOST:PORT; for https, put a TLS proxy in front")
        return self

    def ask(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer to one request, as `corral.client.Client` makes it: a 429 is sent again after the
        server's Retry-After, and a refusal raises the CorralError the server named (NotFound, InvalidRequest
        with its problems, ...), so `corral` prints what it printed through Client."""
        status, _, data = self.answer(method, path, body)
        if status >= 400:
            raise error_from_answer(status, data)
        return json.loads(data) if data else None

    def answer(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body); a 429 (not processed) is sent again after the server's Retry-After."""
        return retrying_rate_limits(lambda: self._exchange(method, path, body))

    def _exchange(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], bytes]:
        payload = json.dumps(body).encode() if body is not None else b""
        head = [f"{method} {path} HTTP/1.1", "Host: localhost", "Connection: close", "Accept: application/json",
                f"Content-Length: {len(payload)}"]
        if body is not None:
            head.append("Content-Type: application/json")
        if self.token:
            head.append(f"Authorization: Bearer {self.token}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode() + payload
        try:
            sock = self._connect()
            try:
                sock.sendall(request)
                chunks = []
                while True:
                    chunk = sock.recv(262144)
                    if not chunk:
                        break
                    chunks.append(chunk)
            finally:
                sock.close()
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            advice = "check the URL" if self.explicit else no_server_message(resolve_home(self.home))
            raise ServerUnavailable(f"cannot reach the corral server at {self.url}: {reason}; {advice}") from None
        return _parse_response(b"".join(chunks), self.url)

    def _connect(self) -> _socket.socket:
        if self.socket_path:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            sock.settimeout(TIMEOUT_S)
            try:
                sock.connect(self.socket_path)
            except OSError:
                sock.close()
                raise
            return sock
        error: OSError = OSError("no address")
        for family, kind, protocol, _, address in _socket.getaddrinfo(*self.address, 0, _socket.SOCK_STREAM):
            sock = _socket.socket(family, kind, protocol)
            sock.settimeout(TIMEOUT_S)
            try:
                sock.connect(address)
                return sock
            except OSError as exc:
                sock.close()
                error = exc
        raise error


def _parse_response(response: bytes, url: str) -> tuple[int, dict[str, str], bytes]:
    head, separator, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if not separator or len(parts) < 2 or not parts[1].isdigit():
        raise ServerUnavailable(f"the corral server at {url} closed the connection without an answer")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _unchunk(body)
    elif "content-length" in headers:
        body = body[:int(headers["content-length"])]
    return int(parts[1]), headers, body


def _unchunk(body: bytes) -> bytes:
    out = []
    at = 0
    while True:
        end = body.find(b"\r\n", at)
        if end < 0:
            break
        size = int(body[at:end].split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(body[end + 2:end + 2 + size])
        at = end + 2 + size + 2
    return b"".join(out)
