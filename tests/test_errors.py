"""One error tree, one type per error: the drawing in frontmind/_exceptions.py is the tree,
every error has its type and HTTP status in the one table, and the library's events, the
daemon's SSE events and its HTTP bodies say the same type for the same error."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from pathlib import Path

import httpx2
import pytest

import actors
import frontmind
import frontmind._exceptions as fm_exceptions
import runtime
import storage
from actors import ModelEvent, ModelRequest, TextDelta, TurnError
from frontmind import Client, Frontmind
from frontmind._exceptions import FROM_WIRE, HTTP_STATUS, INTERNAL_MESSAGE, wire_error
from frontmind.localapi import LocalMessagesAPI, MidStreamError, StatusFault
from frontmind.server._asgi import serve_app
from frontmind.server._daemon import build_app
from runtime import KernelError
from storage import FrontmindError, error_type
from tests._daemon import turn
from tests._harness import config, failed, run_turn
from tests._harness import frontmind as open_frontmind

pytestmark = pytest.mark.anyio

PROJECT = ("storage.", "actors.", "runtime.", "frontmind.")
ROOTS = (FrontmindError, KernelError)


def _import_everything() -> None:
    """Every project module, so that every error class defined anywhere is a subclass
    the walk can see (the local API stands apart and raises none of these)."""
    for package in (runtime, storage, actors, frontmind):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".localapi" not in info.name and not info.name.endswith("__main__"):
                importlib.import_module(info.name)


def tree() -> list[type[BaseException]]:
    """Every exception class reachable from the roots, defined by the project."""
    _import_everything()
    found: list[type[BaseException]] = []

    def walk(cls: type[BaseException]) -> Iterator[type[BaseException]]:
        yield cls
        for sub in cls.__subclasses__():
            yield from walk(sub)

    for root in ROOTS:
        for cls in walk(root):
            if cls.__module__.startswith(PROJECT) and cls not in found:
                found.append(cls)
    return found


def status_of(cls: type[BaseException]) -> int:
    return next(HTTP_STATUS[c] for c in cls.__mro__ if c in HTTP_STATUS)


class Drawn:
    def __init__(self, name: str, parent: str | None, kind: str, status: int, also: str) -> None:
        self.name, self.parent, self.kind, self.status = name, parent, kind, status
        self.also = set(re.findall(r"[A-Z]\w+", also))


LINE = re.compile(
    r"^    (?P<lead>[│├└─ ]*)(?P<name>[A-Z]\w+)\s+"
    r"(?P<kind>[a-z_]+)\s+(?P<status>\d{3})(?P<also>.*)$"
)


def drawing() -> dict[str, Drawn]:
    """The tree as drawn in frontmind/_exceptions.py's docstring."""
    doc = fm_exceptions.__doc__ or ""
    drawn: dict[str, Drawn] = {}
    parents: list[str] = []
    for line in doc.splitlines():
        match = LINE.match(line)
        if match is None:
            continue
        depth = len(match["lead"]) // 4
        parents[depth:] = [match["name"]]
        parent = parents[depth - 1] if depth else None
        assert match["name"] not in drawn, f"{match['name']} is drawn twice"
        drawn[match["name"]] = Drawn(
            match["name"], parent, match["kind"], int(match["status"]), match["also"]
        )
    return drawn


def test_the_drawing_is_the_tree() -> None:
    classes = {cls.__name__: cls for cls in tree()}
    drawn = drawing()
    assert set(drawn) == set(classes)
    for name, cls in classes.items():
        entry = drawn[name]
        bases = {b.__name__ for b in cls.__bases__}
        if entry.parent is None:
            assert cls in ROOTS, name
        else:
            assert entry.parent in bases, f"{name} is drawn under {entry.parent}"
        # Every other base is named beside it ("also a ValueError").
        others = bases - {entry.parent, "Exception"}
        assert entry.also == others, name
        assert (entry.kind, entry.status) == (error_type(cls("x")), status_of(cls)), name


def test_every_error_has_one_type_and_one_status() -> None:
    classes = tree()
    statuses: dict[str, set[int]] = {}
    for cls in classes:
        kind = error_type(cls("x"))
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", kind), cls
        assert wire_error(cls("x")) == (status_of(cls), kind)
        statuses.setdefault(kind, set()).add(status_of(cls))
        # A class that names its own type has its own row, so its status is chosen.
        if "type" in vars(cls):
            assert cls in HTTP_STATUS, f"{cls.__name__} has a type but no status"
    # One type, one status: the type alone tells a client what happened.
    assert {kind: s for kind, s in statuses.items() if len(s) > 1} == {}
    assert set(HTTP_STATUS) <= set(classes)
    # The client reads each type back as a class with that very type.
    assert set(FROM_WIRE) == set(statuses)
    for kind, cls in FROM_WIRE.items():
        assert error_type(cls("x")) == kind
    assert FROM_WIRE["invalid_request"] is storage.InvalidInput
    assert FROM_WIRE["internal_error"] is FrontmindError
    # A store the daemon cannot reach: what `except StorageUnavailable` expects (it was
    # raised as the general StorageError, which that did not catch).
    assert FROM_WIRE["storage_unavailable"] is storage.StorageUnavailable
    # Not ours at all: a bug, answered as the root's type.
    assert wire_error(ZeroDivisionError()) == (500, "internal_error")


# Errors no caller meets by their own name: the daemon's body readers' (answered with the
# type of `InvalidInput` and `MessageTooLarge`, which the client raises), the edge's
# abstract root, finer kinds of `SettingsError`, which a caller catches as it, and a
# stream broken by an overload, which a turn reports as its `TurnError` (the model
# adapter's caller catches it as either parent).
INTERNAL = {
    "EdgeError",
    "BadBody",
    "BodyTooLarge",
    "SectionConfigError",
    "TrinketLoadError",
    "ToolDefinitionError",
    "ModelStreamOverloaded",
}


def test_every_error_a_caller_meets_is_a_public_name() -> None:
    """Each error the library or the client raises can be caught by its name from
    `frontmind` (the client raised `ModelOverloaded` or `Forbidden`, and `add_user`
    `UserExists`, that only a private module offered)."""
    for cls in tree():
        if issubclass(cls, FrontmindError) and cls.__name__ not in INTERNAL:
            assert getattr(frontmind, cls.__name__, None) is cls, cls.__name__
            assert cls.__name__ in frontmind.__all__
    for cls in FROM_WIRE.values():  # what the client raises, by the type it reads
        assert getattr(frontmind, cls.__name__, None) is cls, cls.__name__


def test_the_three_disagreements_are_settled() -> None:
    """The types the stream and the table used to give differently."""
    assert actors.ModelOverloaded.type == "model_overloaded"
    assert actors.ModelRejected.type == "model_rejected"
    assert FrontmindError.type == "internal_error"
    assert not hasattr(fm_exceptions, "ForbiddenRequest")
    assert issubclass(storage.StorageError, FrontmindError)


class Raising:
    """A model client whose every call fails with the error the test sets."""

    def __init__(self) -> None:
        self.error: BaseException = RuntimeError("unset")

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        raise self.error

    async def aclose(self) -> None:
        return None


def failing(error: BaseException) -> Callable[..., Awaitable[object]]:
    async def call(*args: object, **kwargs: object) -> object:
        raise error

    return call


async def test_an_error_reads_the_same_in_an_event_a_stream_and_a_body(tmp_path: Path) -> None:
    """For every error of the tree: the library's TurnError, the daemon's SSE `error`
    event and its HTTP error body carry the error's one type; the body has the table's
    status; the event says what the library's does, but for a 500 (its details stay in
    the log, as a body's do); the client raises a class of that type."""
    model = Raising()
    async with (
        Frontmind.open(tmp_path, config(), model=model) as fm,
        serve_app(build_app(fm)) as served,
        httpx2.AsyncClient(base_url=served.url, timeout=30) as http,
        Client(served.url) as client,
    ):
        documents = fm.storage.documents
        for cls in tree():
            model.error = cls("it failed")
            kind = error_type(model.error)
            event = failed(await run_turn(fm, "lib", "hello"))
            assert event.type == kind, cls
            name, data = (await turn(http, "sse", "hello"))[-1]
            assert (name, data["type"]) == ("error", kind), cls
            # As in a body, a 500's details stay in the log; other errors say their own.
            said = INTERNAL_MESSAGE if status_of(cls) == 500 else event.message
            assert data["message"] == said, cls

            setattr(fm.storage, "documents", failing(model.error))  # noqa: B010 - the route's store fails
            try:
                response = await http.get("/v1/documents")
                assert response.status_code == status_of(cls), cls
                assert response.json()["error"]["type"] == kind, cls
                if kind in FROM_WIRE:
                    with pytest.raises(FROM_WIRE[kind]) as raised:
                        await client.documents()
                    assert error_type(raised.value) == kind
            finally:
                setattr(fm.storage, "documents", documents)  # noqa: B010


async def test_the_sdk_errors_arrive_with_their_one_type(tmp_path: Path) -> None:
    """Through the real SDK: an overload (529) and a refused request (400) end the turn
    with the type the daemon's table gives the same error."""
    async with (
        LocalMessagesAPI() as api,
        open_frontmind(api, tmp_path, max_retries=0) as fm,
        serve_app(build_app(fm)) as served,
        httpx2.AsyncClient(base_url=served.url, timeout=30) as http,
    ):
        for status, cls in ((529, actors.ModelOverloaded), (400, actors.ModelRejected)):
            api.schedule(StatusFault(status))
            event = failed(await run_turn(fm, "c1", "hello"))
            api.schedule(StatusFault(status))
            name, data = (await turn(http, "c2", "hello"))[-1]
            assert event.type == data["type"] == cls.type
            assert name == "error"
            assert wire_error(cls("x"))[1] == cls.type
    assert isinstance(event, TurnError)


async def test_an_overloaded_model_says_when_to_retry(tmp_path: Path) -> None:
    """The API's 429/529 says when to retry (`retry-after`); the turn's error event said
    only `model_overloaded`, so a client could not tell a second from an hour. The event
    carries the API's seconds, in the library, over SSE and through the client."""
    async with (
        LocalMessagesAPI() as api,
        open_frontmind(api, tmp_path, max_retries=0) as fm,
        serve_app(build_app(fm)) as served,
        httpx2.AsyncClient(base_url=served.url, timeout=30) as http,
        Client(served.url) as client,
    ):
        api.schedule(StatusFault(529, retry_after=7))
        event = failed(await run_turn(fm, "c1", "hello"))
        assert (event.type, event.retry_after) == ("model_overloaded", 7.0)
        api.schedule(StatusFault(429, retry_after_ms=1500))
        name, data = (await turn(http, "c2", "hello"))[-1]
        assert (name, data["type"], data["retry_after"]) == ("error", "model_overloaded", 1.5)
        api.schedule(StatusFault(529, retry_after=30))
        events = [e async for e in client.turn("c3", "hello")]
        assert isinstance(events[-1], TurnError)
        assert events[-1].retry_after == 30.0
        # An error that says nothing of when: none.
        api.schedule(StatusFault(529))
        assert failed(await run_turn(fm, "c4", "hello")).retry_after is None


async def test_a_stream_the_api_broke_off_overloaded_says_when_to_retry(tmp_path: Path) -> None:
    """An `overloaded_error` event in a started stream (its 200 long sent, no
    `retry-after` with it) ended the turn as a `stream_error` with no wait, where the
    same overload refused at the door says one: a client retried at once, into the
    overload. It carries the adapter's documented wait (`OVERLOADED_STREAM_WAIT_S` in
    actors/_llm.py) in the library's error event, the daemon's SSE event and the
    client's; a stream broken otherwise still says none."""
    async with (
        LocalMessagesAPI() as api,
        open_frontmind(api, tmp_path) as fm,
        serve_app(build_app(fm)) as served,
        httpx2.AsyncClient(base_url=served.url, timeout=30) as http,
        Client(served.url) as client,
    ):
        api.schedule(MidStreamError(after_events=5))  # after some of the reply
        events = await run_turn(fm, "c1", "hello")
        assert any(isinstance(e, TextDelta) for e in events)
        event = failed(events)
        assert event.type == "stream_error"
        assert "overloaded_error" in event.message
        wait = event.retry_after
        assert wait is not None
        assert wait > 0
        # Broken before any text: retried once, as any broken stream, then said the same.
        api.schedule(MidStreamError(after_events=1), MidStreamError(after_events=1))
        calls = len(api.requests)
        name, data = (await turn(http, "c2", "hello"))[-1]
        assert (name, data["type"], data["retry_after"]) == ("error", "stream_error", wait)
        assert len(api.requests) == calls + 2
        api.schedule(MidStreamError(after_events=5))
        said = [e async for e in client.turn("c3", "hello")]
        assert isinstance(said[-1], TurnError)
        assert (said[-1].type, said[-1].retry_after) == ("stream_error", wait)
        # A stream broken by the API's own failure (`api_error`) says nothing of when.
        api.schedule(MidStreamError(after_events=5, error_type="api_error"))
        assert failed(await run_turn(fm, "c4", "hello")).retry_after is None


def test_one_reading_of_retry_after_for_the_api_and_the_daemon() -> None:
    """The API's answers and the daemon's are read by one function (the client's own
    copy took whole seconds only): milliseconds first, then seconds, bounded to a day;
    nothing usable (an HTTP date, a negative or endless value) is no wait."""
    assert actors.retry_after_seconds({"retry-after": "7"}) == 7.0
    assert actors.retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert actors.retry_after_seconds({"retry-after": "10000000"}) == 86_400.0
    for bad in ("Wed, 21 Oct 2026 07:28:00 GMT", "-3", "inf", "nan", ""):
        assert actors.retry_after_seconds({"retry-after": bad}) is None
    assert actors.retry_after_seconds({}) is None
