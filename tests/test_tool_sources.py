"""Tools from every source but MCP (tests/test_mcp.py): Anthropic's server tools from the
config, tools that return images and documents, the offline model calling the user's
own tools, and thinking streamed to the caller. Real SDK, real local Messages API."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import pytest

from actors import InvalidModelSettings, SettingsError, ToolDefinitionError, cost
from actors._content import MAX_RESULT_BINARY_BYTES, MAX_RESULT_IMAGES, budget_result_blocks
from frontmind import (
    ConfigError,
    Frontmind,
    ThinkingDelta,
    ToolFinished,
    ToolStarted,
    TurnCompleted,
    TurnEvent,
    tool,
)
from frontmind._models import shipped_catalog
from frontmind._wire import from_wire, to_wire
from frontmind.cli._render import render_context, render_stats
from frontmind.config import load_config
from frontmind.localapi import (
    LocalMessagesAPI,
    Reply,
    ReplyRawBlock,
    ReplyText,
    ReplyToolUse,
    ScriptedResponder,
    ToolResultBlock,
)
from frontmind.localapi._thinking import REDACTED_TRIGGER
from frontmind.server._asgi import serve_app
from frontmind.server._daemon import build_app
from frontmind.server._routes import describe
from storage import ToolResultBlock as StoredResult
from tests._harness import completed, config, frontmind, tool_finishes
from tests.test_readme import example as readme_example

pytestmark = pytest.mark.anyio

PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


# -- server tools ------------------------------------------------------------------------------

WEB_SEARCH = {"type": "web_search_20250305", "max_uses": 3, "allowed_domains": ["example.com"]}


async def test_server_tools_follow_the_client_tools_as_given(tmp_path: Path) -> None:
    cfg = config(server_tool=[WEB_SEARCH, {"type": "web_fetch_20250910", "max_uses": 1}])
    async with Frontmind.open(tmp_path, cfg, offline=True) as fm:
        request = await fm.context("ada", "hello")
    body = msgspec.json.decode(msgspec.json.encode(request))
    # Last, in config order, each as given (its fixed name filled in).
    assert body["tools"][-2:] == [
        {
            "type": "web_search_20250305",
            "name": "web_search",
            "max_uses": 3,
            "allowed_domains": ["example.com"],
        },
        {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 1},
    ]
    assert [t["name"] for t in body["tools"][:-2]] == [
        "add_reminder",
        "list_reminders",
        "complete_reminder",
        "remember",
        "search_context",
    ]
    assert "[server tools] web_search (web_search_20250305), web_fetch" in render_context(request)


async def test_server_tool_use_is_recorded_per_turn_and_priced(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}
    found = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.com/a",
                "title": "A",
                "encrypted_content": "abc",
                "page_age": None,
            }
        ],
    }
    responder.push(
        Reply(
            (
                ReplyRawBlock({**search, "input": {"query": "launch"}}),
                ReplyRawBlock(found),
                ReplyRawBlock({**search, "id": "srvtoolu_2", "input": {"query": "venue"}}),
                ReplyRawBlock({**found, "tool_use_id": "srvtoolu_2"}),
                ReplyText("Found it."),
            )
        )
    )
    async with frontmind(api, tmp_path, cfg=config(server_tool=[WEB_SEARCH])) as fm:
        done = completed([e async for e in fm.turn("ada", "search the web")])
        assert (done.usage.web_search_requests, done.usage.web_fetch_requests) == (2, 0)
        records = await fm.turns("ada")
        assert records[-1].usage.web_search_requests == 2
        # The searches are in the one cost figure: stats, the daemon's records, the console.
        row = shipped_catalog().lookup(records[-1].model)
        spent = cost(records[-1].usage, row)
        assert spent.server_tools_usd == pytest.approx(0.02)
        tokens_only = cost(msgspec.structs.replace(records[-1].usage, web_search_requests=0), row)
        assert spent.total_usd is not None
        assert tokens_only.total_usd is not None
        assert spent.total_usd == pytest.approx(tokens_only.total_usd + 0.02)
        stats = render_stats(records)
        assert f"with output and server tools ${spent.total_usd:,.4f}" in stats
        assert "2 web searches, 0 web fetches: $0.0200 (in the cost above)" in stats
        # The server tool's blocks are kept as they came.
        history = await fm.history("ada")
        kinds = [getattr(b, "kind", type(b).__name__) for b in history[-1].content]
        assert kinds[:4] == [
            "server_tool_use",
            "web_search_tool_result",
            "server_tool_use",
            "web_search_tool_result",
        ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('type = "web_search_20990101"', r"#1 \(web_search_20990101\): type must be one of"),
        ('type = "web_search_20250305"\ncolour = "red"', r"#1 \(web_search_20250305\): unknown"),
        ('type = "web_search_20250305"\nmax_uses = "many"', r"max_uses: Input should be a valid"),
        # Sent as given: a value pydantic would only coerce ("5", true) is a wrong type
        # too, else every request would carry it and the API refuse each turn.
        ('type = "web_search_20250305"\nmax_uses = "5"', r"max_uses: Input should be a valid"),
        ('type = "web_search_20250305"\nmax_uses = true', r"max_uses: Input should be a valid"),
        ('type = "web_search_20250305"\nname = "search"', r"name: Input should be 'web_search'"),
        ('type = "web_fetch_20250910"\ncache_control = {}', "places the cache breakpoints"),
        ("max_uses = 1", r"\[\[server_tool\]\] #1: type must be one of"),
    ],
)
def test_a_bad_server_tool_entry_is_refused_naming_it(
    tmp_path: Path, entry: str, message: str
) -> None:
    (tmp_path / "frontmind.toml").write_text(f"[[server_tool]]\n{entry}\n")
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(None, tmp_path)
    assert "\n" not in str(caught.value)


async def test_a_user_tool_may_not_take_a_server_tools_or_an_mcp_name(tmp_path: Path) -> None:
    @tool(name="web_search")
    def search(query: str) -> str:
        """Search."""
        return query

    @tool(name="mcp__x__y")
    def sneaky(query: str) -> str:
        """Sneak."""
        return query

    cfg = config(server_tool=[WEB_SEARCH])
    with pytest.raises(ToolDefinitionError, match="web_search_20250305 has that name"):
        async with Frontmind.open(tmp_path, cfg, offline=True, tools=[search]):
            pass
    with pytest.raises(ToolDefinitionError, match="'mcp__' are the MCP servers' tools"):
        async with Frontmind.open(tmp_path, config(), offline=True, tools=[sneaky]):
            pass


async def test_a_model_that_lacks_a_server_tool_is_refused(tmp_path: Path) -> None:
    def support(model: str, kind: str) -> str | None:
        lacking = model == "claude-haiku-4-5" and kind.startswith("web_fetch_")
        return "the model data says it has no web fetch" if lacking else None

    cfg = config(server_tool=[{"type": "web_fetch_20250910"}])
    async with Frontmind.open(tmp_path, cfg, offline=True, server_tool_support=support) as fm:
        with pytest.raises(InvalidModelSettings, match="claude-haiku-4-5 does not take"):
            await fm.set_model_settings("ada", model="claude-haiku-4-5")
    haiku = config(server_tool=[{"type": "web_fetch_20250910"}], model={"name": "claude-haiku-4-5"})
    with pytest.raises(SettingsError, match=r"\[\[server_tool\]\]: claude-haiku-4-5 does not"):
        async with Frontmind.open(tmp_path, haiku, offline=True, server_tool_support=support):
            pass


async def test_the_model_data_refuses_a_server_tool_version_before_any_model_call(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """No injected lookup: models.toml's `server_tools` decide. Haiku 4.5 takes the basic
    web search but not the dynamic-filtering version (the docs: Claude 4.6 and later)."""
    api, responder = script
    dynamic = {"type": "web_search_20260209"}
    reason = (
        r"claude-haiku-4-5 does not take the web_search_20260209 tool: it takes only "
        r"web_search_20250305 of web_search \(.*tool-use/web-search-tool\)"
    )
    haiku = config(server_tool=[dynamic], model={"name": "claude-haiku-4-5"})
    with pytest.raises(SettingsError, match=r"\[\[server_tool\]\]: " + reason):
        async with frontmind(api, tmp_path / "haiku", cfg=haiku):
            pytest.fail("it started")
    # The config's model (Sonnet 4.6) takes it; a continuum moved to Haiku is refused, in
    # the library and on the daemon's settings route (400, the error naming the docs).
    async with (
        frontmind(api, tmp_path / "sonnet", cfg=config(server_tool=[dynamic])) as fm,
        serve_app(build_app(fm)) as served,
        httpx2.AsyncClient(base_url=served.url, timeout=30) as client,
    ):
        with pytest.raises(InvalidModelSettings, match="model: " + reason):
            await fm.set_model_settings("ada", model="claude-haiku-4-5")
        reply = await client.put("/v1/continuums/ada/settings", json={"model": "claude-haiku-4-5"})
        assert reply.status_code == 400
        assert re.search(reason, reply.json()["error"]["message"])
        basic = await client.put("/v1/continuums/bo/settings", json={"model": "claude-opus-4-5"})
        assert basic.status_code == 400  # Opus 4.5 neither: no dynamic filtering before 4.6
        assert (await fm.model_settings("ada"))[1].name == "claude-sonnet-4-6"
    assert responder.requests == []  # refused before any model call
    # Where the data is wrong, a [[models]] row corrects it.
    fixed = config(
        server_tool=[dynamic],
        model={"name": "claude-haiku-4-5"},
        models=[{"name": "claude-haiku-4-5", "server_tools": ["web_search"]}],
    )
    async with frontmind(api, tmp_path / "fixed", cfg=fixed) as fm:
        row = fm.models.lookup("claude-haiku-4-5")
        assert row is not None
        assert row.takes_server_tool("web_search_20260209")


def test_a_server_tools_key_list_names_only_keys_it_takes(tmp_path: Path) -> None:
    (tmp_path / "frontmind.toml").write_text(
        '[[server_tool]]\ntype = "web_search_20250305"\nx = 1\n'
    )
    with pytest.raises(ConfigError, match="unknown keys") as caught:
        load_config(None, tmp_path)
    assert "'max_uses'" in str(caught.value)
    assert "cache_control" not in str(caught.value)


# -- tools that return content blocks ---------------------------------------------------------


@tool
def snapshot(label: str) -> list[dict[str, Any]]:
    """A picture of the dashboard."""
    return [
        {"type": "text", "text": f"dashboard {label}:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}},
    ]


@tool
def broken() -> list[dict[str, Any]]:
    """A picture that is not one."""
    return [{"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "x"}}]


async def test_a_tool_returns_images_stored_and_replayed_byte_for_byte(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    responder.extend(
        [
            Reply((ReplyToolUse("snapshot", {"label": "sales"}), ReplyToolUse("broken", {}))),
            Reply((ReplyText("I see it."),)),
            Reply((ReplyText("Still there."),)),
        ]
    )
    async with frontmind(api, tmp_path, tools=[snapshot, broken]) as fm:
        events = [e async for e in fm.turn("ada", "show me")]
        finished = tool_finishes(events)
        assert (finished[0].is_error, finished[0].content) == (False, "dashboard sales:\n[image]")
        assert finished[1].is_error
        assert "broken returned unusable content" in finished[1].content
        history = await fm.history("ada")
        stored = history[2].content[0]
        assert isinstance(stored, StoredResult)
        expected = json.dumps(snapshot("sales"), separators=(",", ":"))
        assert stored.content_json == expected
        completed([e async for e in fm.turn("ada", "and now?")])
    # Sent again as stored (the stored JSON is what the layout sends, as its bytes).
    for request in responder.requests[1:]:
        results = [
            block
            for message in request.messages
            if isinstance(message.content, list)
            for block in message.content
            if isinstance(block, ToolResultBlock) and block.tool_use_id == stored.tool_use_id
        ]
        assert len(results) == 1
        parts = msgspec.to_builtins(results[0].content)
        assert [{k: v for k, v in p.items() if v is not None} for p in parts] == json.loads(
            expected
        )


@tool
def gallery(count: int) -> list[dict[str, Any]]:
    """Pictures."""
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PIXEL},
    }
    return [{"type": "text", "text": f"{count} pictures:"}, *([image] * count)]


async def test_a_tool_result_s_images_are_capped_with_a_note(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    responder.extend([Reply((ReplyToolUse("gallery", {"count": 25}),)), Reply((ReplyText("ok"),))])
    async with frontmind(api, tmp_path, tools=[gallery]) as fm:
        events = [e async for e in fm.turn("ada", "show them all")]
        finished = next(e for e in events if isinstance(e, ToolFinished))
        assert not finished.is_error
        assert finished.content.count("[image]") == MAX_RESULT_IMAGES
        assert "[left out: 5 more images or documents (an image (image/png)" in finished.content
        completed(events)
    sent = responder.requests[-1].messages[-1].content
    assert isinstance(sent, list)
    (result,) = sent
    assert isinstance(result, ToolResultBlock)
    assert isinstance(result.content, list)
    kinds = [type(part).__name__ for part in result.content]
    assert kinds.count("ImageBlock") == MAX_RESULT_IMAGES
    assert kinds[-1] == "TextBlock"


@tool(max_result_chars=1_000)
def page(empty: bool = False) -> list[dict[str, Any]]:
    """A screenshot of a page, with its text."""
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PIXEL},
    }
    text = "" if empty else "a\x00b " + "words " * 2_000
    return [{"type": "text", "text": text}, image]


async def test_a_tool_result_s_text_blocks_are_held_as_a_text_result_is(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """Text blocks beside an image are cut at max_result_chars with a note, a NUL in
    them is U+FFFD, and an empty one is left out: the result and its image stand, where
    each of these made the whole result an error before."""
    api, responder = script
    responder.extend(
        [
            Reply((ReplyToolUse("page", {}), ReplyToolUse("page", {"empty": True}))),
            Reply((ReplyText("ok"),)),
        ]
    )
    async with frontmind(api, tmp_path, tools=[page]) as fm:
        events = [e async for e in fm.turn("ada", "show the page")]
        completed(events)
        long, empty = tool_finishes(events)
        history = await fm.history("ada")
    assert not long.is_error
    assert long.content.startswith("a\ufffdb words words")
    assert long.content.endswith(
        "\n[image]\n[truncated: 11,004 more characters of this result were left out; its "
        "text is held to 1,000 characters (max_result_chars)]"
    )
    assert (empty.is_error, empty.content) == (False, "[image]")
    sent = responder.requests[-1].messages[-1].content
    assert isinstance(sent, list)
    results = [r for r in sent if isinstance(r, ToolResultBlock)]
    kinds = [[type(part).__name__ for part in r.content or ()] for r in results]
    assert kinds == [["TextBlock", "ImageBlock", "TextBlock"], ["ImageBlock"]]
    stored = history[2].content[0]
    assert isinstance(stored, StoredResult)
    assert len(json.loads(stored.content_json)[0]["text"]) == 1_000


def test_a_tool_result_s_binary_bytes_are_capped() -> None:
    big = "A" * (3 * 1024 * 1024)  # 3 MB of base64 each: the third is over the 8 MB share
    source = {"type": "base64", "media_type": "application/pdf", "data": big}
    blocks: list[dict[str, Any]] = [{"type": "document", "source": source} for _ in range(3)]
    kept = budget_result_blocks(blocks)
    assert kept[:2] == blocks[:2]
    note = kept[2]
    assert isinstance(note, dict)
    assert note["type"] == "text"
    assert "1 more images or documents (a document (application/pdf))" in note["text"]
    assert budget_result_blocks(blocks[:2]) == blocks[:2]  # within it: untouched
    assert 2 * len(big) <= MAX_RESULT_BINARY_BYTES < 3 * len(big)


# -- the offline model calls your own tools -------------------------------------------------


async def test_the_offline_model_calls_a_tool_the_message_names(tmp_path: Path) -> None:
    @tool
    def forecast(city: str, days: int = 1) -> str:
        """The weather to come."""
        return f"{days} sunny day(s) in {city}"

    async with Frontmind.open(tmp_path, config(), offline=True, tools=[forecast]) as fm:
        events = [e async for e in fm.turn("ada", "Use forecast for city Oslo, days 3.")]
        started = next(e for e in events if isinstance(e, ToolStarted))
        assert (started.name, json.loads(started.input_json)) == (
            "forecast",
            {"city": "Oslo", "days": 3},
        )
        finished = next(e for e in events if isinstance(e, ToolFinished))
        assert finished.content == "3 sunny day(s) in Oslo"
        # A message that names no tool calls none; the built-in phrases still work.
        plain = [e async for e in fm.turn("ada", "Good morning")]
        assert not [e for e in plain if isinstance(e, ToolStarted)]


async def test_the_offline_model_reads_a_value_the_property_name_begins(tmp_path: Path) -> None:
    @tool
    def stock(sku: str) -> dict[str, int]:
        """Units in stock."""
        return {"count": 7 if sku == "SKU-9" else 0}

    said = {
        "check stock of SKU-9": "SKU-9",  # the whole word, never "-9"
        "use the stock tool for sku 42": "42",
        "stock: sku is A-1": "A-1",
        "stock please, sku=B7.": "B7",
    }
    async with Frontmind.open(tmp_path, config(), offline=True, tools=[stock]) as fm:
        for text, sku in said.items():
            events = [e async for e in fm.turn("ada", text)]
            started = next(e for e in events if isinstance(e, ToolStarted))
            assert json.loads(started.input_json) == {"sku": sku}, text
        finished = [e async for e in fm.turn("ada", "check stock of SKU-9")]
        assert next(e for e in finished if isinstance(e, ToolFinished)).content == '{"count":7}'


async def test_the_readme_tool_example_runs_the_tool_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace: dict[str, Any] = {}
    exec(readme_example("### Your own tools"), namespace)
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        await namespace["main"]()
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert '[stock] {"sku":"42"}' in out
    assert '-> {"count":7}' in out


# -- thinking reaches the caller -------------------------------------------------------------


async def test_thinking_streams_as_events_and_redacted_thinking_is_announced(
    tmp_path: Path,
) -> None:
    cfg = config(model={"thinking": "enabled", "budget_tokens": 1024, "max_tokens": 4096})
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path, cfg=cfg) as fm:
        events = [e async for e in fm.turn("ada", "hello there")]
        thinking = [e for e in events if isinstance(e, ThinkingDelta)]
        assert thinking
        assert "".join(e.text for e in thinking).startswith("The user wrote 2 word(s)")
        assert not any(e.redacted for e in thinking)
        # Thinking comes before the text, and is not part of the reply's text.
        first_text = next(i for i, e in enumerate(events) if type(e).__name__ == "TextDelta")
        assert events.index(thinking[0]) < first_text
        done = completed(events)
        assert "The user wrote" not in done.text

        redacted = [e async for e in fm.turn("ada", REDACTED_TRIGGER)]
        announced = [e for e in redacted if isinstance(e, ThinkingDelta)]
        assert announced == [ThinkingDelta("", redacted=True)]

        # `display = "omitted"` per continuum: sent, and the thinking arrives without text.
        await fm.set_model_settings("quiet", thinking_display="omitted")
        request = await fm.context("quiet", "hi")
        assert request.thinking is not None
        assert request.thinking.display == "omitted"
        quiet = [e async for e in fm.turn("quiet", "hi")]
        assert not [e for e in quiet if isinstance(e, ThinkingDelta) and e.text]
        assert isinstance(quiet[-1], TurnCompleted)
    with pytest.raises(InvalidModelSettings, match="thinking_display"):
        async with Frontmind.open(tmp_path / "off", config(), offline=True) as fm:
            await fm.set_model_settings("ada", thinking_display="summarized")


async def test_thinking_events_cross_the_wire_in_the_clients_shape() -> None:
    event = ThinkingDelta("pondering", redacted=False)
    wire = msgspec.json.encode(to_wire(event))
    assert msgspec.json.decode(wire) == {
        "event": "thinking.delta",
        "text": "pondering",
        "redacted": False,
    }
    decoded: object = from_wire(wire, TurnEvent)  # type: ignore[arg-type]
    assert decoded == event
    assert "thinking.delta" in json.dumps(describe())
