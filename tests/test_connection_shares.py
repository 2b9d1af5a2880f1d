"""Connections shared fairly (issue 27, item 3), on real sockets: the daemon child (or the
app served on a real socket) against raw clients from distinct loopback addresses —
127.0.0.2 as the flooding client, 127.0.0.1 (and others) as the rest. Linux routes
all of 127.0.0.0/8 to loopback, so each is a client address of its own."""

from __future__ import annotations

import json
import math
import re
import resource
import select
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import ByteSendStream, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from frontmind import Config, Frontmind
from frontmind._exceptions import ConfigError
from frontmind._frontmind import NoModel
from frontmind.config import ServerConfig, load_config
from frontmind.server._asgi import ServedApp, SocketLimits, serve_app
from frontmind.server._daemon import build_app, socket_limits
from frontmind.server._shares import Backlogs
from tests._daemon import ROOT, Daemon, child_env, daemon, reap, sse_events
from tests._raw import (
    RawResponse,
    address,
    answer_or_close,
    closed_by_server,
    raw_request,
    read_response,
)

# Floods measure a daemon's fairness on a busy machine: `dev.py test` runs them in one
# test process, one after another, never two floods at once.
pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("floods")]

FLOODER = "127.0.0.2"


def raise_open_files(needed: int) -> None:
    """The soft RLIMIT_NOFILE up to `needed` (at most the hard limit), before any daemon
    child starts (it inherits it); skip if the hard limit is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < needed:
        pytest.skip(f"needs {needed} open files; the hard limit is {hard}")


def write_config(data_dir: Path, text: str) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "frontmind.toml").write_text(text)


def request_head(url: str, method: str = "GET", path: str = "/healthz", extra: str = "") -> bytes:
    host, port = address(url)
    return f"{method} {path} HTTP/1.1\r\nhost: {host}:{port}\r\n{extra}\r\n".encode()


async def connect(url: str, local: str) -> SocketStream:
    host, port = address(url)
    return await anyio.connect_tcp(host, port, local_host=local)


def status_of(data: bytes) -> int | None:
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None


@dataclass
class Victim:
    """Another client's turns, each on a new connection (the hard case: it needs a slot)."""

    flood_on: Callable[[], bool]
    # Whether to go on past `turns` (a time, or the flood's own course). The flood goes
    # on meanwhile either way: a turn counts as under it by `flood_on` alone, never by
    # a time window (on a loaded machine the first turns outlast a window).
    keep_going: Callable[[], bool] | None = None
    completed: int = 0
    under_flood: int = 0  # turns begun while the flood went on
    completed_under_flood: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    heads: list[float] = field(default_factory=list)

    async def run(self, d: Daemon, turns: int, workers: int = 4, most: int = 400) -> None:
        """`workers` conversations at once, `turns` turns in all at least, and more
        while the flood goes on (`most` at most)."""
        begun = 0
        keep_going = self.keep_going or self.flood_on

        async def worker(k: int) -> None:
            nonlocal begun
            while (begun < turns or keep_going()) and begun < most:
                begun += 1
                flooded = self.flood_on()
                self.under_flood += flooded
                if await self.one_turn(d, f"victim-{k}", begun):
                    self.completed += 1
                    self.completed_under_flood += flooded

        async with anyio.create_task_group() as tg:
            for k in range(workers):
                tg.start_soon(worker, k)

    def report(self) -> str:
        def p50(values: list[float]) -> str:
            return f"{sorted(values)[len(values) // 2]:.3f} s" if values else "-"

        return (
            f"{self.completed_under_flood}/{self.under_flood} of the turns begun during the "
            f"flood completed ({self.completed} in all); a turn's p50 {p50(self.seconds)}, "
            f"max {max(self.seconds, default=0):.3f} s, its response head's p50 {p50(self.heads)}"
        )

    async def one_turn(self, d: Daemon, continuum: str, i: int) -> bool:
        started = time.perf_counter()
        limits = httpx2.Limits(max_keepalive_connections=0)
        try:
            async with (
                d.client(limits=limits) as client,
                client.stream(
                    "POST", f"/v1/continuums/{continuum}/turns", json={"message": f"turn {i}"}
                ) as response,
            ):
                self.heads.append(time.perf_counter() - started)
                if response.status_code != 200:
                    body = (await response.aread())[:200]
                    self.failures.append(f"{response.status_code} {body!r}")
                    return False
                names = [name async for name, _ in sse_events(response)]
        except httpx2.HTTPError as exc:
            self.failures.append(repr(exc))
            return False
        if names and names[-1] == "turn.completed":
            self.seconds.append(time.perf_counter() - started)
            return True
        self.failures.append(f"ended with {names[-1:]}")
        return False


@dataclass
class FloodProcess:
    """The flooding client's process (tests/_flood.py) as the test sees it."""

    stdin: ByteSendStream
    full: anyio.Event = field(default_factory=anyio.Event)  # it saw the first 503
    spent: bool = False  # its budget is used up: it only holds what it has
    dropped: bool = False  # the server has reset one of its connections
    result: dict[str, Any] = field(default_factory=dict)

    async def mark(self) -> None:
        await self.stdin.send(b"mark\n")


@asynccontextmanager
async def flood(
    kind: str, url: str, slots: int, held: int, most: int
) -> AsyncIterator[FloodProcess]:
    command = [sys.executable, "-m", "tests._flood", kind, url, FLOODER]
    command += [str(slots), str(held), str(most)]
    process = await anyio.open_process(command, cwd=ROOT, env=child_env())
    assert process.stdin is not None
    assert process.stdout is not None
    lines = BufferedByteReceiveStream(process.stdout)
    state = FloodProcess(process.stdin)
    try:
        async with anyio.create_task_group() as tg:

            async def read() -> None:
                while True:
                    line = (await lines.receive_until(b"\n", 100_000)).decode()
                    if line == "full":
                        state.full.set()
                    elif line == "spent":
                        state.spent = True
                    elif line == "dropped":
                        state.dropped = True
                    else:
                        state.result = json.loads(line)
                        return

            tg.start_soon(read)
            with anyio.fail_after(60):
                await state.full.wait()  # the server holds all it may
            yield state
            await process.stdin.aclose()  # the flood ends
    finally:
        await reap(process)


@pytest.mark.slow
async def test_an_idle_flood_from_one_address_leaves_another_clients_turns(
    tmp_path: Path,
) -> None:
    """1,200 idle sockets at once against 1,000 connections (the default cap), each
    re-opened as the daemon closes it (at its header timeout, or to give its place to
    the other client), until the daemon has taken and closed 3,000 of them."""
    raise_open_files(6000)
    write_config(tmp_path, "[server]\nheader_timeout_s = 3\n")
    async with daemon(tmp_path) as d:
        calm = Victim(lambda: False)
        await calm.run(d, 8)  # the same turns without a flood, for the report
        async with flood("idle", d.url, slots=1200, held=3000, most=100_000) as flooding:
            victim = Victim(lambda: not flooding.spent)
            await flooding.mark()
            with anyio.fail_after(50):
                await victim.run(d, 20)
        print(
            f"\nwithout a flood: {calm.report()}\nidle flood: {victim.report()}; {flooding.result}"
        )
        assert victim.under_flood >= 12, "the victim's turns overlapped the flood"
        assert victim.completed_under_flood >= 0.9 * victim.under_flood, victim.failures[:5]
        assert flooding.result["refused_meanwhile"] > 0, "the daemon was full meanwhile"
        assert (await raw_request(d.url, request_head(d.url))).status == 200
        assert await d.stop() == 0


@pytest.mark.slow
async def test_a_slow_body_flood_from_one_address_leaves_another_clients_turns(
    tmp_path: Path,
) -> None:
    """1,200 slow bodies at once (Content-Length 100000, a byte a second), each re-opened
    when the daemon answers it, against the default limits; the victim's turns go on
    for 20 at least and past the first wave of cuts (body_grace_s = 5 s)."""
    raise_open_files(6000)
    async with daemon(tmp_path) as d:
        async with flood("slow-body", d.url, slots=1200, held=100_000, most=100_000) as flooding:
            await flooding.mark()
            started = time.perf_counter()
            victim = Victim(lambda: not flooding.spent, lambda: time.perf_counter() - started < 8)
            with anyio.fail_after(50):
                await victim.run(d, 20)
        print(f"\nslow-body flood: {victim.report()}; {flooding.result}")
        assert victim.under_flood >= 20
        assert victim.completed_under_flood >= 0.9 * victim.under_flood, victim.failures[:5]
        answers = flooding.result["answers"]
        assert flooding.result["refused_meanwhile"] > 0, "the daemon was full meanwhile"
        assert answers.get("408", 0) > 0, "slow bodies were cut (body_min_rate)"
        assert await d.stop() == 0


@pytest.mark.slow
async def test_a_slow_read_flood_from_one_address_leaves_another_clients_turns(
    tmp_path: Path,
) -> None:
    """1,100 connections at once with a 1 KiB receive buffer, each sending 20 pipelined
    GETs of /openapi.json and reading nothing, each re-opened as the daemon drops or
    refuses it, against 500 connections: stalled connections are taken for the other
    client, and dropped at their send timeout or when their address's paused responses
    hold too much. (At the default 1,000 the flood may never fill the daemon: past 64
    MiB its paused connections are dropped as they pause.)"""
    raise_open_files(6000)
    write_config(tmp_path, "[server]\nmax_connections = 500\nsend_timeout_s = 2\n")
    async with daemon(tmp_path) as d:
        async with flood("slow-read", d.url, slots=1100, held=100_000, most=100_000) as flooding:
            await flooding.mark()
            started = time.perf_counter()
            # On until a stalled reader has been dropped (the event the test is about:
            # at 2 s of its send timeout, later on a loaded machine), 15 s at least.
            victim = Victim(
                lambda: not flooding.spent,
                lambda: (
                    not flooding.spent
                    and (not flooding.dropped or time.perf_counter() - started < 15)
                ),
            )
            with anyio.fail_after(60):
                await victim.run(d, 12)
        print(f"\nslow-read flood: {victim.report()}; {flooding.result}")
        assert victim.under_flood >= 12, "the victim's turns overlapped the flood"
        assert victim.completed_under_flood >= 0.9 * victim.under_flood, victim.failures[:5]
        assert flooding.result["refused_meanwhile"] > 0, "the daemon was full meanwhile"
        assert flooding.result["answers"].get("dropped", 0) > 0, "stalled readers were dropped"
        assert (await raw_request(d.url, request_head(d.url))).status == 200
        assert await d.stop() == 0


# --- the same rules in one process, on a real socket -----------------------------------


@asynccontextmanager
async def served(
    tmp_path: Path, limits: SocketLimits | None = None, **options: object
) -> AsyncIterator[ServedApp]:
    async with (
        Frontmind.open(tmp_path, Config(), model=NoModel()) as fm,
        serve_app(build_app(fm, **options), limits=limits) as app,  # type: ignore[arg-type]
    ):
        yield app


async def send_paced(stream: SocketStream, data: bytes, every: float, pieces: int) -> RawResponse:
    """Send `data` `pieces` times, one every `every` seconds, until the server answers."""
    for _ in range(pieces):
        await stream.send(data)
        with anyio.move_on_after(every):
            return await read_response(stream)
    raise AssertionError("no answer while the body trickled")


async def test_slow_bodies_are_cut_by_their_rate_and_their_deadline(tmp_path: Path) -> None:
    head = "POST /v1/documents HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n"
    async with served(
        tmp_path,
        body_idle_seconds=30,
        body_deadline_seconds=2.0,
        body_min_rate=200,
        body_grace_seconds=0.5,
    ) as app:
        host, port = address(app.url)
        first = (head.format(f"{host}:{port}") + "content-length: 100000\r\n\r\n").encode()
        # A byte every 0.1 s never pauses long, but falls below 200 bytes a second.
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(first)
            started = time.perf_counter()
            response = await send_paced(stream, b" ", 0.1, 100)
            assert response.status == 408
            assert "server.body_min_rate" in response.json()["error"]["message"]
            assert 0.5 <= time.perf_counter() - started < 5, "after the grace, long before 30 s"
            assert response.headers["connection"] == "close"
            assert await closed_by_server(stream, within=3)
        # 100 bytes every 0.1 s keeps above the rate, but the whole body is late.
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(first)
            started = time.perf_counter()
            response = await send_paced(stream, b" " * 100, 0.1, 100)
            assert response.status == 408
            assert "server.body_deadline_s" in response.json()["error"]["message"]
            assert 2.0 <= time.perf_counter() - started < 6
        # A body that comes at a reasonable pace is taken.
        async with await anyio.connect_tcp(host, port) as stream:
            doc = b'{"label": "paced", "content": "' + b"x" * 400 + b'"}'
            head_bytes = head.format(f"{host}:{port}") + f"content-length: {len(doc)}\r\n\r\n"
            await stream.send(head_bytes.encode())
            pieces = [doc[i : i + 100] for i in range(0, len(doc), 100)]
            response = RawResponse(0, {}, b"")
            for piece in pieces:
                await stream.send(piece)
                with anyio.move_on_after(0.1):
                    response = await read_response(stream)
            if response.status == 0:
                response = await read_response(stream)
            assert response.status == 201, response.body


async def test_a_chunk_announced_over_the_cap_is_refused_at_once(tmp_path: Path) -> None:
    limits = SocketLimits(max_connections=3, max_body_bytes=2000)
    async with served(tmp_path, limits, max_body_bytes=2000) as app:
        host, port = address(app.url)
        head = request_head(
            app.url,
            "POST",
            "/v1/documents",
            "content-type: application/json\r\ntransfer-encoding: chunked\r\n",
        )
        kept_open = []
        try:
            for chunks in [
                b"FFFFFFFFFFFFFFFFFFFF\r\n{",  # 2^80 - 1: the most h11 reads
                b"100000000000000000000\r\n{",  # 2^80, one hex digit more
                b"3e8\r\n" + b"x" * 1000 + b"\r\n3e9\r\n",  # 1000, then 1001 announced
            ]:
                stream = await anyio.connect_tcp(host, port)
                kept_open.append(stream)  # the client never closes nor sends more
                started = time.perf_counter()
                await stream.send(head + chunks)
                response = await read_response(stream)
                assert time.perf_counter() - started < 3, "at once, not after a timeout (30 s)"
                assert response.status == 413, response.body
                assert "server.max_body_bytes" in response.json()["error"]["message"]
                assert response.headers["connection"] == "close"
            # Those three hold no slot any more, though their clients keep them open.
            assert (await raw_request(app.url, request_head(app.url))).status == 200
            # A chunk size that is no number is a JSON 400, framed by Content-Length.
            response = await raw_request(app.url, head + b"zz\r\n{")
            assert response.status == 400
            assert "chunked request body is malformed" in response.json()["error"]["message"]
        finally:
            for stream in kept_open:
                await stream.aclose()


async def test_a_chunked_body_with_a_content_length_is_refused_unread(tmp_path: Path) -> None:
    # Transfer-Encoding overrides Content-Length (h11 reads the chunks), so a
    # `content-length: 0` beside it must not let the body past the cap and the body
    # deadlines; and such a request is what smuggling looks like (RFC 9112 §6.3: close).
    limits = SocketLimits(max_body_bytes=2000)
    async with served(tmp_path, limits, max_body_bytes=2000) as app:
        doc = b'{"label": "smuggled", "content": "' + b"x" * 3000 + b'"}'
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(doc[i : i + 500]), doc[i : i + 500])
            for i in range(0, len(doc), 500)
        )
        for length in (b"0", str(len(doc)).encode()):
            head = request_head(
                app.url,
                "POST",
                "/v1/documents",
                "content-type: application/json\r\ntransfer-encoding: chunked\r\n"
                f"content-length: {length.decode()}\r\n",
            )
            host, port = address(app.url)
            async with await anyio.connect_tcp(host, port) as stream:
                await stream.send(head + chunks + b"0\r\n\r\n")
                response = await read_response(stream)
                assert response.status == 400, response.body
                assert "Transfer-Encoding" in response.json()["error"]["message"]
                assert response.headers["connection"] == "close"
                assert await closed_by_server(stream, within=3)
        listed = await raw_request(app.url, request_head(app.url, path="/v1/documents"))
        assert listed.json()["documents"] == []


async def test_over_long_request_lines_and_heads_answer_414_and_431(tmp_path: Path) -> None:
    async with served(tmp_path) as app:
        host, port = address(app.url)
        long_line = f"GET /{'a' * 20000} HTTP/1.1\r\nhost: {host}:{port}\r\n\r\n".encode()
        response = await raw_request(app.url, long_line)
        assert response.status == 414
        assert response.json()["error"]["type"] == "uri_too_long"
        assert response.headers["content-type"] == "application/json"
        # Sent in pieces, with no line end: answered once it is over the cap.
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(b"GET /")
            for _ in range(20):
                await stream.send(b"b" * 1024)
            response = await read_response(stream)
            assert response.status == 414
        headers = "".join(f"x-big-{i}: {'v' * 8000}\r\n" for i in range(3))
        response = await raw_request(app.url, request_head(app.url, extra=headers))
        assert response.status == 431
        error = response.json()["error"]
        assert error["type"] == "headers_too_large"
        assert "16384 bytes" in error["message"]
        # Under the cap, both are fine.
        ok = request_head(app.url, path=f"/healthz?{'q' * 8000}", extra=f"x-a: {'v' * 7000}\r\n")
        assert (await raw_request(app.url, ok)).status == 200
        # Pipelined behind a request, in the same read: checked all the same.
        for second, status in ((long_line, 414), (request_head(app.url, extra=headers), 431)):
            async with await anyio.connect_tcp(host, port) as stream:
                await stream.send(request_head(app.url) + second)
                answers = await answer_or_close(stream)  # both, then the close
            statuses = [int(line.split(b" ")[1]) for line in re.findall(rb"HTTP/1.1 \d+", answers)]
            assert statuses == [200, status], answers[-300:]
            assert answers.endswith(
                b'"the request %s is over 16384 bytes"}}' % (b"line" if status == 414 else b"head")
            ), answers[-300:]


async def test_each_address_and_token_gets_its_share(tmp_path: Path) -> None:
    token = "admin-secret"
    auth = f"authorization: Bearer {token}\r\n"
    limits = SocketLimits(max_client_connections=2)
    async with served(tmp_path, limits, token=token) as app:
        request = request_head(app.url, path="/v1/reminders", extra=auth)
        held: list[SocketStream] = []
        try:
            # The token's two connections, from two addresses, each kept alive.
            for local in ["127.0.0.2", "127.0.0.3"]:
                stream = await connect(app.url, local)
                held.append(stream)
                await stream.send(request)
                assert (await read_response(stream)).status == 200
            # A third for that token, from a third address: refused once its head names it.
            third = await connect(app.url, "127.0.0.4")
            held.append(third)
            await third.send(request)
            response = await read_response(third)
            assert response.status == 503
            assert response.headers["retry-after"] == "1"
            error = response.json()["error"]
            assert error["type"] == "overloaded"
            assert "server.max_client_connections" in error["message"]
            assert await closed_by_server(third, within=3)
            # Another token from that address is not held back (refused by auth alone).
            other = request_head(app.url, path="/v1/reminders", extra="authorization: Bearer x\r\n")
            assert (await raw_request_from(app.url, "127.0.0.4", other)).status == 401
            # An address holds two at most, however many tokens it makes up.
            for i in range(2):
                stream = await connect(app.url, "127.0.0.5")
                held.append(stream)
                made_up = f"authorization: Bearer made-up-{i}\r\n"
                await stream.send(request_head(app.url, path="/healthz", extra=made_up))
                assert (await read_response(stream)).status == 200
            refused = await connect(app.url, "127.0.0.5")
            held.append(refused)
            assert status_of(await answer_or_close(refused)) == 503, "refused at connect"
            # Once one of the token's connections is closed, the token may open another.
            await held[0].send(request_head(app.url, extra="connection: close\r\n"))
            assert (await read_response(held[0])).status == 200
            assert await closed_by_server(held[0], within=3)
            assert (await raw_request_from(app.url, "127.0.0.4", request)).status == 200
        finally:
            for stream in held:
                await stream.aclose()


async def raw_request_from(url: str, local: str, request: bytes) -> RawResponse:
    async with await connect(url, local) as stream:
        await stream.send(request)
        return await read_response(stream)


async def test_a_request_answered_before_its_body_is_read_closes(tmp_path: Path) -> None:
    """A 401 (or any answer) before the body is read: the connection is not kept for the
    rest of a body that may never come."""
    async with served(tmp_path, token="right") as app:
        host, port = address(app.url)
        head = request_head(
            app.url,
            "POST",
            "/v1/reminders",
            "authorization: Bearer wrong\r\ncontent-type: application/json\r\n"
            "content-length: 100000\r\n",
        )
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(head + b"{")
            assert (await read_response(stream)).status == 401
            assert await closed_by_server(stream, within=3)


@pytest.mark.parametrize(
    ("server", "key"),
    [
        ({"body_deadline_s": 0}, "server.body_deadline_s"),
        ({"max_client_connections": 0}, "server.max_client_connections"),
        ({"body_min_rate": -1}, "server.body_min_rate"),
        ({"body_grace_s": -1}, "server.body_grace_s"),
        ({"send_timeout_s": 0}, "server.send_timeout_s"),
        ({"send_min_rate": -1}, "server.send_min_rate"),
        ({"grace_seconds": -1}, "server.grace_seconds"),
        # NaN passed `<= 0` checks: the start hung (header_timeout_s, body_deadline_s),
        # the shutdown hung (body_timeout_s), or the start crashed with a traceback
        # (send_timeout_s, as inf did too).
        ({"header_timeout_s": math.nan}, "server.header_timeout_s"),
        ({"body_timeout_s": math.nan}, "server.body_timeout_s"),
        ({"body_deadline_s": math.nan}, "server.body_deadline_s"),
        ({"send_timeout_s": math.nan}, "server.send_timeout_s"),
        ({"send_timeout_s": math.inf}, "server.send_timeout_s"),
        ({"body_grace_s": math.nan}, "server.body_grace_s"),
        # Other frameworks' patterns matched no Host: every proxied request was a 403.
        ({"allowed_hosts": ("*",)}, "server.allowed_hosts: '\\*' .*no patterns"),
        ({"allowed_hosts": ("*.example.com",)}, "server.allowed_hosts: .*no patterns"),
        ({"allowed_hosts": (".example.com",)}, "server.allowed_hosts: .*no patterns"),
        ({"allowed_hosts": ("front mind.lan",)}, "server.allowed_hosts"),
        ({"allowed_hosts": ("frontmind.lan/ui",)}, "server.allowed_hosts"),
    ],
)
def test_bad_server_limits_name_their_key(server: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        socket_limits(Config(server=ServerConfig(**server)))


def test_a_nan_timeout_in_the_config_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "frontmind.toml").write_text("[server]\nbody_timeout_s = nan\n")
    with pytest.raises(ConfigError, match=r"server\.body_timeout_s must be positive.*nan"):
        socket_limits(load_config(None, tmp_path))


def test_allowed_hosts_take_names_and_addresses() -> None:
    hosts = ("frontmind.lan", "Proxy.Example:443", "[::1]:8080", "10.0.0.5", "my_host", "a.b.")
    socket_limits(Config(server=ServerConfig(allowed_hosts=hosts)))


def test_server_limits_reach_the_socket() -> None:
    server = ServerConfig(
        max_connections=50,
        max_client_connections=5,
        max_body_bytes=999,
        send_timeout_s=7,
        send_min_rate=9,
    )
    assert socket_limits(Config(server=server)) == SocketLimits(
        max_connections=50,
        max_client_connections=5,
        max_body_bytes=999,
        send_timeout=7,
        send_min_rate=9,
    )


# --- clients that do not read what they are sent ---------------------------------------

BIG = 1_000_000  # one response, bigger than the socket buffers on both sides
HUGE = 16_000_000  # more than the kernel takes into a socket's buffer (4 MiB by default)
PIECES = 200  # /stream sends HUGE in as many pieces, one after the other


class Sizable:
    """An ASGI app with big answers: GET /big and /huge in one piece, GET /stream (as
    big as /huge) in `PIECES`, anything else a small 200. It counts the big responses
    begun and says (on `sent`) when each has been handed to the server whole."""

    def __init__(self) -> None:
        self.begun = 0
        channel: tuple[MemoryObjectSendStream[str], MemoryObjectReceiveStream[str]]
        channel = anyio.create_memory_object_stream[str](1000)
        self._say, self.sent = channel

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope["path"]
        if path not in ("/big", "/huge", "/stream"):
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        self.begun += 1
        size = BIG if path == "/big" else HUGE
        headers = [(b"content-length", str(size).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if path != "/stream":
            await send({"type": "http.response.body", "body": b"x" * size})
        else:
            piece = b"y" * (HUGE // PIECES)
            for i in range(PIECES):
                more = i < PIECES - 1
                await send({"type": "http.response.body", "body": piece, "more_body": more})
        self._say.send_nowait(path)


async def until_paused(app: Sizable, served: ServedApp, count: int) -> None:
    """Until `count` connections have their writes paused (a write pauses them as it
    is made: each response handed over is the moment to look)."""
    with anyio.fail_after(5):
        while served.write_paused() < count:
            await app.sent.receive()


async def stalled_reader(app: ServedApp, local: str, path: str, times: int = 20) -> socket.socket:
    """A client with a 1 KiB receive buffer that sends `times` pipelined GETs of `path`
    and never reads (the caller closes the socket)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.setblocking(False)
    sock.bind((local, 0))
    with anyio.fail_after(5):
        await anyio.wait_writable(sock) if False else None
        try:
            sock.connect((app.host, app.port))
        except BlockingIOError:
            await anyio.wait_writable(sock)
        sock.sendall(f"GET {path} HTTP/1.1\r\nhost: {app.host}:{app.port}\r\n\r\n".encode() * times)
    return sock


def _hang_up_within(sock: socket.socket, seconds: float) -> int:
    poller = select.poll()
    poller.register(sock, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
    events = poller.poll(int(seconds * 1000))
    return events[0][1] if events else 0


async def reset_by_server(sock: socket.socket, within: float) -> bool:
    """True once the server has reset the connection (the client never read: only a
    reset, never a FIN, can reach it), False if it has not within `within` seconds."""
    events = await anyio.to_thread.run_sync(_hang_up_within, sock, within)
    return bool(events & select.POLLERR)


async def test_a_client_that_reads_nothing_is_dropped_after_the_send_timeout(
    tmp_path: Path,
) -> None:
    app = Sizable()
    async with serve_app(app, limits=SocketLimits(send_timeout=1.0)) as served:
        with await stalled_reader(served, FLOODER, "/big") as sock:
            await until_paused(app, served, 1)
            started = time.perf_counter()
            # One response waits in memory, not twenty: the next pipelined request is not
            # begun while one is not taken (the kernel's buffers may take a first one).
            assert 0 < served.write_buffered() <= BIG
            assert await reset_by_server(sock, within=10)
            waited = time.perf_counter() - started
            assert 0.8 <= waited < 3, f"at the send timeout (1 s), not later: {waited:.2f} s"
            assert app.begun <= 2
            assert served.open_connections() == 0
            assert served.write_buffered() == 0
        # The address is not held against: its next request is answered.
        assert (await raw_request_from(served.url, FLOODER, request_head(served.url))).status == 200
        # A connection closed by the server (Connection: close) whose response is not
        # taken is dropped the same way: a close waits for nothing for ever.
        # (Bigger than the kernel's buffers can take: there is no second response.)
        head = request_head(served.url, path="/huge", extra="connection: close\r\n")
        with await stalled_reader(served, FLOODER, "/huge", times=0) as sock:
            sock.sendall(head)
            await until_paused(app, served, 1)
            started = time.perf_counter()
            assert await reset_by_server(sock, within=10)
            assert 0.8 <= time.perf_counter() - started < 3
        assert served.open_connections() == 0


@pytest.mark.parametrize("path", ["/huge", "/stream"])
async def test_a_client_that_reads_slowly_but_steadily_is_not_cut(
    tmp_path: Path, path: str
) -> None:
    """Its writes pause over and over, for longer in all than the send timeout, but in
    every window it takes its due: it gets the whole response."""
    app = Sizable()
    limits = SocketLimits(send_timeout=0.3, send_min_rate=1024)
    async with serve_app(app, limits=limits) as served:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        with sock:
            sock.connect((served.host, served.port))
            sock.setblocking(False)
            sock.sendall(
                f"GET {path} HTTP/1.1\r\nhost: {served.host}:{served.port}\r\n\r\n".encode()
            )
            started = time.perf_counter()
            data = bytearray()
            paused_seen = False
            with anyio.fail_after(60):
                head_end = -1
                while head_end < 0 or len(data) - head_end < HUGE:
                    await anyio.wait_readable(sock)
                    chunk = sock.recv(65536)
                    assert chunk, f"closed after {len(data)} bytes"
                    data += chunk
                    if head_end < 0 and (at := data.find(b"\r\n\r\n")) >= 0:
                        head_end = at + 4
                    paused_seen = paused_seen or served.write_paused() == 1
                    await anyio.sleep(0.005)  # the client's own pace: slow, steady
            head, _, body = bytes(data).partition(b"\r\n\r\n")
            took = time.perf_counter() - started
            assert head.startswith(b"HTTP/1.1 200")
            assert len(body) == HUGE
            assert paused_seen, "the server's writes waited for the client"
            assert took > 3 * limits.send_timeout, f"slow enough to matter: {took:.2f} s"


async def test_a_reader_at_a_few_times_the_minimum_rate_is_not_cut() -> None:
    """The kernel's send buffer grows to megabytes and takes more only once a third of
    it is gone: a client reading steadily at ten times `send_min_rate` leaves nothing
    of this process's buffer for longer than a window. What it took from the kernel's
    queue is what counts."""
    app = Sizable()
    limits = SocketLimits(send_timeout=1.0, send_min_rate=16_384)
    async with serve_app(app, limits=limits) as served:
        with socket.socket() as sock:  # the system's own buffer sizes
            sock.connect((served.host, served.port))
            sock.setblocking(False)
            sock.sendall(
                f"GET /huge HTTP/1.1\r\nhost: {served.host}:{served.port}\r\n\r\n".encode()
            )
            received, paused_at = 0, None
            with anyio.fail_after(60):
                while paused_at is None or time.perf_counter() - paused_at < 5 * 1.0:
                    await anyio.wait_readable(sock)
                    chunk = sock.recv(8192)
                    assert chunk, f"cut after {received} bytes"
                    received += len(chunk)
                    if paused_at is None and served.write_paused() == 1:
                        paused_at = time.perf_counter()
                    await anyio.sleep(0.05)  # the client's own pace: about 160 KB/s
            assert served.open_connections() == 1


async def test_stalled_connections_give_way_to_another_client(tmp_path: Path) -> None:
    """All connections held by one address's stalled readers: another address's new
    connections take their places (a stalled one dropped for each) up to a fair share."""
    app = Sizable()
    limits = SocketLimits(max_connections=4, send_timeout=60)
    async with serve_app(app, limits=limits) as served:
        stalled = [await stalled_reader(served, FLOODER, "/big") for _ in range(4)]
        others: list[SocketStream] = []
        try:
            await until_paused(app, served, 4)
            for _ in range(2):  # kept open: 2 and 2 is the fair share of 4
                others.append(await connect(served.url, "127.0.0.3"))
                await others[-1].send(request_head(served.url))
                assert (await read_response(others[-1])).status == 200
            dropped = [bool(_hang_up_within(sock, 0) & select.POLLERR) for sock in stalled]
            assert sum(dropped) == 2, dropped
            assert served.write_paused() == 2
            assert served.write_buffered() <= 2 * BIG
        finally:
            for sock in stalled:
                sock.close()
            for stream in others:
                await stream.aclose()


async def test_one_addresss_stalled_responses_are_capped_in_bytes(tmp_path: Path) -> None:
    """Past `max_client_send_buffer` bytes waiting in its paused connections, an
    address's connection that pauses is dropped at once; another address is not."""
    app = Sizable()
    limits = SocketLimits(send_timeout=60, max_client_send_buffer=1)
    async with serve_app(app, limits=limits) as served:
        socks: list[socket.socket] = []
        try:
            socks.append(await stalled_reader(served, FLOODER, "/big"))
            await until_paused(app, served, 1)
            for _ in range(2):  # each dropped as soon as it pauses
                socks.append(await stalled_reader(served, FLOODER, "/big"))
                assert await reset_by_server(socks[-1], within=5)
            socks.append(await stalled_reader(served, "127.0.0.3", "/big"))
            await until_paused(app, served, 2)
            first, _, _, other = socks
            assert not await reset_by_server(first, within=0.2)
            assert not await reset_by_server(other, within=0.2)
            assert served.write_buffered() <= 2 * BIG
            assert served.open_connections() == 2
        finally:
            for sock in socks:
                sock.close()


def test_backlogs_count_by_address() -> None:
    backlogs = Backlogs(cap=100)
    backlogs.change("a", 80, 1)
    assert not backlogs.over("a"), "one response alone is never over"
    backlogs.change("a", 200)
    assert not backlogs.over("a")
    backlogs.change("a", 10, 1)
    assert backlogs.over("a")
    assert not backlogs.over("b")
    backlogs.change("a", -290, -2)
    assert backlogs.of("a") == 0
    assert backlogs.total() == 0
