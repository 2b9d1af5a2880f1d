"""The daemon's outer guard: a pure ASGI middleware, so it covers streaming routes too.

What it refuses, before any route runs:
- a `Host` that is not the address the connection came in on (or `localhost` for a
  loopback address), nor one of `server.allowed_hosts`: DNS rebinding points a
  foreign name at 127.0.0.1, so only names we were told about may reach us (403);
- a browser `Origin` (or `Sec-Fetch-Site: cross-site`) that is not the daemon's own
  origin: a page elsewhere must not drive the daemon. Same-origin requests — a
  console served by the daemon itself — pass (403);
- a POST/PUT/PATCH, or any request with a body, whose `Content-Type` is not
  `application/json`. A cross-site page can send `text/plain` or a form without a
  CORS preflight, but not JSON; bodyless DELETEs are always preflighted (415);
- a body over `max_body_bytes`: refused from `Content-Length` before a byte is read,
  and counted chunk by chunk from `receive()` otherwise, so it is never read whole
  (413);
- a request with both Transfer-Encoding and Content-Length (400, closed): h11 reads the
  chunks, so the length must not stand for the body's size, and the pair is smuggling;
- a body that arrives too slowly (408): one that stalls longer than
  `body_idle_seconds`, one not in whole within `body_deadline_seconds`, and one that
  falls below an average of `body_min_rate` bytes a second once `body_grace_seconds`
  have passed (Apache's mod_reqtimeout rule: a trickle of a byte every few seconds
  never stalls, but it falls behind the rate within the grace);
- what the socket decided (`EdgeSignal`, from frontmind/server/_protocol.py): a
  connection given to a client holding fewer, or a token over its share (503 with
  Retry-After), a chunk announced over the cap (413), a chunked body h11 cannot read
  (400).

And it is the last line for errors: any exception a route lets escape becomes a JSON
500 (logged once here), never a plain-text body.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, urlsplit

import anyio
import msgspec
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actors import Overloaded
from storage import excerpt

from .._exceptions import (
    BadBody,
    BodyTooLarge,
    EdgeError,
    Forbidden,
    RequestTimeout,
    UnsupportedMediaType,
    wire_error,
    wire_message,
    wire_retry_after,
)

__all__ = [
    "EDGE_KEY",
    "Cut",
    "EdgeGuard",
    "EdgeSignal",
    "bearer_token",
    "error_body",
    "loggable_path",
]

log = logging.getLogger("frontmind.daemon")

# Room for a turn with a few images (each up to 5 MB, base64 adds a third); the image
# and message limits themselves are checked per field, with their own 413s.
DEFAULT_MAX_BODY_BYTES = 32 << 20
_CHANGING = frozenset({"POST", "PUT", "PATCH"})
_DEFAULT_PORT = {"http": 80, "https": 443}
_encoder = msgspec.json.Encoder()


def loggable_path(path: str) -> str:
    """A request's path as a log line may quote it: the path is percent-decoded, so a
    client's `%0A` would otherwise end the line and start one of the client's making (a
    forged `ERROR` line); every character that is not printable (controls, line and
    paragraph separators, bidi overrides) goes back to its percent-encoding."""
    if path.isprintable():
        return path
    return "".join(c if c.isprintable() else quote(c, safe="") for c in path)


EDGE_KEY = "frontmind.edge"  # the request scope's `extensions` key of its EdgeSignal
Cut = Literal["evicted", "token_share", "too_large", "malformed"]


@dataclass
class EdgeSignal:
    """One request's line between the socket and the guard.

    The protocol sets `cut` (and wakes the request's `receive`) when the request must
    end; the guard answers it. The guard keeps `received`, the body bytes handed on, so
    the protocol can check an announced chunk against what the body already took; the
    protocol sets `body_in` once the whole request is read.
    """

    cut: Cut | None = None
    detail: str = ""
    received: int = 0
    body_in: bool = False  # the socket has read the whole request (its body too)
    # A turn's answer waiting for a slot (set by its TurnEvents): nothing of it has
    # started, so its connection may be given to a client holding fewer (`evicted`).
    queued: bool = False


def error_body(kind: str, message: str) -> bytes:
    return _encoder.encode({"error": {"type": kind, "message": message}})


def bearer_token(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The credentials of an `Authorization: Bearer …` header; the scheme in any case
    (RFC 9110 §11.1: auth schemes are case-insensitive)."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, credentials = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and credentials.strip():
                return credentials.strip()
            return None
    return None


def _split_host(value: str, default_port: int) -> tuple[str, int] | None:
    """("name", port) from `name[:port]` / `[v6][:port]`, lower-cased; None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        name, sep, rest = value[1:].partition("]")
        if not sep:
            return None
        port_text = rest[1:] if rest.startswith(":") else ("" if not rest else None)
    elif value.count(":") == 1:
        name, _, port_text = value.partition(":")
    elif ":" in value:
        return None  # an unbracketed IPv6 address is not a valid Host
    else:
        name, port_text = value, ""
    if port_text is None or not name:
        return None
    if not port_text:
        return name, default_port
    if not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        return None
    return name, int(port_text)


# A DNS name as a Host header carries it (lower-cased): labels of letters, digits, `-`
# and `_`, between dots, and a final dot allowed.
_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")


def _is_loopback(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class EdgeGuard:
    """Host, Origin, Content-Type and body-size checks, and the catch-all JSON 500."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Iterable[str] = (),
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        body_idle_seconds: float = 30.0,
        body_deadline_seconds: float = 120.0,
        body_min_rate: float = 1024.0,
        body_grace_seconds: float = 5.0,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_idle_seconds = body_idle_seconds
        self.body_deadline_seconds = body_deadline_seconds
        self.body_min_rate = body_min_rate  # bytes a second; 0: no minimum
        self.body_grace_seconds = body_grace_seconds
        # "name" allows that name on any port (a proxy in front); "name:port" that port.
        self.any_port: set[str] = set()
        self.exact: set[tuple[str, int]] = set()
        for entry in allowed_hosts:
            parsed = _split_host(entry, -1)
            if parsed is not None and not _HOST_NAME.fullmatch(parsed[0]):
                try:
                    ipaddress.ip_address(parsed[0])
                except ValueError:
                    parsed = None
            if parsed is None:
                # `*` or `.example.com` (other frameworks' patterns) matched no Host, and
                # every request through the proxy was refused 403, one by one.
                hint = (
                    ": there are no patterns (`*`, a leading `.`); list each host name"
                    if "*" in entry or entry.strip().startswith(".")
                    else ""
                )
                raise ValueError(f"server.allowed_hosts: {entry!r} is not a host[:port]{hint}")
            if parsed[1] == -1:
                self.any_port.add(parsed[0])
            else:
                self.exact.add(parsed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        close = False  # set when the body is refused part-read: the connection must go
        edge: EdgeSignal | None = scope.get("extensions", {}).get(EDGE_KEY)

        def closing() -> bool:
            # An answer before the body is all in ends the connection (the socket does
            # not wait for the rest): say so, or a client would send its next request
            # on a connection being closed.
            return close or (edge is not None and not edge.body_in)

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if closing():
                    headers = [*message["headers"], (b"connection", b"close")]
                    message = {**message, "headers": headers}
            await send(message)

        try:
            if edge is not None and edge.cut is not None:
                raise self._cut_error(edge)
            length = self._check(scope)
        except (EdgeError, Overloaded) as exc:
            close = isinstance(exc, BodyTooLarge | BadBody | Overloaded)
            await _send_error(send, exc, close=closing())
            return

        received = 0
        body_done = False
        started_at = anyio.current_time()

        async def capped_receive() -> Message:
            nonlocal received, body_done, close
            if body_done:
                return await receive()
            wait, late = self._body_wait(received, anyio.current_time() - started_at)
            message: Message | None = None
            if wait > 0:
                with anyio.move_on_after(wait):
                    message = await receive()
            if message is None:
                close = True
                raise RequestTimeout(late)
            if edge is not None and edge.cut is not None:
                close = True
                raise self._cut_error(edge)
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if edge is not None:
                    edge.received = received
                if received > self.max_body_bytes:
                    close = True
                    raise BodyTooLarge(self._too_large())
                body_done = not message.get("more_body", False)
            else:
                body_done = True
            return message

        try:
            await self.app(scope, capped_receive if length != 0 else receive, tracked_send)
        except ClientDisconnect:
            return  # gone mid-body: no one to answer, and nothing went wrong here
        except Exception as exc:  # the edge's last line: JSON, never a plain-text trace
            status, _ = wire_error(exc)
            if status >= 500:
                path = loggable_path(scope["path"])
                log.error("unhandled error on %s %s", scope["method"], path, exc_info=exc)
            if not started:
                await _send_error(send, exc, close=closing())

    def _body_wait(self, received: int, elapsed: float) -> tuple[float, str]:
        """How long the next part of a body may take, and what to say if it is late."""
        waits = [
            (
                self.body_idle_seconds,
                f"the request body stalled for over {self.body_idle_seconds:g} s "
                "(server.body_timeout_s)",
            ),
            (
                self.body_deadline_seconds - elapsed,
                f"the request body was not in within {self.body_deadline_seconds:g} s "
                "(server.body_deadline_s)",
            ),
        ]
        if self.body_min_rate > 0:
            # Behind once `received` is less than the rate times the time past the grace.
            behind_at = self.body_grace_seconds + received / self.body_min_rate
            waits.append(
                (
                    behind_at - elapsed,
                    f"the request body arrived at under {self.body_min_rate:g} bytes a "
                    f"second after {self.body_grace_seconds:g} s (server.body_min_rate)",
                )
            )
        return min(waits)

    def _cut_error(self, edge: EdgeSignal) -> EdgeError | Overloaded:
        if edge.cut == "too_large":
            return BodyTooLarge(
                f"a chunk of the request body is announced over the limit of "
                f"{self.max_body_bytes} bytes (server.max_body_bytes)"
            )
        if edge.cut == "malformed":
            excerpt = edge.detail[:80] + ("…" if len(edge.detail) > 80 else "")
            return BadBody(f"the chunked request body is malformed ({excerpt})")
        if edge.cut == "token_share":
            return Overloaded(
                "this token holds its share of the connections "
                "(server.max_client_connections); retry when one closes"
            )
        return Overloaded(
            "the server's connections are all held and this client holds the most "
            "(server.max_connections, shared fairly); retry"
        )

    def _too_large(self) -> str:
        return (
            f"the request body is over the limit of {self.max_body_bytes} bytes "
            "(server.max_body_bytes)"
        )

    def _check(self, scope: Scope) -> int | None:
        """Raise for a refused request; return the declared Content-Length (or None)."""
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name in headers and name in (b"host", b"content-length", b"origin"):
                raise Forbidden(f"more than one {name.decode()} header")
            headers[name] = value
        server = scope.get("server") or ("", 0)
        host = headers.get(b"host")
        if host is None:
            raise Forbidden("a Host header is required")
        if not self._allowed(host.decode("latin-1"), None, server):
            # Quoted as an excerpt: a head may hold 16 KiB of it.
            raise Forbidden(
                f"Host {excerpt(host.decode('latin-1'))!r} is not this daemon's address; "
                "add it to server.allowed_hosts if it is yours"
            )
        origin = headers.get(b"origin")
        if origin is not None and not self._same_origin(origin.decode("latin-1"), server):
            raise Forbidden(
                f"cross-origin requests are refused (Origin {excerpt(origin.decode('latin-1'))!r})"
            )
        if headers.get(b"sec-fetch-site", b"").lower() == b"cross-site":
            raise Forbidden("cross-site requests are refused (Sec-Fetch-Site)")
        chunked = b"transfer-encoding" in headers
        if chunked and b"content-length" in headers:
            # h11 reads the chunks and ignores the length, which would pass for the
            # body's size here (a `0` uncapped it); and the pair is what request
            # smuggling sends (RFC 9112 §6.3: refuse, or close after answering).
            raise BadBody("a request may not carry both Transfer-Encoding and Content-Length")
        length = _content_length(headers)
        has_body = bool(length) or chunked
        if scope["method"] in _CHANGING or has_body:
            media = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            if media != b"application/json":
                raise UnsupportedMediaType(
                    f"{scope['method']} requests need Content-Type: application/json"
                )
        if length is not None and length > self.max_body_bytes:
            raise BodyTooLarge(self._too_large())
        return length

    def _allowed(self, host: str, scheme: str | None, server: tuple[str, int]) -> bool:
        """`scheme`: the Origin's; None for the Host header, which does not say its own.
        A client leaves its scheme's default port out of both; a Host header without a
        port may then mean 80 or 443 (TLS ends at a proxy in front: a browser at
        https://proxy.example sends `Host: proxy.example`, which "proxy.example:443"
        must allow)."""
        parsed = _split_host(host, -1)
        if parsed is None:
            return False
        name, port = parsed
        if port != -1:
            ports: tuple[int, ...] = (port,)
        elif scheme is None:
            ports = tuple(_DEFAULT_PORT.values())
        else:
            ports = (_DEFAULT_PORT.get(scheme, 80),)
        if name in self.any_port or any((name, p) in self.exact for p in ports):
            return True
        address, bound_port = server[0].lower(), server[1]
        own = name == address or (name == "localhost" and _is_loopback(address))
        return own and bound_port in ports

    def _same_origin(self, origin: str, server: tuple[str, int]) -> bool:
        parts = urlsplit(origin.strip())
        if parts.scheme not in _DEFAULT_PORT or not parts.netloc or parts.path not in ("", "/"):
            return False  # includes "null" (sandboxed frames, file: pages)
        return self._allowed(parts.netloc, parts.scheme, server)


def _content_length(headers: dict[bytes, bytes]) -> int | None:
    raw = headers.get(b"content-length")
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise BodyTooLarge("Content-Length must be a (reasonable) number of bytes")
    return int(raw)


async def _send_error(send: Send, exc: Exception, *, close: bool) -> None:
    status, kind = wire_error(exc)
    body = error_body(kind, wire_message(exc, status))
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    retry = wire_retry_after(exc, status)
    if retry is not None:
        headers.append((b"retry-after", retry.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
