"""The real daemon as a child process, in offline mode, driven over HTTP."""

from __future__ import annotations

import signal
import socket
from collections.abc import AsyncGenerator
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import httpx2
import pytest

from actors import ModelEvent, ModelRequest
from frontmind import Config, Frontmind
from frontmind._exceptions import INTERNAL_MESSAGE
from frontmind.server._asgi import serve_app
from frontmind.server._daemon import build_app
from storage import INTERRUPTED_TURN
from tests._daemon import daemon, run_cli, sse_events, turn

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def slow_model(data_dir: Path, ttft: float = 0.2, rate: float = 60.0) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "frontmind.toml").write_text(
        f"[offline]\ntime_to_first_token_s = {ttft}\ntokens_per_second = {rate}\n"
    )


async def test_multi_turn_conversation_over_sse(tmp_path: Path) -> None:
    async with daemon(tmp_path) as d, d.client() as client:
        first = await turn(client, "alice", "hello there")
        names = [name for name, _ in first]
        assert names[0] == "turn.started"
        assert names[-1] == "turn.completed"
        assert "text.delta" in names
        done = first[-1][1]
        assert set(done["usage"]) >= {
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        }
        assert set(done["timings_ms"]) == {"compose", "first_token", "total"}
        assert {s["name"] for s in done["sections"]} >= {"datetime_section", "base_prompt"}
        assert set(done["sections"][0]) >= {"name", "placement", "status", "elapsed_ms"}
        assert "cache_miss_reason" in done
        text = "".join(data["text"] for name, data in first if name == "text.delta")
        assert text == done["text"]
        second = await turn(client, "alice", "remind me to water the plants in 10 minutes")
        names = [name for name, _ in second]
        assert "tool.started" in names
        assert "tool.finished" in names
        third = await turn(client, "alice", "thanks")
        assert third[-1][1]["usage"]["cache_read_input_tokens"] > 0
        history = (await client.get("/v1/continuums/alice/messages")).json()["messages"]
        assert [m["role"] for m in history] == ["user", "assistant"] * 2 + ["user", "assistant"] + [
            "user",
            "assistant",
        ]
        assert history[3]["content"][1]["type"] == "tool_use"
        assert history[3]["content"][1]["input"]["text"] == "water the plants"
        turns = (await client.get("/v1/continuums/alice/turns")).json()["turns"]
        assert [t["status"] for t in turns] == ["completed"] * 3
        metrics = (await client.get("/metrics")).text
        assert 'frontmind_turns_total{outcome="completed"} 3.0' in metrics
        assert "frontmind_compose_seconds_bucket" in metrics
        assert "frontmind_cache_warm_ups_total 0.0" in metrics  # counted, none sent here
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        assert (await client.get("/readyz")).json() == {"status": "ready"}
        assert await d.stop() == 0


async def test_context_reminders_and_memories(tmp_path: Path) -> None:
    due = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    async with daemon(tmp_path) as d, d.client() as client:
        created = await client.post(
            "/v1/reminders", json={"text": "water the plants", "due_at": due}
        )
        assert created.status_code == 201
        reminder_id = created.json()["id"]
        assert (
            await client.post("/v1/memories", json={"text": "The cat is named Tom"})
        ).status_code == 201
        assert (
            await client.post("/v1/documents", json={"label": "notes", "content": "Project Falcon"})
        ).status_code == 201
        context = await client.get(
            "/v1/continuums/bob/context", params={"message": "how is my cat?"}
        )
        assert context.status_code == 200
        body = context.json()
        center = body["messages"][-2]["content"][0]["text"]
        assert "water the plants" in center
        assert "The cat is named Tom" in center
        assert "Project Falcon" in body["system"][1]["text"]
        assert body["messages"][-1]["content"] == [{"type": "text", "text": "how is my cat?"}]
        # Nothing was stored by looking.
        assert (await client.get("/v1/continuums/bob/messages")).status_code == 404
        found = (await client.get("/v1/memories", params={"q": "cat"})).json()["memories"]
        assert found[0]["memory"]["text"] == "The cat is named Tom"
        done = await client.post(f"/v1/reminders/{reminder_id}/complete", json={})
        assert done.json()["completed_at"] is not None
        assert (await client.get("/v1/reminders")).json()["reminders"] == []
        assert await d.stop() == 0


async def test_bad_input_gets_clear_4xx_and_changes_nothing(tmp_path: Path) -> None:
    async with daemon(tmp_path) as d, d.client() as client:
        await turn(client, "alice", "hello")
        cases = [
            ("POST", "/v1/continuums/alice/turns", b"{not json", 400, "malformed JSON"),
            (
                "POST",
                "/v1/continuums/alice/turns",
                b'{"message": "x\\ud800"}',
                400,
                "lone surrogate",
            ),
            ("POST", "/v1/continuums/alice/turns", b'{"message": "a\\u0000b"}', 400, "NUL"),
            ("POST", "/v1/continuums/alice/turns", b"{}", 400, "message"),
            ("POST", "/v1/continuums/alice/turns", b'{"message": "  "}', 400, "empty"),
            ("POST", "/v1/continuums/alice/turns", b'{"message": 5}', 400, "Expected `str"),
            (
                "POST",
                "/v1/continuums/alice/turns",
                b'{"message": "' + b"x" * 100_001 + b'"}',
                413,
                "limit is 100000",
            ),
            ("POST", "/v1/continuums/bad.id/turns", b'{"message": "hi"}', 400, "malformed"),
            (
                "POST",
                "/v1/continuums/" + "a" * 65 + "/turns",
                b'{"message": "hi"}',
                400,
                "malformed",
            ),
            ("GET", "/v1/nowhere", b"", 404, "no route"),
            ("DELETE", "/v1/reminders", b"", 405, "not allowed"),
            (
                "POST",
                "/v1/reminders",
                b'{"text": "x", "due_at": "2026-12-01T10:00:00"}',
                400,
                "timezone",
            ),
            ("POST", "/v1/reminders/77/complete", b"", 404, "#77"),
            ("POST", "/v1/memories", b'{"text": "x", "importance": 3}', 400, "between 0 and 1"),
            ("GET", "/v1/continuums/nobody/messages", b"", 404, "nobody"),
            ("GET", "/v1/continuums/alice/context", b"", 400, "message"),
        ]
        for method, path, body, status, fragment in cases:
            response = await client.request(
                method, path, content=body, headers={"content-type": "application/json"}
            )
            assert response.status_code == status, (path, response.text)
            error = response.json()["error"]
            assert fragment in error["message"], (path, error)
            assert error["type"]
        history = (await client.get("/v1/continuums/alice/messages")).json()["messages"]
        assert len(history) == 2
        assert (await client.get("/v1/reminders")).json()["reminders"] == []
        assert (await client.get("/v1/memories")).json()["memories"] == []
        assert [name for name, _ in await turn(client, "alice", "still here?")][-1] == (
            "turn.completed"
        )
        assert await d.stop() == 0


async def test_a_stray_trailing_slash_is_a_404_naming_the_route_never_a_redirect(
    tmp_path: Path,
) -> None:
    """`GET /v1/continuums/` was redirected (307) to an absolute URL built from the
    request the daemon saw: behind a proxy serving the daemon at https://host/fm/ (the
    prefix stripped), the client landed on the host's /v1/continuums, outside the prefix;
    a POST's body was sent twice. Every API route now answers such a path 404, naming
    the route without the slash as the client sent it (its prefix included)."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from frontmind.server._metrics import Metrics

    token = {"authorization": "Bearer s3cret"}
    async with (
        daemon(tmp_path / "data", "--token", "s3cret") as d,
        d.client() as anonymous,
        d.client(headers=token) as client,
    ):
        await turn(client, "ada", "hi")
        cases = [
            ("GET", "/v1/continuums/", "/v1/continuums"),
            ("GET", "/v1/continuums/ada/turns/", "/v1/continuums/ada/turns"),
            ("POST", "/v1/continuums/ada/turns/", "/v1/continuums/ada/turns"),
            ("DELETE", "/v1/continuums/ada/", "/v1/continuums/ada"),
            ("PUT", "/v1/continuums/ada/settings/", "/v1/continuums/ada/settings"),
            ("POST", "/v1/reminders/", "/v1/reminders"),
            ("POST", "/v1/users/", "/v1/users"),
            ("GET", "/metrics/", "/metrics"),
            ("GET", "/readyz/", "/readyz"),
        ]
        for method, path, meant in cases:
            response = await client.request(method, path, json={"message": "hi"})
            assert response.status_code == 404, (path, response.status_code, response.headers)
            assert "location" not in response.headers
            error = response.json()["error"]
            assert error["type"] == "not_found"
            assert error["message"] == (
                f"no route {method} {path}: the API's paths end without a slash ({meant})"
            )
        # A public route's too, without a token (a probe's mistake is no 401).
        healthz = await anonymous.get("/healthz/")
        assert healthz.status_code == 404
        assert healthz.json()["error"]["message"].endswith("(/healthz)")
        # Anything else needs the token still, and a path no route has is a plain 404.
        assert (await anonymous.get("/v1/continuums/")).status_code == 401
        nowhere = await client.get("/v1/nowhere/")
        assert nowhere.json()["error"]["message"] == "no route GET /v1/nowhere/"
        # Nothing was run or stored by the POST of a turn at the wrong path.
        turns = (await client.get("/v1/continuums/ada/turns")).json()["turns"]
        assert len(turns) == 1
        assert await d.stop() == 0
    # Mounted at a path in another app, as a proxy's prefix is: named under the prefix.
    async with (
        Frontmind.open(tmp_path / "mounted", offline=True) as fm,
        serve_app(Starlette(routes=[Mount("/fm", app=build_app(fm, metrics=Metrics()))])) as app,
        httpx2.AsyncClient(base_url=app.url, timeout=30) as http,
    ):
        assert (await http.get("/fm/v1/continuums")).status_code == 200
        response = await http.get("/fm/v1/continuums/")
        assert response.status_code == 404
        assert response.json()["error"]["message"] == (
            "no route GET /fm/v1/continuums/: the API's paths end without a slash"
            " (/fm/v1/continuums)"
        )


async def test_non_loopback_needs_a_token(tmp_path: Path) -> None:
    code, _, err = await run_cli(
        "serve", "--host", "0.0.0.0", "--port", "0", "--offline", "--data-dir", str(tmp_path)
    )
    assert code == 2
    assert "requires a token" in err
    # Every way the README gives to supply one, not only two of them.
    for way in ("--token", "--token-file", "FRONTMIND_TOKEN", "token_file"):
        assert way in err
    assert "Traceback" not in err
    async with daemon(tmp_path, "--host", "0.0.0.0", "--token", "s3cret") as d:
        async with d.client() as anonymous:
            assert (await anonymous.get("/v1/reminders")).status_code == 401
            assert (await anonymous.get("/healthz")).status_code == 200
        async with d.client(headers={"authorization": "Bearer wrong"}) as wrong:
            response = await wrong.get("/v1/reminders")
            assert response.status_code == 401
            assert response.json()["error"]["type"] == "unauthorized"
        async with d.client(headers={"authorization": "Bearer s3cret"}) as ok:
            assert (await ok.get("/v1/reminders")).status_code == 200
            assert (await turn(ok, "c", "hi"))[-1][0] == "turn.completed"
        assert await d.stop() == 0
        assert b"s3cret" not in await d.read_stderr(), "the token is never logged"


async def test_bound_to_every_address_it_prints_a_url_its_own_edge_takes(
    tmp_path: Path,
) -> None:
    """Bound to 0.0.0.0 the daemon printed http://0.0.0.0:PORT (and the console at it),
    and every request to that URL was refused 403 by its own Host check (0.0.0.0 is no
    address a connection comes in on): a script reading the first line, as the README
    says scripts do, and an operator opening the printed console, got nothing but 403."""
    async with daemon(tmp_path, "--host", "0.0.0.0", "--token", "s3cret") as d:
        async with d.client(headers={"authorization": "Bearer s3cret"}) as ok:
            assert (await ok.get("/v1/reminders")).status_code == 200
            assert (await ok.get("/ui/")).status_code == 200
        assert d.url.startswith("http://127.0.0.1:"), d.url  # this machine's way in
        assert await d.stop() == 0


async def test_bound_by_name_the_name_it_prints_is_taken(tmp_path: Path) -> None:
    """`--host NAME` (the machine's name, on a team's network) printed http://NAME:PORT,
    and every request by that name was refused 403, as a DNS-rebinding attempt: only the
    address the connection came in on passed the Host check, unless the operator also
    listed the very name they bound by in server.allowed_hosts."""
    name = socket.gethostname()
    try:
        await anyio.getaddrinfo(name, 0, type=socket.SOCK_STREAM)
    except OSError:
        pytest.skip(f"this machine's name {name!r} does not resolve")
    async with daemon(tmp_path, "--host", name, "--token", "s3cret") as d:
        assert d.url.startswith(f"http://{name}:"), d.url
        async with d.client(headers={"authorization": "Bearer s3cret"}) as ok:
            assert (await ok.get("/v1/reminders")).status_code == 200
            forged = await ok.get("/v1/reminders", headers={"host": "rebound.example"})
            assert forged.status_code == 403, forged.text  # another name: still refused
        assert await d.stop() == 0


async def test_client_disconnect_cancels_the_turn(tmp_path: Path) -> None:
    slow_model(tmp_path, ttft=0.05, rate=40)
    async with daemon(tmp_path) as d, d.client() as client:
        await turn(client, "alice", "first")
        async with client.stream(
            "POST", "/v1/continuums/alice/turns", json={"message": "a long question " * 6}
        ) as response:
            async for name, _ in sse_events(response):
                if name == "text.delta":
                    break  # hang up mid-stream
        after = await turn(client, "alice", "are you there?")
        assert after[-1][0] == "turn.completed"
        turns = (await client.get("/v1/continuums/alice/turns")).json()["turns"]
        assert [t["status"] for t in turns] == ["completed", "cancelled", "completed"]
        history = (await client.get("/v1/continuums/alice/messages")).json()["messages"]
        users = [m["content"][0]["text"] for m in history if m["role"] == "user"]
        assert users == ["first", "are you there?"]
        assert await d.stop() == 0


async def test_a_client_hanging_up_after_a_tool_round_keeps_the_round(tmp_path: Path) -> None:
    """The client hung up while the model answered the tool's result: the turn was
    cancelled and stored nothing, so the reminder set by its tool was in no history
    (and the message sent again set it twice). The round is now kept, closed by the
    runtime's note, and the record says cancelled."""
    slow_model(tmp_path, ttft=0.05, rate=10)
    async with daemon(tmp_path) as d, d.client() as client:
        names: list[str] = []
        async with client.stream(
            "POST",
            "/v1/continuums/alice/turns",
            json={"message": "remind me to water the plants in 10 minutes"},
        ) as response:
            async for name, _ in sse_events(response):
                names.append(name)
                if name == "text.delta" and "tool.finished" in names:
                    break  # hang up while the model answers the tool's result
        # The next turn on this continuum runs after the cancelled one has wound down.
        after = await turn(client, "alice", "are you there?")
        assert after[-1][0] == "turn.completed"
        turns = (await client.get("/v1/continuums/alice/turns")).json()["turns"]
        assert [t["status"] for t in turns] == ["cancelled", "completed"]
        history = (await client.get("/v1/continuums/alice/messages")).json()["messages"]
        assert [m["role"] for m in history] == ["user", "assistant"] * 3
        assert history[1]["content"][-1]["type"] == "tool_use"
        assert history[2]["content"][0]["type"] == "tool_result"
        assert history[3]["content"][0]["text"].startswith(
            "I stopped before I could answer: the turn was cancelled after 1 round(s)"
        )
        assert history[4]["content"][0]["text"] == "are you there?"
        reminders = (await client.get("/v1/reminders")).json()["reminders"]
        assert [r["text"] for r in reminders] == ["water the plants"]
        assert await d.stop() == 0


async def test_sigterm_during_a_turn_finishes_it_and_exits_cleanly(tmp_path: Path) -> None:
    slow_model(tmp_path, ttft=0.3, rate=50)
    async with daemon(tmp_path) as d, d.client() as client:
        events: list[str] = []
        async with client.stream(
            "POST", "/v1/continuums/alice/turns", json={"message": "tell me something"}
        ) as response:
            async for name, _ in sse_events(response):
                events.append(name)
                if name == "turn.started":
                    d.process.send_signal(signal.SIGTERM)  # mid-turn
        assert events[-1] == "turn.completed", "the running turn finished within the grace"
        with anyio.fail_after(30):
            assert await d.process.wait() == 0
    async with daemon(tmp_path) as again, again.client() as client:
        history = (await client.get("/v1/continuums/alice/messages")).json()["messages"]
        assert [m["role"] for m in history] == ["user", "assistant"]
        assert await again.stop() == 0


async def test_a_turn_in_progress_reads_running_and_after_a_crash_interrupted(
    tmp_path: Path,
) -> None:
    """While a turn streams, its record says `running` (the turns API, `frontmind stats`
    over the daemon's API and on its data dir, which leaves the live daemon's store as
    it is), not failed. The daemon killed in the middle of it, the record says failed,
    "interrupted": to `stats --data-dir` at once (it showed the dead turn running until
    a daemon opened the store again: the directory's lock, free, says no process runs
    it), and to the next daemon."""
    # The reply echoes the message: about 250 tokens at 5 a second, held while we look.
    slow_model(tmp_path, ttft=0.0, rate=5.0)
    message = "a long story please " * 50
    streaming = anyio.Event()
    async with daemon(tmp_path) as d, d.client() as client:
        schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]
        assert "running" in schemas["PricedTurn"]["properties"]["status"]["enum"]

        async def read() -> None:
            # Read on (a reader that hangs up cancels its turn) until the daemon dies.
            with suppress(httpx2.TransportError):
                async with client.stream(
                    "POST", "/v1/continuums/story/turns", json={"message": message}
                ) as response:
                    async for name, _ in sse_events(response):
                        if name == "text.delta":
                            streaming.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await streaming.wait()
            (record,) = (await client.get("/v1/continuums/story/turns")).json()["turns"]
            assert (record["status"], record["error"]) == ("running", None)
            assert record["user_text"] == message
            code, out, err = await run_cli("stats", "--url", d.url, "--continuum", "story")
            assert code == 0, err
            assert "turns           1  (running 1)" in out, out
            local = ("stats", "--data-dir", str(tmp_path), "--continuum", "story")
            code, out, err = await run_cli(*local)
            assert code == 0, err
            assert "turns           1  (running 1)" in out, out
            assert "interrupted" not in err, err
            (record,) = (await client.get("/v1/continuums/story/turns")).json()["turns"]
            assert record["status"] == "running"  # the live daemon's store: not written
            d.process.send_signal(signal.SIGKILL)
            with anyio.fail_after(30):
                await d.process.wait()
    code, out, err = await run_cli(*local)
    assert code == 0, err
    assert "turns           1  (failed 1)" in out, out
    assert "1 turn left running by a process that ended: recorded as interrupted" in err, err
    async with daemon(tmp_path) as d, d.client() as client:
        (record,) = (await client.get("/v1/continuums/story/turns")).json()["turns"]
        assert (record["status"], record["error"]) == ("failed", INTERRUPTED_TURN)
        assert record["user_text"] == message
        assert await d.stop() == 0


class BrokenModel:
    """A model client with a bug: the runtime must contain it, not the client see it."""

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        raise RuntimeError("bug in a model adapter")

    async def aclose(self) -> None:
        return None


async def test_a_crash_inside_a_turn_ends_the_stream_with_an_error_event(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The stream ends with an error event of the type an HTTP body would give; as in
    a body, a bug's details (which may hold anything: paths, a connection string) stay
    in the daemon's log and never go to the client."""
    async with (
        Frontmind.open(tmp_path, Config(), model=BrokenModel()) as fm,
        serve_app(build_app(fm)) as served,
        httpx2.AsyncClient(base_url=served.url, timeout=30) as client,
    ):
        events = await turn(client, "alice", "hello")
        assert events[0][0] == "turn.started"
        name, data = events[-1]
        assert name == "error"
        assert data["type"] == "internal_error"
        assert data["message"] == INTERNAL_MESSAGE
        assert "bug in a model adapter" in caplog.text
        assert (await client.get("/healthz")).status_code == 200
        again = await turn(client, "alice", "still serving?")
        assert again[-1][0] == "error"
        assert (await client.get("/v1/continuums/alice/messages")).status_code in (200, 404)
        metrics = (await client.get("/metrics")).text
        assert 'frontmind_turn_errors_total{type="internal_error"} 2' in metrics
