"""A flooding client, run as a process of its own so that its work does not slow the
client it floods against (tests/test_connection_shares.py).

    python -m tests._flood idle|slow-body|slow-read URL LOCAL_ADDRESS SLOTS HELD_BUDGET ATTEMPTS

`SLOTS` connections at once from `LOCAL_ADDRESS`, each opened again when the server
closes or answers it, until `HELD_BUDGET` have been held and closed by the server
without an answer (idle) or `ATTEMPTS` have been made. `idle` sends nothing; `slow-body`
sends a POST head (Content-Length 100000) and then a byte a second; `slow-read` (with a
1 KiB receive buffer) sends `PIPELINED` GETs of `SLOW_READ_PATH` at once and reads
nothing: it waits for the server to hang up (an epoll on hang-ups, never on data); a
503 refusal is then read, a reset counts as `dropped`.

Lines on stdout: `full` at the first 503 (the server holds all it may), `dropped` at the
first connection the server reset, `spent` when a budget is used up, and at the end one
JSON object of counts. On stdin: `mark` starts
counting the refusals seen "meanwhile"; end of input stops the flood.
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
import sys
from collections import Counter
from dataclasses import dataclass, field

import anyio
from anyio.abc import SocketStream

from tests._raw import address, answer_or_close

SLOW_PACE_SECONDS = 1.0  # the slow body's pace: a byte a second
SLOW_READ_PATH = "/openapi.json"  # about 50 KB
PIPELINED = 20
_HUNG_UP = select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR


class HangUps:
    """Wakes a slow reader when the server hangs up on its socket: one epoll, on
    hang-ups only (the sockets hold unread data, so they are always readable), itself
    watched by the event loop."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._waiting: dict[int, asyncio.Event] = {}
        asyncio.get_running_loop().add_reader(self._epoll.fileno(), self._ready)

    def _ready(self) -> None:
        for fd, _ in self._epoll.poll(0):
            self._epoll.unregister(fd)
            event = self._waiting.pop(fd, None)
            if event is not None:
                event.set()

    async def wait(self, sock: socket.socket) -> None:
        fd = sock.fileno()
        event = asyncio.Event()
        self._waiting[fd] = event
        self._epoll.register(fd, _HUNG_UP)
        try:
            await event.wait()
        finally:
            if self._waiting.pop(fd, None) is not None:
                self._epoll.unregister(fd)

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self._epoll.fileno())
        self._epoll.close()


@dataclass
class Counts:
    attempts: int = 0
    held: int = 0  # closed by the server without an answer
    answers: Counter[str] = field(default_factory=Counter)
    refused_meanwhile: int = 0
    marked: bool = False
    full_said: bool = False
    spent_said: bool = False
    dropped_said: bool = False


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(kind: str, url: str, local: str, slots: int, held_budget: int, most: int) -> None:
    host, port = address(url)
    counts = Counts()
    head = (
        f"POST /v1/documents HTTP/1.1\r\nhost: {host}:{port}\r\n"
        "content-type: application/json\r\ncontent-length: 100000\r\n\r\n{"
    ).encode()

    def spent() -> bool:
        return counts.held >= held_budget or counts.attempts >= most

    async def one(stream: SocketStream) -> bytes:
        if kind == "idle":
            return await answer_or_close(stream)
        await stream.send(head)
        for _ in range(200):  # a byte a second while no answer comes
            with anyio.move_on_after(SLOW_PACE_SECONDS):
                return await answer_or_close(stream)
            await stream.send(b" ")
        return b""

    gets = f"GET {SLOW_READ_PATH} HTTP/1.1\r\nhost: {host}:{port}\r\n\r\n".encode() * PIPELINED

    async def slow_read() -> str:
        """Connect, send the GETs, read nothing until the server hangs up: "503" if it
        refused the connection, "dropped" if it reset it, "closed" if no connection."""
        loop = asyncio.get_running_loop()
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            sock.setblocking(False)
            try:
                sock.bind((local, 0))
                await loop.sock_connect(sock, (host, port))
                await loop.sock_sendall(sock, gets)
            except OSError:
                pass
            await hang_ups.wait(sock)
            try:
                first = sock.recv(64, socket.MSG_PEEK)
            except OSError:
                first = b""
            return "503" if first.startswith(b"HTTP/1.1 503") else "dropped"

    async def slot() -> None:
        while not spent():
            counts.attempts += 1
            if kind == "slow-read":
                status = await slow_read()
                data = b"-"  # never "held" without an answer
            else:
                try:
                    stream = await anyio.connect_tcp(host, port, local_host=local)
                except OSError:
                    continue
                async with stream:
                    try:
                        data = await one(stream)
                    except (anyio.BrokenResourceError, ConnectionResetError):
                        data = b""
                head = data.startswith(b"HTTP/1.1 ")
                status = data.split(b" ", 2)[1].decode() if head else ""
            counts.answers[status or "closed"] += 1
            counts.held += not data
            if status == "dropped" and not counts.dropped_said:
                counts.dropped_said = True
                say("dropped")
            if status == "503":
                counts.refused_meanwhile += counts.marked
                if not counts.full_said:
                    counts.full_said = True
                    say("full")
            if spent() and not counts.spent_said:
                counts.spent_said = True
                say("spent")

    async def control(tg_scope: anyio.CancelScope) -> None:
        while line := await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True):
            if line.strip() == "mark":
                counts.marked = True
        tg_scope.cancel()

    hang_ups = HangUps()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(control, tg.cancel_scope)
            for _ in range(slots):
                tg.start_soon(slot)
    finally:
        hang_ups.close()
    say(
        json.dumps(
            {
                "attempts": counts.attempts,
                "held": counts.held,
                "answers": dict(counts.answers),
                "refused_meanwhile": counts.refused_meanwhile,
            }
        )
    )


if __name__ == "__main__":
    kind, url, local, slots, held, most = sys.argv[1:7]
    anyio.run(main, kind, url, local, int(slots), int(held), int(most))
