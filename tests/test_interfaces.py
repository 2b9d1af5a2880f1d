"""The daemon's interfaces: OpenAPI, the client, list/delete routes, SSE ids and pings,
Prometheus metrics. The real app on a real socket, the real client, the real validator
and the real Prometheus parser."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from openapi_spec_validator import validate
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.routing import Mount, Route

from frontmind import (
    Busy,
    Client,
    ClientError,
    Frontmind,
    FrontmindError,
    InvalidInput,
    NotFound,
    StorageError,
    SyncClient,
    TextDelta,
    ToolStarted,
    TurnCompleted,
    TurnError,
    TurnEvent,
    TurnStarted,
    TurnUsage,
)
from frontmind._exceptions import EdgeError
from frontmind._wire import encode_cursor, from_wire, to_wire
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyText, ScriptedResponder
from frontmind.server._asgi import serve_app
from frontmind.server._daemon import build_app
from frontmind.server._metrics import Metrics
from frontmind.server._routes import ENDPOINTS, describe
from runtime import ActorState
from storage import (
    DEFAULT_USER,
    ContinuumModel,
    Memory,
    Message,
    RawBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    moment,
)
from tests._daemon import daemon, sse_events
from tests._harness import FakeClock, completed, config, frontmind
from tests._postgres import PostgresServer
from tests._raw import address, raw_request

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@asynccontextmanager
async def served(
    data_dir: Path,
    *,
    ttft: float = 0.0,
    metrics: Metrics | None = None,
    turns: dict[str, Any] | None = None,
    **options: Any,
) -> AsyncIterator[tuple[Frontmind, str]]:
    offline = {"time_to_first_token_s": ttft, "tokens_per_second": 0.0}
    cfg = config(offline=offline, turns=turns or {})
    async with (
        Frontmind.open(data_dir, cfg, offline=True) as fm,
        serve_app(build_app(fm, metrics=metrics, **options), graceful_seconds=10) as app,
    ):
        yield fm, app.url


def starlette_of(app: Any) -> Starlette:
    while not isinstance(app, Starlette):
        app = app.app
    return app


async def test_openapi_is_valid_and_describes_every_route(tmp_path: Path) -> None:
    spec = describe()
    validate(spec)
    async with Frontmind.open(tmp_path, offline=True) as fm:
        app = starlette_of(build_app(fm, token="secret"))
        served_routes = {
            (route.path, method.lower())
            for route in app.routes
            if isinstance(route, Route)
            for method in (route.methods or set()) - {"HEAD"}
        }
    described = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    assert served_routes == described
    operations = [op for ops in spec["paths"].values() for op in ops.values()]
    ids = [op["operationId"] for op in operations]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[a-z]+[A-Za-z]*", i) for i in ids), ids
    assert {"createTurn", "listReminders", "listTurns", "createUser"} <= set(ids)
    tags = {t["name"] for t in spec["tags"]}
    assert all(len(op["tags"]) == 1 and op["tags"][0] in tags for op in operations)
    # Each operation lists the auth errors its row's auth level can answer, no others.
    for endpoint in ENDPOINTS:
        responses = spec["paths"][endpoint.path][endpoint.method.lower()]["responses"]
        assert ("401" in responses) == (endpoint.auth != "public"), endpoint.path
        assert ("403" in responses) == (endpoint.auth == "admin"), endpoint.path
        # A token is looked up in storage (503 when it is down); a user's writes meet a
        # user being forgotten (429).
        assert ("503" in responses) >= (endpoint.auth != "public"), endpoint.path
        writes = endpoint.auth == "user" and endpoint.method != "GET"
        assert ("429" in responses) >= writes, endpoint.path
    assert "413" in spec["paths"]["/v1/documents"]["post"]["responses"]  # over the budget
    for public in ("/healthz", "/openapi.json", "/docs"):
        assert "401" not in spec["paths"][public]["get"]["responses"]
        assert spec["paths"][public]["get"]["security"] == []
    schemas = spec["components"]["schemas"]
    # The wire rules: timestamps are ISO strings, a tool input is an object.
    assert schemas["Reminder"]["properties"]["created_at"]["format"] == "date-time"
    assert "input" in schemas["ToolStarted"]["properties"]
    assert "input_json" not in schemas["ToolStarted"]["properties"]
    sse = spec["paths"]["/v1/continuums/{continuum_id}/turns"]["post"]["responses"]["200"]
    # Text to a client that reads whole bodies; the events' schema rides beside it.
    stream = sse["content"]["text/event-stream"]
    assert stream["schema"]["type"] == "string"
    names = set(stream["x-item-schema"]["discriminator"]["mapping"])
    assert names == {"turn.started", "thinking.delta", "text.delta", "tool.started",
                     "tool.finished", "turn.completed", "error"}  # fmt: skip
    async with served(tmp_path / "d") as (_, url), httpx2.AsyncClient(base_url=url) as http:
        assert (await http.get("/openapi.json")).json() == spec
        page = (await http.get("/docs")).text
        assert "openapi.json" in page
        assert "<script src" not in page
        assert "https://" not in page  # no CDN: the page is self-contained


async def test_the_answers_of_an_empty_store_match_their_description(tmp_path: Path) -> None:
    """What a new user first reads, every list empty, is valid against the schema its
    operation describes. An empty page of memories matched both of its two replies (a
    list and a search's hits), which `oneOf` refuses: a validating client failed on it."""
    spec = describe()
    async with served(tmp_path) as (_, url), httpx2.AsyncClient(base_url=url) as http:
        asked = 0
        for endpoint in ENDPOINTS:
            described = spec["paths"][endpoint.path][endpoint.method.lower()]["responses"]
            media = described[str(endpoint.ok)].get("content", {}).get("application/json")
            if endpoint.method != "GET" or "{" in endpoint.path or media is None:
                continue
            schema = {**media["schema"], "components": spec["components"]}
            for params in ({}, {"q": "anything"}) if endpoint.alt else ({},):
                answer = await http.get(endpoint.path, params=params)
                assert answer.status_code == endpoint.ok, (endpoint.path, answer.text)
                errors = list(Draft202012Validator(schema).iter_errors(answer.json()))
                assert errors == [], (endpoint.path, params, errors[0].message)
                asked += 1
        assert asked >= 8


async def test_a_malformed_request_is_answered_with_a_described_status(tmp_path: Path) -> None:
    """Every operation with a body or a path parameter checks it: a body of the wrong
    shape and a malformed path value are answered 400, a status its description lists."""
    spec = describe()
    async with served(tmp_path) as (_, url), httpx2.AsyncClient(base_url=url) as http:
        for endpoint in ENDPOINTS:
            described = spec["paths"][endpoint.path][endpoint.method.lower()]["responses"]
            headers = {"content-type": "application/json"}
            path = endpoint.path.replace("{continuum_id}", "ada").replace("{name}", "default")
            path = path.replace("{reminder_id}", "1").replace("{memory_id}", "1")
            path = path.replace("{label}", "notes")
            if endpoint.body is not None:
                answer = await http.request(endpoint.method, path, content=b"[1]", headers=headers)
                assert answer.status_code == 400, (endpoint.path, answer.text)
                assert "400" in described, f"{endpoint.method} {endpoint.path}"
            for param in endpoint.params:
                if param.where != "path":
                    continue
                bad = endpoint.path.replace("{" + param.name + "}", "no%20such!")
                for other in ("continuum_id", "name", "reminder_id", "memory_id", "label"):
                    bad = bad.replace("{" + other + "}", "1")
                body = b"{}" if endpoint.body is not None else None
                answer = await http.request(endpoint.method, bad, content=body, headers=headers)
                assert answer.status_code == 400, (bad, answer.text)
                assert "400" in described, f"{endpoint.method} {endpoint.path}"


async def test_the_edge_s_answers_to_a_body_are_described(tmp_path: Path) -> None:
    """Every operation that takes a body answers, at the edge, a body that is not JSON
    (415), over `max_body_bytes` (413) or that stalls (408): statuses its description
    lists, so a generated client reads them as the errors they are."""
    spec = describe()
    async with served(tmp_path, max_body_bytes=2000, body_idle_seconds=0.2) as (_, url):
        host, port = address(url)
        for endpoint in ENDPOINTS:
            if endpoint.body is None:
                continue
            described = spec["paths"][endpoint.path][endpoint.method.lower()]["responses"]
            path = endpoint.path.replace("{continuum_id}", "ada").replace("{name}", "bob")
            path = path.replace("{reminder_id}", "1")
            head = f"{endpoint.method} {path} HTTP/1.1\r\nhost: {host}:{port}\r\n"
            sent = {
                415: head + "content-type: text/plain\r\ncontent-length: 2\r\n\r\n{}",
                413: head + "content-type: application/json\r\ncontent-length: 99999\r\n\r\n",
                408: head + "content-type: application/json\r\ncontent-length: 9\r\n\r\n{",
            }
            for status, request in sent.items():
                response = await raw_request(url, request.encode())
                assert response.status == status, (endpoint.path, response.body)
                assert str(status) in described, f"{endpoint.method} {endpoint.path}: {status}"


async def test_the_app_mounted_in_another_answers_as_its_table_says(tmp_path: Path) -> None:
    """`build_app` mounted under a prefix of your own server: each route keeps its auth
    level (the health check and the description need no token) and a 405 still names
    the methods the path takes. Both read the full path: every route needed a token
    there, and a 405 came without its Allow header."""
    async with Frontmind.open(tmp_path, config(), offline=True) as fm:
        outer = Starlette(routes=[Mount("/fm", app=build_app(fm, token="secret"))])
        async with serve_app(outer) as app, httpx2.AsyncClient(base_url=app.url) as http:
            for public in ("/healthz", "/openapi.json", "/docs"):
                assert (await http.get("/fm" + public)).status_code == 200, public
            assert (await http.get("/fm/v1/continuums")).status_code == 401
            auth = {"authorization": "Bearer secret"}
            assert (await http.get("/fm/v1/continuums", headers=auth)).status_code == 200
            answer = await http.patch("/fm/v1/continuums", json={}, headers=auth)
            assert answer.status_code == 405
            assert answer.headers["allow"] == "GET, HEAD"
            answer = await http.post("/fm/ui/", json={}, headers=auth)  # the console's
            assert (answer.status_code, answer.headers["allow"]) == (405, "GET, HEAD")


async def test_a_401_names_the_scheme_to_authenticate_with(tmp_path: Path) -> None:
    """RFC 9110 §15.5.2: a 401 carries WWW-Authenticate, the challenge a client answers
    (RFC 6750 §3: Bearer, and `invalid_token` for a token sent and refused)."""
    async with served(tmp_path, token="secret") as (_, url):
        async with httpx2.AsyncClient(base_url=url) as anonymous:
            answer = await anonymous.get("/v1/reminders")
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == 'Bearer realm="frontmind"'
        async with httpx2.AsyncClient(
            base_url=url, headers={"authorization": "Bearer no"}
        ) as wrong:
            answer = await wrong.get("/v1/reminders")
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == (
            'Bearer realm="frontmind", error="invalid_token"'
        )


async def test_client_runs_turns_and_manages_records(tmp_path: Path) -> None:
    async with served(tmp_path) as (fm, url), Client(url) as c:
        events = [e async for e in c.turn("ada", "remind me to water the plants in 10 minutes")]
        assert isinstance(events[0], TurnStarted)
        assert isinstance(events[-1], TurnCompleted)
        assert any(isinstance(e, TextDelta) for e in events)
        started = next(e for e in events if isinstance(e, ToolStarted))
        assert '"water the plants"' in started.input_json
        assert [r.turn_id for r in await c.turns("ada")] == [events[-1].turn_id]
        history, stored = await c.history("ada"), await fm.history("ada")
        # The same records, times included (they cross the wire at the microsecond).
        assert [(m.role, m.content, m.seq) for m in history] == [
            (m.role, m.content, m.seq) for m in stored
        ]
        for got, want in zip(history, stored, strict=True):
            assert got.created_at == want.created_at

        due = datetime.now(UTC) + timedelta(hours=1)
        reminder = await c.add_reminder("call Bob", due)
        assert reminder.due_at == due
        assert {r.text for r in await c.reminders()} == {"water the plants", "call Bob"}
        await c.delete_reminder(reminder.id)
        assert {r.text for r in await c.reminders()} == {"water the plants"}
        with pytest.raises(NotFound, match="#9999"):
            await c.complete_reminder(9999)
        with pytest.raises(InvalidInput, match="timezone"):
            await c.add_reminder("naive", datetime(2030, 1, 1))

        memory = await c.remember("The cat is named Tom")
        assert [h.memory.id for h in await c.search_memories("cat Tom")] == [memory.id]
        await c.delete_memory(memory.id)
        assert await c.search_memories("cat Tom") == []  # gone from the index too
        with pytest.raises(NotFound):
            await c.delete_memory(memory.id)

        await c.put_document("notes", "plants on Tuesdays")
        assert [d.label for d in await c.documents()] == ["notes"]
        await c.delete_document("notes")
        assert list(await c.documents()) == []


async def test_jobs_come_in_pages_over_the_wire(tmp_path: Path) -> None:
    clock = FakeClock()
    cfg = config(offline={"time_to_first_token_s": 0.0, "tokens_per_second": 0.0})
    async with (
        Frontmind.open(tmp_path, cfg, offline=True, clock=clock) as fm,
        serve_app(build_app(fm), graceful_seconds=10) as app,
        Client(app.url) as c,
    ):
        for n in range(4):  # each pause past the segment gap closes one: three jobs
            completed([e async for e in c.turn("ada", f"turn {n}")])
            clock.advance(31 * 60)
        every = await fm.jobs(limit=-1)
        assert len(every) == 3
        first = await c.jobs(limit=2)
        assert [j.id for j in first] == [j.id for j in every[:2]]
        assert first.next_cursor is not None
        rest = await c.jobs("ada", limit=2, cursor=first.next_cursor)
        assert [j.id for j in rest] == [every[2].id]
        assert rest.next_cursor is None
        with pytest.raises(InvalidInput, match="cursor"):
            await c.jobs(cursor="not-a-cursor")
        # A search is one ranked page: a cursor beside it says so.
        async with httpx2.AsyncClient(base_url=app.url) as http:
            refused = await http.get("/v1/memories", params={"q": "turn", "cursor": "MQ"})
        assert refused.status_code == 400
        assert "one ranked page" in refused.json()["error"]["message"]


async def test_client_sends_content_blocks_and_manages_settings_and_users(
    tmp_path: Path,
) -> None:
    admin = "admin-token"
    async with served(tmp_path, token=admin) as (fm, url), Client(url, token=admin) as c:
        # A message of content blocks, as the library takes it: kept as sent.
        document: dict[str, Any] = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Ferns like shade."},
        }
        blocks: list[dict[str, Any]] = [document, {"type": "text", "text": "What does it say?"}]
        events = [e async for e in c.turn("ada", blocks)]
        assert isinstance(events[-1], TurnCompleted)
        (first, *_) = await c.history("ada")
        assert [type(b).__name__ for b in first.content] == ["RawBlock", "TextBlock"]
        assert first.content == (await fm.history("ada"))[0].content

        own, effective = await c.model_settings("ada")
        assert own == ContinuumModel()
        assert effective.max_tokens == fm.config.model.max_tokens
        own, effective = await c.set_model_settings("ada", max_tokens=2048)
        assert (own.max_tokens, effective.max_tokens) == (2048, 2048)
        assert await fm.model_settings("ada") == (own, effective)
        with pytest.raises(InvalidInput, match="budget_tokens"):
            await c.set_model_settings("ada", thinking="enabled", budget_tokens=4096)

        assert await c.mcp_servers() == fm.mcp_servers() == []  # none configured
        assert await c.offered_tools() == fm.offered_tools()
        reload = await c.reload_tools()
        assert (reload.added, reload.removed, reload.updated) == ((), (), ())
        assert await c.jobs() == await fm.jobs() == []
        with pytest.raises(InvalidInput, match="continuum id"):
            await c.jobs("not an id")

        token = await c.add_user("bob")
        assert [u.name for u in await c.users()] == ["bob"]
        async with Client(url, token=token) as bob:
            await bob.remember("Bob keeps bees")
            assert [m.text for m in await fm.user("bob").memories()] == ["Bob keeps bees"]
            with pytest.raises(EdgeError, match="admin"):
                await bob.users()


async def test_the_sync_client_runs_turns_and_calls_from_a_plain_thread(tmp_path: Path) -> None:
    def script(url: str) -> tuple[list[TurnEvent], list[str]]:
        # No event loop in this thread: the blocking client runs its own.
        with SyncClient(url) as c:
            events = list(c.turn("ada", "remind me to water the plants in 10 minutes"))
            texts = [r.text for r in c.reminders()]
            with pytest.raises(NotFound):
                c.complete_reminder(9999)
        return events, texts

    def leave_early(url: str) -> list[TurnEvent]:
        with SyncClient(url) as c:
            seen = []
            for event in c.turn("ada", "and then?"):
                seen.append(event)
                break  # the model has not answered yet (30 s to its first token)
        return seen

    async with served(tmp_path / "quick") as (fm, url):
        events, texts = await anyio.to_thread.run_sync(script, url)
    assert isinstance(events[0], TurnStarted)
    assert isinstance(events[-1], TurnCompleted)
    assert any(isinstance(e, ToolStarted) for e in events)
    assert texts == ["water the plants"]
    async with served(tmp_path / "slow", ttft=30) as (fm, url):
        early = await anyio.to_thread.run_sync(leave_early, url)
    assert [type(e) for e in early] == [TurnStarted]
    # The server finished every response before it stopped: the turn was cancelled.
    async with Frontmind.open(tmp_path / "slow", offline=True) as fm:
        assert [r.status for r in await fm.turns("ada")] == ["cancelled"]


async def test_every_list_pages_with_a_cursor(tmp_path: Path) -> None:
    async with served(tmp_path) as (fm, url), Client(url) as c:
        for n in range(5):
            await fm.remember(f"memory {n}")
            await fm.add_reminder(f"reminder {n}")
            await fm.put_document(f"doc{n}", "x")
        for cid in ("a", "b", "c"):
            async for _ in c.turn(cid, "hello"):
                pass
        async for _ in c.turn("a", "again"):
            pass

        async def walk(fetch: Any) -> list[Any]:
            items, cursor = [], None
            while True:
                page = await fetch(cursor)
                assert len(page) <= 2
                items += page
                if page.next_cursor is None:
                    return items
                cursor = page.next_cursor

        memories = await walk(lambda cur: c.memories(2, cursor=cur))
        assert [m.text for m in memories] == [f"memory {n}" for n in reversed(range(5))]
        reminders = await walk(lambda cur: c.reminders(limit=2, cursor=cur))
        assert [r.text for r in reminders] == [f"reminder {n}" for n in range(5)]
        documents = await walk(lambda cur: c.documents(limit=2, cursor=cur))
        assert [d.label for d in documents] == [f"doc{n}" for n in range(5)]
        messages = await walk(lambda cur: c.history("a", limit=2, cursor=cur))
        assert [m.seq for m in messages] == [0, 1, 2, 3]
        turns = await walk(lambda cur: c.turns("a", 1, cursor=cur))
        assert [t.user_text for t in turns] == ["again", "hello"]  # latest page first
        continuums = await walk(lambda cur: c.continuums(limit=2, cursor=cur))
        assert continuums[0].id == "a"  # the most recently active
        assert sorted(s.id for s in continuums) == ["a", "b", "c"]
        a = continuums[0]
        assert a.turns == 2
        assert a.message_count == 4
        assert 0.0 < a.cached_share < 1.0  # the second turn read the cache
        assert a.input_cost_tokens > 0
        assert a.output_tokens > 0
        with pytest.raises(InvalidInput, match="cursor"):
            await c.memories(cursor="not-a-cursor!")


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_a_forged_time_cursor_is_refused_by_name_on_either_store(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    # A time cursor's id with a NUL: PostgreSQL's text refuses it, which had answered
    # 503 storage_unavailable (a client retries that) instead of the cursor's 400.
    storage = {}
    if store == "postgres":
        server: PostgresServer = request.getfixturevalue("pg_server")
        storage = {"url": server.new_database()}
    cfg = config(storage=storage)
    forged = encode_cursor([datetime(2026, 1, 1, tzinfo=UTC), "a\x00b"])
    async with (
        Frontmind.open(tmp_path, cfg, offline=True) as fm,
        serve_app(build_app(fm), graceful_seconds=10) as app,
        Client(app.url) as c,
    ):
        async for _ in c.turn("a", "hello"):
            pass
        with pytest.raises(InvalidInput, match="invalid cursor"):
            await c.continuums(cursor=forged)
        with pytest.raises(InvalidInput, match="invalid cursor"):
            await c.turns("a", cursor=forged)


async def test_deleting_a_continuum_leaves_nothing_behind(tmp_path: Path) -> None:
    async with served(tmp_path) as (fm, url), Client(url) as c:
        for cid, word in (("gone", "zanzibar"), ("kept", "kyoto")):
            async for _ in c.turn(cid, f"tell me about {word}"):
                pass
        assert await fm.storage.search_messages(DEFAULT_USER, "zanzibar")
        await c.delete_continuum("gone")
        assert [s.id for s in await c.continuums()] == ["kept"]
        assert await fm.storage.search_messages(DEFAULT_USER, "zanzibar") == []
        assert await fm.storage.search_messages(DEFAULT_USER, "kyoto")
        assert await fm.turns() == await fm.turns("kept")
        with pytest.raises(NotFound):
            await c.history("gone")
        with pytest.raises(NotFound):
            await c.delete_continuum("gone")
        # It can start afresh.
        events = [e async for e in c.turn("gone", "hello again")]
        assert isinstance(events[-1], TurnCompleted)
        assert [m.seq for m in await c.history("gone")] == [0, 1]


async def test_timestamps_are_iso_8601_with_an_offset_on_the_wire(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, url), httpx2.AsyncClient(base_url=url) as http:
        due = "2030-06-01T09:30:00+02:00"
        made = (await http.post("/v1/reminders", json={"text": "x", "due_at": due})).json()
        assert datetime.fromisoformat(made["due_at"]) == datetime.fromisoformat(due)
        assert made["due_at"] == "2030-06-01T07:30:00Z"  # RFC 3339, in UTC
        assert datetime.fromisoformat(made["created_at"]).tzinfo is not None
        async with Client(url) as c:
            async for _ in c.turn("ada", "hi"):
                pass
        listed = (await http.get("/v1/continuums")).json()["continuums"][0]
        assert listed["last_activity_at"].endswith("Z")
        turn = (await http.get("/v1/continuums/ada/turns")).json()["turns"][0]
        assert turn["started_at"].endswith("Z")


async def test_sse_events_have_ids_and_pings_keep_a_slow_stream_alive(tmp_path: Path) -> None:
    # The first token comes after 0.5 s; pings every 0.02 s fill the silence.
    async with (
        served(tmp_path, ttft=0.5, ping_seconds=0.02) as (_, url),
        httpx2.AsyncClient(base_url=url, timeout=30) as http,
        http.stream("POST", "/v1/continuums/ada/turns", json={"message": "hi"}) as response,
    ):
        blocks: list[list[str]] = [[]]
        async for line in response.aiter_lines():
            if line:
                blocks[-1].append(line)
            elif blocks[-1]:
                blocks.append([])
    blocks = [b for b in blocks if b]
    pings = [b for b in blocks if b == [": ping"]]
    events = [b for b in blocks if b != [": ping"]]
    assert pings, "no ping while the model was silent"
    for block in events:
        assert block[0].startswith("id: "), block
        assert block[1].startswith("event: "), block
    ids = [block[0][4:] for block in events]
    assert len(set(ids)) == len(ids)
    assert events[-1][1] == "event: turn.completed"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


async def test_metrics_are_prometheus_in_seconds_with_process_metrics(tmp_path: Path) -> None:
    metrics = Metrics()
    async with served(tmp_path, ttft=0.05, metrics=metrics, token="t") as (_, url):
        async with Client(url, token="t") as c:
            async for _ in c.turn("ada", "hello"):
                pass
            with pytest.raises(ClientError, match="unauthorized"):
                async with Client(url, token="wrong") as bad:
                    await bad.memories()
            with pytest.raises(NotFound):
                await c.delete_memory(41)
            # A reply left mid-stream: the turn is cancelled, and counted so.
            async with httpx2.AsyncClient(base_url=url, headers={"authorization": "Bearer t"}) as h:
                body = {"message": "a long question " * 6}
                async with h.stream("POST", "/v1/continuums/ada/turns", json=body) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("event: turn.started"):
                            break
                text = (await h.get("/metrics")).text
        found = samples(text)
        assert found[("frontmind_turns_total", (("outcome", "completed"),))] == 1
        assert found[("frontmind_http_responses_total", (("code", "401"),))] == 1
        assert found[("frontmind_http_responses_total", (("code", "404"),))] == 1
        assert found[("frontmind_turn_seconds_count", ())] == 1
        assert 0 < found[("frontmind_turn_seconds_sum", ())] < 60  # seconds, not ms
        assert ("frontmind_first_token_seconds_bucket", (("le", "0.1"),)) in found
        assert any(name.startswith("process_") for name, _ in found)
    # The server has finished every response: the hung-up turn was counted cancelled.
    cancelled = metrics.registry.get_sample_value("frontmind_turns_total", {"outcome": "cancelled"})
    assert cancelled == 1


async def test_log_flags_give_json_lines_with_timestamps_and_an_access_log(
    tmp_path: Path,
) -> None:
    flags = ("--log-level", "info", "--log-format", "json", "--access-log")
    async with daemon(tmp_path, *flags) as d, Client(d.url) as c:
        events = [e async for e in c.turn("ada", "hello")]
        assert await d.stop() == 0
        lines = [json.loads(line) for line in (await d.read_stderr()).decode().splitlines()]
    access = [line for line in lines if line["logger"] == "frontmind.access"]
    assert any("POST /v1/continuums/ada/turns 200" in line["message"] for line in access)
    # Each request's facts are fields of their own, the turn's id among them.
    (posted,) = [line for line in access if line["method"] == "POST"]
    assert posted["path"] == "/v1/continuums/ada/turns"
    assert posted["status"] == 200
    assert posted["user"] == "default"
    started = events[0]
    assert isinstance(started, TurnStarted)
    assert posted["turn_id"] == started.turn_id
    assert 0 < posted["duration_ms"] < 60_000
    for line in lines:
        assert datetime.fromisoformat(line["time"]).tzinfo is not None
        assert {"level", "message", "turn_id"} <= set(line)
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    turn_lines = [line for line in lines if line["logger"] == "frontmind.turn"]
    assert turn_lines
    assert all(line["turn_id"] == done.turn_id for line in turn_lines)
    assert any("turn completed" in line["message"] for line in turn_lines)


async def test_metrics_count_the_tokens_of_turns_that_did_not_complete(tmp_path: Path) -> None:
    # A refused turn (and a failed or cancelled one) paid for its model calls: its
    # record, the continuum's cost and `frontmind stats` count them. /metrics counted
    # only completed turns' tokens, so its totals fell short of the stored ones.
    responder = ScriptedResponder()
    responder.push("first", Reply((ReplyText("I can't"),), stop_reason="refusal"))
    metrics = Metrics()
    async with (
        LocalMessagesAPI(responder=responder) as api,
        frontmind(api, tmp_path) as fm,
        serve_app(build_app(fm, metrics=metrics), graceful_seconds=10) as app,
        Client(app.url) as c,
    ):
        assert isinstance([e async for e in c.turn("ada", "hello")][-1], TurnCompleted)
        refused = [e async for e in c.turn("ada", "something refused")][-1]
        assert isinstance(refused, TurnError)
        assert refused.type == "refusal"
        records = list(await c.turns("ada"))
    assert [r.status for r in records] == ["completed", "failed"]
    assert records[1].usage.input_tokens > 0  # the refused call was billed
    stored = sum((r.usage for r in records), TurnUsage())
    count = metrics.registry.get_sample_value
    assert count("frontmind_turns_total", {"outcome": "failed"}) == 1
    assert count("frontmind_tokens_total", {"kind": "uncached_input"}) == stored.input_tokens
    assert count("frontmind_tokens_total", {"kind": "cache_read"}) == (
        stored.cache_read_input_tokens
    )
    assert count("frontmind_tokens_total", {"kind": "cache_write"}) == (
        stored.cache_creation_input_tokens
    )
    assert count("frontmind_tokens_total", {"kind": "output"}) == stored.output_tokens


async def test_metrics_count_each_turn_as_its_record_says(tmp_path: Path) -> None:
    # A reader that leaves mid-stream was counted cancelled, though its turn had often
    # committed already (a fast model's reply comes whole): its record, the history and
    # `frontmind stats` said completed. /metrics now counts what the records say.
    metrics = Metrics()
    async with (
        served(tmp_path, metrics=metrics) as (_, url),
        Client(url) as c,
    ):
        for i in range(12):
            async with c.turn(f"c{i % 3}", f"hello {i}") as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        break  # left at the first text: before or after the commit
    # The server has finished every response: every record is final.
    statuses: Counter[str] = Counter()
    async with Frontmind.open(tmp_path, config(), offline=True) as fm:
        for i in range(3):
            statuses.update(r.status for r in await fm.turns(f"c{i}"))
    assert sum(statuses.values()) == 12
    count = metrics.registry.get_sample_value
    for outcome in ("completed", "failed", "cancelled"):
        assert count("frontmind_turns_total", {"outcome": outcome}) == statuses[outcome], outcome


class _Counted(Metrics):
    """Metrics that say when a response was counted, so a test waits on that."""

    def __init__(self) -> None:
        super().__init__()
        self.counted = anyio.Event()

    def response(self, status: int) -> None:
        super().response(status)
        self.counted.set()


async def test_a_client_leaving_mid_body_is_not_counted_as_a_500(tmp_path: Path) -> None:
    # No answer was sent and nothing failed: it was counted (and logged) as a 500, and a
    # 5xx alert fired for every client that hung up while sending.
    metrics = _Counted()
    async with served(tmp_path, metrics=metrics) as (_, url):
        host, port = address(url)
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(
                b"POST /v1/reminders HTTP/1.1\r\nHost: %s:%d\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                b'{"text":' % (host.encode(), port)
            )
        with anyio.fail_after(10):
            await metrics.counted.wait()
    count = metrics.registry.get_sample_value
    assert count("frontmind_http_responses_total", {"code": "500"}) is None
    assert count("frontmind_http_responses_total", {"code": "499"}) == 1


async def test_include_completed_is_a_boolean_or_refused(tmp_path: Path) -> None:
    # Python's `requests` sends `True` for True: it was read as false, and the completed
    # reminders were left out without a word; so was `yes`.
    async with served(tmp_path) as (fm, url), httpx2.AsyncClient(base_url=url) as h:
        done = await fm.add_reminder("done already")
        await fm.complete_reminder(done.id)
        await fm.add_reminder("still open")

        async def texts(value: str) -> list[str]:
            answer = await h.get(f"/v1/reminders?include_completed={value}")
            assert answer.status_code == 200, answer.text
            return sorted(r["text"] for r in answer.json()["reminders"])

        for value in ("true", "True", "TRUE", "1"):
            assert await texts(value) == ["done already", "still open"], value
        for value in ("false", "False", "0"):
            assert await texts(value) == ["still open"], value
        assert (await h.get("/v1/reminders")).json()["reminders"][0]["text"] == "still open"
        for value in ("yes", "", "on", "%FF"):
            answer = await h.get(f"/v1/reminders?include_completed={value}")
            assert answer.status_code == 400, value
            assert answer.json()["error"]["type"] == "invalid_request"
            assert "include_completed must be true or false" in answer.json()["error"]["message"]


async def test_a_path_cannot_forge_a_line_of_the_text_log(tmp_path: Path) -> None:
    # The path is percent-decoded before the access log quotes it: a `%0A` in it ended
    # the access line and began one of the client's own, an ERROR the daemon never had.
    forged = "2026-12-07 07:00:00,000 ERROR frontmind.daemon [-] the database is corrupt"
    async with daemon(tmp_path, "--log-level", "info", "--access-log") as d, d.client() as h:
        raw = "/v1/x%0A" + forged.replace(" ", "%20") + "%E2%80%A8tail"
        assert (await h.get(raw)).status_code == 404
        assert await d.stop() == 0
        lines = (await d.read_stderr()).decode().splitlines()
    assert not any(line.startswith(forged) for line in lines), lines
    (access,) = [line for line in lines if " frontmind.access " in line]
    assert "GET /v1/x%0A2026-12-07" in access
    assert "%E2%80%A8tail 404" in access  # U+2028 too: a line break to many log viewers
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ", line) for line in lines)


async def test_busy_and_failures_come_back_as_library_errors_and_are_counted(
    tmp_path: Path,
) -> None:
    metrics = Metrics()
    # A model that takes 30 s to its first token: the first turn is still running
    # while the rest of the test happens, and is cancelled when its stream is left.
    async with (
        served(tmp_path, ttft=30, metrics=metrics, turns={"max_queued": 1}) as (fm, url),
        Client(url) as c,
    ):
        async with (
            c.turn("ada", "first") as running,
            httpx2.AsyncClient(base_url=url) as http,
        ):
            assert isinstance(await running.__anext__(), TurnStarted)
            body = {"message": "second"}
            # The answer's headers come once the turn is queued; its events would not.
            async with http.stream("POST", "/v1/continuums/ada/turns", json=body) as queued:
                assert queued.status_code == 200
                with pytest.raises(Busy, match="waiting"):
                    await c.turn("ada", "third").__anext__()
                with pytest.raises(Busy, match="turn in progress"):
                    await c.delete_continuum("ada")

        # A bug answers a JSON 500 (`internal_error`), raised through the table as the root.
        async def broken(*args: object, **kwargs: object) -> list[Memory]:
            raise RuntimeError("a bug")

        fm.storage.memories = broken  # type: ignore[method-assign]
        with pytest.raises(FrontmindError, match=r"internal error \(logged by the daemon\)") as bug:
            await c.memories()
        assert type(bug.value) is FrontmindError
        await fm.storage.close()  # storage gone: a 503 saying so, and the daemon lives on
        with pytest.raises(StorageError, match="the storage is closed"):
            await c.reminders()
        await c.health()  # still answering
    count = metrics.registry.get_sample_value
    assert count("frontmind_http_responses_total", {"code": "429"}) == 2
    assert count("frontmind_http_responses_total", {"code": "500"}) == 1
    assert count("frontmind_http_responses_total", {"code": "503"}) == 1


async def test_a_turn_refused_for_a_full_queue_is_counted_as_refused(tmp_path: Path) -> None:
    # A turn refused because its continuum already had turns.max_queued waiting leaves a
    # record (cancelled, "busy: ..."), as the turns refused for their wait do; /metrics
    # counted those as refused but this one nowhere, so its records outnumbered them.
    metrics = Metrics()
    async with (
        served(tmp_path, ttft=30, metrics=metrics, turns={"max_queued": 1}) as (_, url),
        Client(url) as c,
        c.turn("ada", "first") as running,
        httpx2.AsyncClient(base_url=url) as http,
    ):
        assert isinstance(await running.__anext__(), TurnStarted)
        # The answer's headers come once the turn is queued; its events would not.
        async with http.stream("POST", "/v1/continuums/ada/turns", json={"message": "second"}):
            with pytest.raises(Busy, match="waiting"):
                await c.turn("ada", "third").__anext__()
    # The server has finished every response, and closing wrote every record.
    async with Frontmind.open(tmp_path, config(), offline=True) as fm:
        records = await fm.turns("ada")
    assert sorted((r.user_text, r.status) for r in records) == [
        ("first", "cancelled"),
        ("second", "cancelled"),
        ("third", "cancelled"),
    ]
    count = metrics.registry.get_sample_value
    assert count("frontmind_turns_total", {"outcome": "cancelled"}) == 2
    assert count("frontmind_turns_refused_total") == 1


def test_every_block_kind_crosses_the_wire_and_reads_back() -> None:
    thinking = '{"type":"thinking","thinking":"hmm","signature":"c2ln"}'
    image = [{"type": "text", "text": "a chart"}, {"type": "image", "source": {"type": "x"}}]
    message = Message(
        "assistant",
        (
            RawBlock("thinking", thinking),
            TextBlock("Here."),
            ToolUseBlock("toolu_1", "look", '{"q": "cats", "n": 2}'),
            ToolResultBlock("toolu_1", "a chart", content_json=json.dumps(image)),
            ToolResultBlock("toolu_2", "plain", is_error=True),
        ),
        seq=3,
        turn_id="turn_1",
        created_at=moment(1_700_000_000.25),
    )
    shown = to_wire(message)
    assert shown["created_at"] == "2023-11-14T22:13:20.250000Z"
    assert shown["content"][0] == json.loads(thinking)  # the block's own JSON
    assert shown["content"][2]["input"] == {"q": "cats", "n": 2}
    assert shown["content"][3]["content"] == image
    assert shown["content"][4]["content"] == "plain"
    assert "content_json" not in shown["content"][4]
    back = from_wire(json.dumps(shown), Message)
    assert back.created_at == message.created_at
    raw = back.content[0]
    assert isinstance(raw, RawBlock)
    assert raw.kind == "thinking"
    assert json.loads(raw.json) == json.loads(thinking)
    assert back.content[1] == message.content[1]
    use = back.content[2]
    assert isinstance(use, ToolUseBlock)
    assert json.loads(use.input_json) == {"q": "cats", "n": 2}
    result = back.content[3]
    assert isinstance(result, ToolResultBlock)
    assert result.content == "a chart"
    assert json.loads(result.content_json) == image
    assert back.content[4] == message.content[4]


async def test_a_continuum_given_up_on_is_busy_everywhere_never_a_kernel_error(
    tmp_path: Path,
) -> None:
    """The conversation actor of a continuum given up on for now (its restart limit
    reached): every call that needs it is `Busy` (429), in the library and over HTTP,
    and a turn already answered 200 ends its stream with a `busy` error event (no
    broken stream, no `KernelError`)."""
    async with served(tmp_path) as (fm, url), httpx2.AsyncClient(base_url=url) as http:
        completed([event async for event in fm.turn("ada", "hello")])
        cell = fm._runtime._lanes[(DEFAULT_USER, "ada")].conversation._cell
        cell.state, cell._retry_at = ActorState.FAILED, time.monotonic() + 600
        with pytest.raises(Busy, match="recovering"):
            await fm.set_model_settings("ada", max_tokens=2048)
        with pytest.raises(Busy, match="recovering"):
            await fm.context("ada", "hi")
        put = await http.put("/v1/continuums/ada/settings", json={"max_tokens": 2048})
        assert put.status_code == 429
        assert put.json()["error"]["type"] == "busy"
        preview = await http.get("/v1/continuums/ada/context", params={"message": "hi"})
        assert preview.status_code == 429
        assert preview.json()["error"]["type"] == "busy"
        # Each answer is one the operation's description lists.
        paths = describe()["paths"]
        assert "429" in paths["/v1/continuums/{continuum_id}/settings"]["put"]["responses"]
        assert "429" in paths["/v1/continuums/{continuum_id}/context"]["get"]["responses"]
        async with http.stream("POST", "/v1/continuums/ada/turns", json={"message": "hi"}) as r:
            assert r.status_code == 200
            events = [event async for event in sse_events(r)]
        assert [name for name, _ in events] == ["error"]
        assert events[0][1]["type"] == "busy"
        cell._retry_at = 0.0  # its cool-down over: a trial turn goes through
        completed([event async for event in fm.turn("ada", "again")])
