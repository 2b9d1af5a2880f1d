"""`frontmind.Client` and `SyncClient` against the daemon: one call for every route of
the endpoint table, the same types and values as the library, the admin calls, and a
turn stream that keeps the characters a text line reader would cut at.

The daemon is the real app on a real socket (in this process, or as a child process
where the bytes on the wire matter); the clients are the ones users import.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import shutil
import socket
import sys
import typing
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx2
import msgspec
import pytest

import storage
from actors import InvalidModelSettings
from frontmind import (
    Busy,
    Client,
    ClientError,
    Frontmind,
    InvalidInput,
    NotFound,
    Overloaded,
    SyncClient,
    TextDelta,
    ToolStarted,
    TurnCompleted,
    TurnError,
    TurnStarted,
    UnknownContinuum,
)
from frontmind.server._asgi import serve_app
from frontmind.server._daemon import build_app
from frontmind.server._routes import ENDPOINTS
from frontmind.server._sse import _sse_frame
from storage import TurnRecord, UserForgotten
from tests._daemon import ROOT, child_env, daemon, sse_events
from tests._harness import FakeClock, config
from tests.test_admission import HOLD, Holds, over_http

pytestmark = pytest.mark.anyio

ADMIN = "admin-token"
GAP = 30 * 60  # history.segment_gap_minutes, in seconds


@asynccontextmanager
async def served(
    data_dir: Path, *, clock: FakeClock | None = None
) -> AsyncIterator[tuple[Frontmind, str]]:
    """The library and the daemon's app over it, on a real socket (admin token ADMIN)."""
    async with (
        Frontmind.open(data_dir, config(), offline=True, clock=clock or FakeClock()) as fm,
        serve_app(build_app(fm, token=ADMIN), graceful_seconds=10) as app,
    ):
        yield fm, app.url


async def _drain(events: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in events]


# -- every route has its call ------------------------------------------------------------

# Served to other programs, not called by a client: Prometheus scrapes /metrics, client
# generators read /openapi.json, a browser opens /docs.
NOT_CALLED = {("GET", "/metrics"), ("GET", "/openapi.json"), ("GET", "/docs")}

Call = Callable[[Client, dict[str, Any], Path], Awaitable[Any]]

# One call of each public method, in an order that makes each succeed (`done` holds what
# the earlier calls returned). A method missing here, or a route none of them requests,
# fails the test below.
CALLS: dict[str, Call] = {
    "health": lambda c, done, _: c.health(),
    "ready": lambda c, done, _: c.ready(),
    "turn": lambda c, done, _: _drain(c.turn("ada", "hello")),
    "context": lambda c, done, _: c.context("ada", "and then?"),
    "model_settings": lambda c, done, _: c.model_settings("ada"),
    "set_model_settings": lambda c, done, _: c.set_model_settings("ada", max_tokens=2048),
    "history": lambda c, done, _: c.history("ada"),
    "turns": lambda c, done, _: c.turns("ada"),
    "continuums": lambda c, done, _: c.continuums(),
    "add_reminder": lambda c, done, _: c.add_reminder("call Bob"),
    "complete_reminder": lambda c, done, _: c.complete_reminder(done["add_reminder"].id),
    "reminders": lambda c, done, _: c.reminders(include_completed=True),
    "delete_reminder": lambda c, done, _: c.delete_reminder(done["add_reminder"].id),
    "remember": lambda c, done, _: c.remember("The cat is named Tom"),
    "memories": lambda c, done, _: c.memories(),
    "search_memories": lambda c, done, _: c.search_memories("cat"),
    "delete_memory": lambda c, done, _: c.delete_memory(done["remember"].id),
    "put_document": lambda c, done, _: c.put_document("notes", "plants on Tuesdays"),
    "documents": lambda c, done, _: c.documents(),
    "delete_document": lambda c, done, _: c.delete_document("notes"),
    "jobs": lambda c, done, _: c.jobs(),
    "backup": lambda c, done, tmp: c.backup(str(tmp / "backup.db")),
    "mcp_servers": lambda c, done, _: c.mcp_servers(),
    "offered_tools": lambda c, done, _: c.offered_tools(),
    "reload_tools": lambda c, done, _: c.reload_tools(),
    "add_user": lambda c, done, _: c.add_user("bob"),
    "users": lambda c, done, _: c.users(),
    "rotate_token": lambda c, done, _: c.rotate_token("bob"),
    "delete_user": lambda c, done, _: c.delete_user("bob"),
    "delete_continuum": lambda c, done, _: c.delete_continuum("ada"),
}


def _public(cls: type) -> set[str]:
    return {
        name for name, value in vars(cls).items() if not name.startswith("_") and callable(value)
    }


def _route_of(method: str, path: str) -> tuple[str, str]:
    """The endpoint table's row a request lands on."""
    found = [
        (e.method, e.path)
        for e in ENDPOINTS
        if e.method == method
        and re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", e.path), path) is not None
    ]
    assert len(found) == 1, (method, path, found)
    return found[0]


async def test_every_route_of_the_endpoint_table_has_a_client_call(tmp_path: Path) -> None:
    assert set(CALLS) == _public(Client) - {"aclose"}
    requested: list[tuple[str, str]] = []

    async def record(request: httpx2.Request) -> None:
        requested.append((request.method, request.url.path))

    routes: dict[str, tuple[str, str]] = {}
    done: dict[str, Any] = {}
    async with served(tmp_path / "data") as (_, url), Client(url, token=ADMIN) as c:
        c._http.event_hooks["request"].append(record)
        for name, call in CALLS.items():
            requested.clear()
            done[name] = await call(c, done, tmp_path)
            assert len(requested) == 1, (name, requested)
            routes[name] = _route_of(*requested[0])
    assert isinstance(done["turn"][-1], TurnCompleted)
    table = {(e.method, e.path) for e in ENDPOINTS}
    assert table >= NOT_CALLED
    assert set(routes.values()) == table - NOT_CALLED
    assert routes["rotate_token"] == ("POST", "/v1/users/{name}/token")
    assert routes["backup"] == ("POST", "/v1/admin/backup")


def test_the_sync_client_makes_every_call_the_client_makes() -> None:
    assert _public(SyncClient) - {"close"} == _public(Client) - {"aclose"}
    for name in _public(Client) - {"aclose"}:
        mine, theirs = getattr(SyncClient, name), getattr(Client, name)
        assert list(inspect.signature(mine).parameters) == list(
            inspect.signature(theirs).parameters
        ), name


# -- the same types and values as the library --------------------------------------------


def _agree(mine: Any, theirs: Any, where: str) -> None:
    """The client's value is the library's: the same struct types, field by field, and
    every time the same aware UTC datetime, exactly (the wire keeps microseconds)."""
    if isinstance(mine, msgspec.Struct):
        assert isinstance(theirs, type(mine)), where
        for name in mine.__struct_fields__:
            _agree(getattr(mine, name), getattr(theirs, name), f"{where}.{name}")
    elif isinstance(mine, list | tuple):
        assert len(theirs) == len(mine), where
        for n, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            _agree(a, b, f"{where}[{n}]")
    elif where.endswith("_at"):
        assert type(theirs) is type(mine), where
        if mine is not None:
            assert isinstance(mine, datetime), where
            assert mine.utcoffset() == theirs.utcoffset() == timedelta(0), where
            assert theirs == mine, where
    elif where.endswith(("input_json", "content_json")) and mine:
        # The same JSON value; the client's bytes are msgspec's, not the model's.
        assert json.loads(theirs) == json.loads(mine), where
    else:
        assert theirs == mine, where


def test_a_malformed_url_is_the_clients_error() -> None:
    """`Client("http://[::1")` raised httpx2's InvalidURL, outside the error tree."""
    for make in (Client, SyncClient):
        with pytest.raises(ClientError, match="not a daemon URL"):
            make("http://[::1")


def test_a_url_without_its_scheme_is_refused_at_once() -> None:
    """`Client("127.0.0.1:8765")`, the address as `frontmind serve` is often told it:
    each call failed later, a turn's saying its stream "broke" though nothing was sent."""
    for url in ("127.0.0.1:8765", "localhost:8765", "ftp://127.0.0.1:8765", ""):
        for make in (Client, SyncClient):
            with pytest.raises(ClientError, match=r"not a daemon URL.*http://"):
                make(url)


def test_every_time_in_a_record_is_a_datetime() -> None:
    """The one rule for times a record carries, whichever record it is."""
    times = 0
    # A turn's staged writes (`Effect`) are the store's own input, never handed out.
    staged = typing.get_args(storage.Effect)
    for name in storage.__all__:
        record = getattr(storage, name)
        if not (isinstance(record, type) and issubclass(record, msgspec.Struct)):
            continue
        if record in staged:
            continue
        for field, hint in typing.get_type_hints(record).items():
            if field.endswith("_at"):
                times += 1
                assert hint in (datetime, datetime | None), (name, field, hint)
    assert times >= 20


async def test_a_time_the_client_sends_is_checked_as_the_library_checks_it() -> None:
    # Refused before any request (nothing listens at this address): the library's error.
    async with Client("http://127.0.0.1:9", token=ADMIN) as c:
        with pytest.raises(InvalidInput, match="due time must be a datetime, not float"):
            await c.add_reminder("call Bob", 1.7e9)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="expiry must be timezone-aware"):
            await c.remember("tea", expires_at=datetime(2030, 1, 1))


async def test_the_client_returns_the_librarys_types_and_values(tmp_path: Path) -> None:
    clock = FakeClock()
    async with served(tmp_path / "data", clock=clock) as (fm, url), Client(url, token=ADMIN) as c:
        events = [e async for e in c.turn("ada", "remind me to water the plants in 10 minutes")]
        assert any(isinstance(e, ToolStarted) for e in events)
        clock.advance(GAP + 1)
        await _drain(c.turn("ada", "I prefer green tea in the morning."))  # a new segment
        await fm.run_background()  # the first segment's summary job, done
        due = datetime.fromtimestamp(clock.now, UTC) + timedelta(hours=2)
        done = await c.complete_reminder((await c.add_reminder("call Bob", due)).id)
        assert isinstance(done.completed_at, datetime)
        assert done.completed_at.tzinfo is not None
        # Memories expire by the wall clock, not the app's: this one far from now.
        await c.remember("The cat is named Tom", expires_at=datetime(2100, 1, 1, tzinfo=UTC))
        await c.put_document("notes", "plants on Tuesdays")
        await c.add_user("bob")

        pairs: list[tuple[str, list[Any], list[Any]]] = [
            ("history", await fm.history("ada"), await c.history("ada")),
            ("turns", await fm.turns("ada"), await c.turns("ada")),
            (
                "reminders",
                await fm.reminders(include_completed=True),
                await c.reminders(include_completed=True),
            ),
            ("memories", await fm.memories(), await c.memories()),
            ("documents", await fm.documents(), await c.documents()),
            ("jobs", await fm.jobs("ada"), await c.jobs("ada")),
            ("users", await fm.users(), await c.users()),
        ]
        for what, mine, theirs in pairs:
            assert mine, f"nothing to compare in {what}"
            _agree(mine, list(theirs), what)
        # A hit's score weighs the memory's age by the wall clock, read at each search.
        mine_hits = await fm.search_memories("cat Tom")
        their_hits = await c.search_memories("cat Tom")
        assert mine_hits
        _agree([h.memory for h in mine_hits], [h.memory for h in their_hits], "search")
        for a, b in zip(mine_hits, their_hits, strict=True):
            assert b.score == pytest.approx(a.score, rel=1e-3)
        turns = pairs[1][2]
        assert all(isinstance(t, TurnRecord) for t in turns)
        assert {j.state for j in pairs[5][1]} == {"done"}
        # The continuum list is a summary of its own, with the same times.
        (continuum,) = await fm.continuums()
        (summary,) = await c.continuums()
        assert summary.created_at == continuum.created_at
        assert continuum.last_turn_at is not None
        assert summary.last_activity_at == continuum.last_turn_at


async def test_refused_model_settings_are_the_librarys_error_through_the_client(
    tmp_path: Path,
) -> None:
    """`Client.set_model_settings` promises `InvalidModelSettings`, as the library
    raises it; the wire's `invalid_request` came back as a plain `InvalidInput`, which an
    app's `except InvalidModelSettings` (or `SettingsError`) did not catch."""
    refused: list[dict[str, Any]] = [
        {"max_tokens": 0},
        {"model": "no-such-model"},
        {"thinking": "off", "thinking_display": "omitted"},
    ]
    async with served(tmp_path / "data") as (fm, url), Client(url, token=ADMIN) as c:
        for settings in refused:
            with pytest.raises(InvalidModelSettings) as mine:
                await fm.set_model_settings("ada", **settings)
            with pytest.raises(InvalidModelSettings) as theirs:
                await c.set_model_settings("ada", **settings)
            assert str(theirs.value).endswith(str(mine.value).removeprefix("model settings: "))
        # Other refusals stay what they are.
        with pytest.raises(InvalidInput) as caught:
            await c.set_model_settings("ada#", max_tokens=2048)
        assert not isinstance(caught.value, InvalidModelSettings)


# -- the admin calls ---------------------------------------------------------------------


async def test_the_admin_calls_back_up_rotate_a_token_and_forget_a_user(tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    async with served(tmp_path / "data") as (_, url), Client(url, token=ADMIN) as c:
        token = await c.add_user("bob")
        async with Client(url, token=token) as bob:
            await bob.remember("Bob keeps bees")
        fresh = await c.rotate_token("bob")
        assert fresh != token
        async with Client(url, token=token) as stale:
            with pytest.raises(ClientError, match="unauthorized"):
                await stale.memories()
        async with Client(url, token=fresh) as bob:
            assert [m.text for m in await bob.memories()] == ["Bob keeps bees"]

        assert await c.backup(str(copy)) == copy.stat().st_size
        with pytest.raises(InvalidInput, match="absolute path"):
            await c.backup("relative.db")

        forgotten = await c.delete_user("bob")
        assert isinstance(forgotten, UserForgotten)
        assert (forgotten.name, forgotten.rows["memories"]) == ("bob", 1)
        assert await c.users() == []
        async with Client(url, token=fresh) as gone:
            with pytest.raises(ClientError, match="unauthorized"):
                await gone.memories()
        with pytest.raises(NotFound):
            await c.delete_user("bob")
    # The backup is a store of its own, holding what bob had then.
    restored = tmp_path / "restored"
    restored.mkdir()
    shutil.copyfile(copy, restored / "frontmind.db")
    async with Frontmind.open(restored, offline=True) as fm:
        assert [m.text for m in await fm.user("bob").memories()] == ["Bob keeps bees"]


async def test_a_name_the_client_puts_in_a_path_reaches_no_other_route(tmp_path: Path) -> None:
    """A continuum id, user name or label is checked as the library checks it before
    it goes into a path: the daemon decodes `%2F` before routing, so `../continuums/ada`
    as a user name would delete continuum ada, `a/../bob` rotate bob's token, `notes#x`
    delete document notes. Each is `InvalidInput`, and nothing changes."""
    async with served(tmp_path / "data") as (fm, url), Client(url, token=ADMIN) as c:
        await _drain(c.turn("ada", "hello"))
        await c.put_document("notes", "plants on Tuesdays")
        token = await c.add_user("bob")
        memory = await c.remember("The cat is named Tom")
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: c.delete_user("../continuums/ada"),
            lambda: c.rotate_token("a/../bob"),
            lambda: c.delete_document("notes#x"),
            lambda: c.delete_document("notes?x"),
            lambda: c.delete_continuum("ada/../ada"),
            lambda: c.delete_continuum("ada?x"),
            lambda: c.history("ada/../../reminders"),
            lambda: c.model_settings("ada%2F"),
            lambda: c.set_model_settings("ada#", max_tokens=2048),
            lambda: _drain(c.turn("ada/..", "hi")),
            lambda: c.context("", "hi"),
            lambda: c.turns("a b"),
            lambda: c.delete_memory(True),
            lambda: c.delete_reminder(0),
            lambda: c.complete_reminder(-1),
        ]
        for call in calls:
            with pytest.raises(InvalidInput):
                await call()
        assert [x.id for x in await c.continuums()] == ["ada"]
        assert [d.label for d in await c.documents()] == ["notes"]
        assert [m.id for m in await c.memories()] == [memory.id]
        assert await fm.user_for_token(token) == "bob"


async def test_the_sync_client_makes_the_admin_calls(tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"

    def script(url: str) -> tuple[str, str, int, UserForgotten]:
        with SyncClient(url, token=ADMIN) as c:
            token = c.add_user("carol")
            fresh = c.rotate_token("carol")
            size = c.backup(str(copy))
            return token, fresh, size, c.delete_user("carol")

    async with served(tmp_path / "data") as (fm, url):
        token, fresh, size, forgotten = await anyio.to_thread.run_sync(script, url)
        assert await fm.users() == []
    assert token != fresh
    assert size == copy.stat().st_size
    assert forgotten.name == "carol"


# -- what a text line reader would cut ---------------------------------------------------


@pytest.mark.slow
async def test_a_reply_holding_line_separators_arrives_whole(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 end a line for `str.splitlines` (and so for a text line
    reader), not for SSE: the daemon writes them raw inside an event's JSON, and the
    client and the tests' reader both read the stream as bytes."""
    said = "one\u2028two\u2029three\u0085four"
    async with daemon(tmp_path) as d:
        async with Client(d.url) as c:
            events = [e async for e in c.turn("ada", said)]
        done = events[-1]
        assert isinstance(done, TurnCompleted)
        assert said in done.text  # the offline model quotes the message
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == done.text
        async with d.client() as http:
            path = "/v1/continuums/ada/turns"
            async with http.stream("POST", path, json={"message": said}) as response:
                seen = [event async for event in sse_events(response)]
            assert seen[-1][0] == "turn.completed"
            assert said in seen[-1][1]["text"]
            async with http.stream("POST", path, json={"message": said}) as response:
                raw = await response.aread()
        # Raw on the wire: what makes the two readers above worth testing.
        for separator in "\u2028\u2029\u0085":
            assert separator.encode() in raw
        assert await d.stop() == 0


# -- refusals: the error's own retry_after -----------------------------------------------


async def test_a_refusal_keeps_the_daemons_retry_after(tmp_path: Path) -> None:
    """A 429 or 503 says when to retry in `Retry-After`; the `Busy` (or `Overloaded`)
    the client raises carries the library's own `retry_after`: None where the library's
    is None (the header says 1 then, as HTTP wants a 429 to say when)."""
    holds = Holds()
    async with (
        over_http(tmp_path, holds, max_active=1, max_wait_s=0.000_001) as (fm, http),
        Client(str(http.base_url)) as c,
    ):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, c.turn("c1", HOLD))
            await holds.count(1)
            with pytest.raises(Busy) as busy:
                await c.delete_continuum("c1")  # a turn runs in it: 429, no wait known
            with pytest.raises(Busy) as library:
                await fm.delete_continuum("c1")
            answer = await http.delete("/v1/continuums/c1")
            holds.release(0)
        assert type(busy.value) is Busy
        assert library.value.retry_after is None
        assert busy.value.retry_after is None
        assert answer.headers["retry-after"] == "1"
        assert "retry_after" not in answer.json()["error"]
        # A turn measured: the queue's wait is known, and the next one is refused (503).
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, c.turn("c2", HOLD))
            await holds.count(2)
            with pytest.raises(Overloaded) as overloaded:
                await _drain(c.turn("c3", "hello"))
            holds.release(1)
        assert overloaded.value.retry_after is not None
        assert overloaded.value.retry_after >= 1
        assert f"retry in {overloaded.value.retry_after:.0f} s" in str(overloaded.value)
        # And it names the refused turn's record (a delete refused is no turn: none).
        assert busy.value.turn_id is None
        await fm.run_background()  # the record is the background worker's to write
        (record,) = await c.turns("c3")
        assert record.status == "cancelled"
        assert overloaded.value.turn_id == record.turn_id


async def test_a_refusals_wait_is_the_librarys_to_the_fraction(tmp_path: Path) -> None:
    """A continuum's full queue says to retry in about a turn's time: the library's
    `retry_after` is that time, a fraction of a second here (None before any turn was
    measured). The client read the Retry-After header, whole seconds: 1 for both. It
    reads the body's `retry_after` now, the library's own value; the header stays
    whole seconds, as HTTP requires."""
    holds = Holds()
    async with (
        over_http(tmp_path, holds, max_queued=1, max_wait_s=600) as (fm, http),
        Client(str(http.base_url)) as c,
    ):
        for held in range(2):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain, c.turn("c1", HOLD))
                await holds.count(held + 1)
                queued = fm.turn("c1", "hello")
                await queued.start()  # the continuum's one place in its queue
                with pytest.raises(Busy) as refused:
                    await _drain(c.turn("c1", "hello"))
                with pytest.raises(Busy) as library:
                    await _drain(fm.turn("c1", "hello"))
                answer = await http.post("/v1/continuums/c1/turns", json={"message": "hello"})
                measured = fm.admission.turn_seconds  # no turn ended meanwhile
                holds.release(held)
                await _drain(queued)
            assert type(refused.value) is Busy
            assert "waiting" in str(refused.value)  # the full queue's refusal
            assert library.value.retry_after == measured
            assert refused.value.retry_after == measured
            assert answer.status_code == 429
            if measured is None:  # the first round: no turn had ended yet
                assert held == 0
                assert answer.headers["retry-after"] == "1"
                assert "retry_after" not in answer.json()["error"]
            else:
                assert held == 1
                assert answer.headers["retry-after"] == str(max(1, math.ceil(measured)))
                assert answer.json()["error"]["retry_after"] == measured
        assert measured is not None


class _RefusingWatch:
    """A turn watch whose `turn_began` refuses, with a wait: an error raised by the
    turn's stream once it holds its slot, after the daemon's answer went out (200)."""

    def __init__(self, wait: float) -> None:
        self.wait = wait

    def turn_began(self) -> None:
        raise Busy("refused after the answer's headers", retry_after=self.wait)

    def turn_ended(self) -> None:
        pass

    def composing(self) -> AbstractContextManager[None]:
        return nullcontext()


async def test_an_error_after_the_headers_keeps_its_retry_after(tmp_path: Path) -> None:
    """An error the turn's stream raises after the answer's headers went out ends the
    stream with its error event: that event said `busy` without the error's
    `retry_after`, which the client's `TurnError` now carries as the library's does."""
    async with served(tmp_path) as (fm, url), Client(url, token=ADMIN) as c:
        fm._runtime.watch_turns(_RefusingWatch(2.5))
        events = await _drain(c.turn("ada", "hello"))
        *_, error = events
        assert isinstance(error, TurnError)
        assert (error.type, error.retry_after) == ("busy", 2.5)
        async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
            headers = {"authorization": f"Bearer {ADMIN}"}
            path = "/v1/continuums/bob/turns"
            async with http.stream(
                "POST", path, json={"message": "hi"}, headers=headers
            ) as response:
                assert response.status_code == 200  # the headers went out first
                seen = [event async for event in sse_events(response)]
        name, data = seen[-1]
        assert (name, data["type"], data["retry_after"]) == ("error", "busy", 2.5)


# -- errors that carry attributes -------------------------------------------------------

# The calls that read or delete one continuum, by the library and by the clients alike.
ON_A_CONTINUUM: dict[str, Callable[[Any], Any]] = {
    "history": lambda on: on.history("nobody"),
    "turns": lambda on: on.turns("nobody"),
    "delete_continuum": lambda on: on.delete_continuum("nobody"),
}


@pytest.mark.slow
async def test_an_unknown_continuum_is_the_librarys_error_through_the_daemon(
    tmp_path: Path,
) -> None:
    """A continuum that never had a turn is `UnknownContinuum` with its `continuum_id`
    in the library; through the daemon the client raised the bare `NotFound`, with no
    id to read. The body names the continuum, and each client raises the library's
    error; any other 404 stays a `NotFound`."""
    said: dict[str, tuple[type[BaseException], str, str]] = {}
    async with Frontmind.open(tmp_path / "library", offline=True) as fm:
        for name, call in ON_A_CONTINUUM.items():
            with pytest.raises(UnknownContinuum) as raised:
                await call(fm)
            said[name] = (type(raised.value), raised.value.continuum_id, str(raised.value))

    def blocking(url: str) -> dict[str, tuple[type[BaseException], str, str]]:
        found: dict[str, tuple[type[BaseException], str, str]] = {}
        with SyncClient(url) as c:
            for name, call in ON_A_CONTINUUM.items():
                with pytest.raises(UnknownContinuum) as raised:
                    call(c)
                found[name] = (type(raised.value), raised.value.continuum_id, str(raised.value))
        return found

    async with daemon(tmp_path / "daemon") as d:
        async with Client(d.url) as c:
            for name, call in ON_A_CONTINUUM.items():
                with pytest.raises(UnknownContinuum) as raised:
                    await call(c)
                assert (type(raised.value), raised.value.continuum_id, str(raised.value)) == (
                    said[name]
                ), name
            with pytest.raises(NotFound) as memory:
                await c.delete_memory(999)
            assert type(memory.value) is NotFound
        assert await anyio.to_thread.run_sync(blocking, d.url) == said
        async with d.client() as http:
            body = (await http.get("/v1/continuums/nobody/messages")).json()
        assert body["error"]["type"] == "not_found"  # the type is still the one type
        assert body["error"]["continuum_id"] == "nobody"
        assert await d.stop() == 0


# -- a daemon that does not answer -------------------------------------------------------


async def test_a_turn_to_a_daemon_that_is_not_there_says_so() -> None:
    """A turn to a port nobody listens on said "the turn's stream ... broke", as if
    a turn had begun; it says what every other call says."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        async with Client(url) as c:
            with pytest.raises(ClientError, match=r"^no Frontmind daemon answers at"):
                async for _ in c.turn("main", "hello"):
                    pass


async def test_a_call_to_a_daemon_that_never_answers_times_out() -> None:
    """`timeout` bounds every call but a turn's stream: a daemon that takes the request
    and never answers is a `ClientError` after it, not a call that waits for ever."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()  # connections are taken (by the kernel) and never answered
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        async with Client(url, timeout=0.2) as c:
            with anyio.fail_after(10), pytest.raises(ClientError, match="did not answer"):
                await c.reminders()

        def blocking() -> None:
            with SyncClient(url, timeout=0.2) as c, pytest.raises(ClientError, match="within"):
                c.health()

        with anyio.fail_after(10):
            await anyio.to_thread.run_sync(blocking)


async def _cut_short(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers a turn 200 and ends the stream before its last event: a proxy's cut, or
    (on `/html/...`) a URL that answers every request with a page."""
    if scope["type"] != "http":
        return
    if scope["path"].startswith("/html/"):
        headers, body = [(b"content-type", b"text/html")], b"<html>hello</html>"
    else:
        started = TurnStarted("turn_0", "main")
        said = TextDelta("Half a rep")
        headers = [(b"content-type", b"text/event-stream")]
        body = _sse_frame(started, "1") + _sse_frame(said, "2")
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def test_a_turn_stream_cut_before_its_end_is_the_clients_error() -> None:
    """The daemon ends every turn's stream with `TurnCompleted` or `TurnError`; a stream
    closed short of that ended the client's loop as if the turn had ended, and a URL
    that answered with a page gave a turn of no events, with no error."""
    async with serve_app(_cut_short) as app:
        async with Client(app.url) as c:
            seen: list[Any] = []

            async def read() -> None:
                async for event in c.turn("main", "hello"):
                    seen.append(event)

            with pytest.raises(ClientError, match="ended before the turn did"):
                await read()
            assert [type(e) for e in seen] == [TurnStarted, TextDelta]
        async with Client(f"{app.url}/html") as c:
            with pytest.raises(ClientError, match="ended before the turn did"):
                await _drain(c.turn("main", "hello"))

        def blocking() -> None:
            with SyncClient(app.url) as c, pytest.raises(ClientError):
                list(c.turn("main", "hello"))

        await anyio.to_thread.run_sync(blocking)


# -- the sync client's own thread --------------------------------------------------------

UNCLOSED = """
from frontmind import ClientError, SyncClient
c = SyncClient("http://127.0.0.1:9")
try:
    c.health()
except ClientError:
    print("refused")
"""


async def test_a_sync_client_left_open_lets_the_script_exit() -> None:
    """A script that never closes its `SyncClient` still exits (its thread was stopped at
    exit, not waited on for ever); closing one twice is no error."""
    with anyio.fail_after(60):
        result = await anyio.run_process(
            [sys.executable, "-c", UNCLOSED], cwd=ROOT, env=child_env(), check=False
        )
    assert (result.returncode, result.stdout) == (0, b"refused\n"), result.stderr
    c = SyncClient("http://127.0.0.1:9")
    c.close()
    c.close()
