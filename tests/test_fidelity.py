"""Everything a model returns or a user sends is carried: content blocks kept byte for
byte, user messages made of blocks, per-continuum model settings, every stop reason,
and the system_message channel. Real SQLite, the real SDK against the local API."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import pytest

from actors import InvalidModelSettings, ModelRequest, SettingsError, user_content
from actors._exceptions import ModelStreamError
from actors._layout import build_request
from actors._llm import StreamStarted, StreamText, StreamThinking, _Assembly, _event_decoder
from actors._messages import SystemSection
from actors._settings import CacheSettings
from frontmind.localapi import (
    LocalMessagesAPI,
    Reply,
    ReplyRawBlock,
    ReplyText,
    ReplyToolUse,
    ScriptedResponder,
)
from frontmind.localapi._thinking import ThinkingSigner
from frontmind.server._asgi import serve_app
from frontmind.server._daemon import build_app
from storage import (
    DEFAULT_USER,
    ContinuumModel,
    InvalidInput,
    Message,
    MessageTooLarge,
    RawBlock,
    SQLiteStorage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnRecord,
    TurnWrite,
    moment,
)
from tests._factories import turn as _stored_turn
from tests._harness import completed, config, failed, frontmind, run_turn

pytestmark = pytest.mark.anyio

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()
THINKING = '{"type":"thinking","thinking":"","signature":""}'
REDACTED = '{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"}'
SEARCH_RESULT = (
    '{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1",'
    '"content":[{"type":"web_search_result","url":"https://example.com","title":"Ex",'
    '"encrypted_content":"abc","page_age":null}]}'
)


def _events(*events: dict[str, Any] | str) -> list[bytes]:
    return [e.encode() if isinstance(e, str) else json.dumps(e).encode() for e in events]


def _assemble(events: list[bytes]) -> Any:
    assembly = _Assembly()
    shown = [assembly.feed(_event_decoder.decode(e)) for e in events]
    return assembly.done(), [s for s in shown if s]


START = {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 5}}}
STOP = {"type": "message_stop"}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _start(index: int, block: str) -> str:
    return f'{{"type":"content_block_start","index":{index},"content_block":{block}}}'


def _stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def _end(reason: str) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": 9},
    }


# -- stream assembly ----------------------------------------------------------------------


def test_blocks_frontmind_does_not_interpret_keep_the_json_the_api_sent() -> None:
    done, shown = _assemble(
        _events(
            START,
            _start(0, THINKING),
            _delta(0, {"type": "thinking_delta", "thinking": "Let me "}),
            _delta(0, {"type": "thinking_delta", "thinking": "think."}),
            _delta(0, {"type": "signature_delta", "signature": "sig=="}),
            _stop(0),
            _start(1, REDACTED),
            _stop(1),
            _start(
                2, '{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}'
            ),
            _delta(2, {"type": "input_json_delta", "partial_json": '{"query": '}),
            _delta(2, {"type": "input_json_delta", "partial_json": '"cats"}'}),
            _stop(2),
            _start(3, SEARCH_RESULT),
            _stop(3),
            _start(4, '{"type":"text","text":""}'),
            _stop(4),  # an empty text block: the API emits them and refuses them back
            _start(5, '{"type":"text","text":""}'),
            _delta(5, {"type": "text_delta", "text": "Cats."}),
            _stop(5),
            _start(6, '{"type":"tool_use","id":"toolu_1","name":"remember","input":{}}'),
            _delta(6, {"type": "input_json_delta", "partial_json": '{"text":  "cats",'}),
            _delta(6, {"type": "input_json_delta", "partial_json": ' "n": 1.50}'}),
            _stop(6),
            _end("tool_use"),
            STOP,
        )
    )
    # The call's usage so far comes first (what a stream that breaks has cost); text
    # and thinking reach the caller as they stream; redacted thinking is announced
    # without its data.
    started, *shown = shown
    assert started == StreamStarted(msgspec.structs.replace(done.usage, output_tokens=0))
    assert shown == [
        StreamThinking("Let me "),
        StreamThinking("think."),
        StreamThinking("", redacted=True),
        StreamText("Cats."),
    ]
    assert done.stop_reason == "tool_use"
    assert done.dropped == 0
    assert done.usage.input_tokens == 5
    assert done.usage.output_tokens == 9
    thinking, redacted, use, result, text, tool = done.content
    assert thinking == RawBlock(
        "thinking", '{"type":"thinking","thinking":"Let me think.","signature":"sig=="}'
    )
    assert redacted == RawBlock("redacted_thinking", REDACTED)
    assert use == RawBlock(
        "server_tool_use",
        '{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search",'
        '"input":{"query": "cats"}}',
    )
    assert result == RawBlock("web_search_tool_result", SEARCH_RESULT)
    assert text == TextBlock("Cats.")
    # The tool input is the exact JSON the model produced: spacing and "1.50" kept.
    assert tool == ToolUseBlock("toolu_1", "remember", '{"text":  "cats", "n": 1.50}')


def test_unfinished_blocks_are_dropped_and_counted() -> None:
    done, _ = _assemble(
        _events(
            START,
            _start(0, THINKING),
            _delta(0, {"type": "thinking_delta", "thinking": "half a thou"}),
            _stop(0),  # no signature: cut off
            _start(1, '{"type":"text","text":""}'),
            _delta(1, {"type": "text_delta", "text": "Partial"}),
            _stop(1),
            _start(2, '{"type":"tool_use","id":"toolu_1","name":"remember","input":{}}'),
            _delta(2, {"type": "input_json_delta", "partial_json": '{"text": "ca'}),
            _stop(2),
            _end("max_tokens"),
            STOP,
        )
    )
    assert done.content == (TextBlock("Partial"),)
    assert done.dropped == 2
    assert done.stop_reason == "max_tokens"


def test_an_error_event_or_a_stream_without_its_end_is_a_stream_error() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(ModelStreamError, match="overloaded_error"):
        _assemble(_events(START, error))
    with pytest.raises(ModelStreamError, match="message_stop"):
        _assemble(_events(START, _start(0, '{"type":"text","text":"hi"}')))


# -- request layout -----------------------------------------------------------------------


def _layout(history: list[Message], **options: Any) -> ModelRequest:
    boundary = options.pop("boundary", None)
    return build_request(
        model="claude-opus-5",
        max_tokens=2048,
        tools=(),
        system=(SystemSection("base_prompt", "You are helpful. " * 50, cached=True),),
        history=history,
        boundary=boundary,
        notification=options.pop("notification", "NOTIFICATION CENTER\n<x>\ny\n</x>"),
        tail=[Message("user", (TextBlock("now"),))],
        cache=CacheSettings(),
        rolling=False,
        previous_message_id=None,
        **options,
    )


THOUGHT = RawBlock("thinking", '{"type":"thinking","thinking":"Hm.","signature":"c2ln"}')
IMAGE = RawBlock(
    "image",
    '{"type": "image", "source": {"type": "base64", "media_type": "image/png", '
    f'"data": "{PNG}"}}}}',
)


def test_stored_blocks_go_out_as_their_exact_bytes_and_never_carry_a_breakpoint() -> None:
    history = [
        Message("user", (IMAGE, TextBlock("what is this?")), seq=0, turn_id="t1"),
        Message("assistant", (THOUGHT, TextBlock("A picture.")), seq=1, turn_id="t1"),
        Message("user", (TextBlock("and?"),), seq=2, turn_id="t2"),
        Message("assistant", (TextBlock("More."), THOUGHT), seq=3, turn_id="t2"),
    ]
    body = msgspec.json.encode(_layout(history))
    assert IMAGE.json.encode() in body  # byte for byte, spacing included
    assert body.count(THOUGHT.json.encode()) == 2
    sent = json.loads(body)
    # The history breakpoint skips the trailing thinking block for the last typed one.
    last = sent["messages"][3]["content"]
    assert last[0] == {
        "type": "text",
        "text": "More.",
        "cache_control": {"type": "ephemeral", "ttl": "5m"},
    }
    assert "cache_control" not in last[1]


def test_the_system_message_channel_follows_the_current_user_message() -> None:
    history = [
        Message("user", (TextBlock("hi"),), seq=0, turn_id="t1"),
        Message("assistant", (TextBlock("hello"),), seq=1, turn_id="t1"),
    ]
    frame = json.loads(msgspec.json.encode(_layout(history)))
    assert [m["role"] for m in frame["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    system = json.loads(msgspec.json.encode(_layout(history, channel="system_message")))
    assert [m["role"] for m in system["messages"]] == ["user", "assistant", "user", "system"]
    assert system["messages"][3]["content"][0]["text"].startswith("NOTIFICATION CENTER")
    # An empty notification center: no system message at all.
    empty = json.loads(
        msgspec.json.encode(_layout(history, channel="system_message", notification=""))
    )
    assert [m["role"] for m in empty["messages"]] == ["user", "assistant", "user"]


# -- storage --------------------------------------------------------------------------------


async def test_every_block_round_trips_through_sqlite(tmp_path: Path) -> None:
    result = ToolResultBlock(
        "toolu_1", "chart [image]", content_json=f'[{{"type":"text","text":"chart"}},{IMAGE.json}]'
    )
    messages = (
        Message("user", (IMAGE, TextBlock("look"))),
        Message("assistant", (THOUGHT, ToolUseBlock("toolu_1", "plot", '{"x": 1}'))),
        Message("user", (result,)),
        Message("assistant", (RawBlock("redacted_thinking", REDACTED), TextBlock("done"))),
    )
    record = TurnRecord("t1", "c1", "completed", moment(1.0), moment(2.0), "claude-opus-5", "look")
    async with await SQLiteStorage.open(tmp_path / "db.sqlite") as store:
        await store.commit_turn(DEFAULT_USER, TurnWrite(record, messages))
        stored = await store.history(DEFAULT_USER, "c1")
        assert tuple(m.content for m in stored) == tuple(m.content for m in messages)
        assert await store.continuum_model(DEFAULT_USER, "c1") == ContinuumModel()
        own = ContinuumModel("claude-opus-4-8", "enabled", 2048, 8192, "high")
        await store.set_continuum_model(DEFAULT_USER, "new-one", own)  # before its first turn
        assert await store.continuum_model(DEFAULT_USER, "new-one") == own


# -- user content -----------------------------------------------------------------------------


def _image(data: str = PNG, media: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def test_user_content_takes_text_images_and_documents_within_the_limits() -> None:
    raw = msgspec.Raw(b'{"type":"image", "source":{"type":"url","url":"https://x.test/a.png"}}')
    pdf: dict[str, Any] = {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.b64encode(b"%PDF-1.4").decode(),
        },
    }
    blocks, text = user_content([{"type": "text", "text": "see"}, _image(), raw, pdf])
    assert blocks[0] == TextBlock("see")
    assert blocks[2] == RawBlock("image", bytes(raw).decode())  # the client's bytes
    assert [b.kind for b in blocks[1:] if isinstance(b, RawBlock)] == ["image", "image", "document"]
    assert text == "see\n[image]\n[image]\n[document]"
    GIF = base64.b64encode(b"GIF87a" + bytes(20)).decode()
    not_pdf = {**pdf, "source": {**pdf["source"], "data": base64.b64encode(b"plain").decode()}}
    cases: list[tuple[Any, type[Exception], str]] = [
        ([], InvalidInput, "no content blocks"),
        ([{"type": "text", "text": "  "}], InvalidInput, "empty"),
        ([_image(media="image/bmp")], InvalidInput, "media_type"),
        ([_image(data="not base64!")], InvalidInput, "base64"),
        # The bytes say what they are: a JPEG called a PNG, a text called a PDF.
        ([_image(media="image/jpeg")], InvalidInput, "the data is not image/jpeg"),
        ([_image(data=GIF, media="image/webp")], InvalidInput, "the data is not image/webp"),
        ([not_pdf], InvalidInput, "the data is not application/pdf"),
        ([_image(data="A" * (5 * 1024 * 1024 + 4))], MessageTooLarge, "5 MB"),
        ([_image()] * 101, InvalidInput, "100 images"),
        ([{"type": "tool_result", "tool_use_id": "x"}], InvalidInput, "not 'tool_result'"),
        ([{"type": "thinking", "thinking": "x"}], InvalidInput, "not 'thinking'"),
        ([{**_image(), "cache_control": {"type": "ephemeral"}}], InvalidInput, "breakpoints"),
        ([msgspec.Raw(b"{nope")], InvalidInput, "malformed"),
    ]
    for message, error, fragment in cases:
        with pytest.raises(error, match=fragment):
            user_content(message)


async def test_a_message_of_blocks_is_stored_and_replayed_byte_for_byte(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, _ = script
    block = msgspec.Raw(
        b'{"type": "image",  "source": {"type": "url", "url": "https://x.test/a.png"}}'
    )
    async with frontmind(api, tmp_path) as fm:
        request = await fm.context("c1", [block, {"type": "text", "text": "what is it?"}])
        body = msgspec.json.encode(request)
        assert bytes(block) in body
        # Refused before any model call; nothing stored.
        too_big = fm.turn("c1", [_image(data="A" * (6 * 1024 * 1024))])
        with pytest.raises(MessageTooLarge):
            await too_big.__aenter__()
        assert api.requests == []
        assert await fm.storage.continuums(DEFAULT_USER) == []


async def test_a_cited_reply_is_stored_and_replayed_with_its_citations(tmp_path: Path) -> None:
    # The local API's default responder cites a document with citations enabled (docs:
    # "Citations"); the streamed citations_delta events are kept on the stored reply and
    # sent back unchanged on the next turn.
    document = {
        "type": "document",
        "title": "Launch plan",
        "source": {"type": "text", "media_type": "text/plain", "data": "It is on Friday. Yes."},
        "citations": {"enabled": True},
    }
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        events = [e async for e in fm.turn("c1", [document, {"type": "text", "text": "when?"}])]
        completed(events)
        reply = (await fm.history("c1"))[-1]
        completed(await run_turn(fm, "c1", "thanks"))
        sent = api.message_bodies()[-1]["messages"]
    cited = [
        json.loads(b.json) for b in reply.content if isinstance(b, RawBlock) and b.kind == "text"
    ]
    citation = {
        "type": "char_location",
        "cited_text": "It is on Friday.",
        "document_index": 0,
        "document_title": "Launch plan",
        "start_char_index": 0,
        "end_char_index": 16,
    }
    assert [c["citations"] for c in cited] == [[citation]]
    replayed = [
        {k: v for k, v in b.items() if k != "cache_control"}
        for m in sent
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("citations")
    ]
    assert replayed == cited


# -- stop reasons ----------------------------------------------------------------------------


async def test_a_reply_cut_off_at_max_tokens_keeps_its_text_and_runs_no_tool(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    responder.push(
        Reply(
            (ReplyText("I will note that"), ReplyToolUse("remember", {"text": "cats"})),
            stop_reason="max_tokens",
        ),
        "Next.",
    )
    async with frontmind(api, tmp_path) as fm:
        done = completed(await run_turn(fm, "c1", "remember cats"))
        assert done.stop_reason == "max_tokens"
        assert done.model_calls == 1
        assert any("max_tokens (1024)" in w for w in done.warnings)
        history = await fm.history("c1")
        assert history[1].content == (TextBlock("I will note that"),)
        assert await fm.memories() == []  # the cut-off tool call never ran
        assert (await fm.turns("c1"))[0].stop_reason == "max_tokens"
        # The next turn replays a valid history (no unanswered tool_use).
        assert completed(await run_turn(fm, "c1", "go on")).stop_reason == "end_turn"


async def test_a_refused_turn_is_left_out_of_the_history(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    responder.push("first", Reply((ReplyText("I can't"),), stop_reason="refusal"), "again")
    async with frontmind(api, tmp_path) as fm:
        completed(await run_turn(fm, "c1", "hello"))
        error = failed(await run_turn(fm, "c1", "something refused"))
        assert error.type == "refusal"
        assert "rephrase" in error.message
        assert len(await fm.history("c1")) == 2
        (refused,) = [r for r in await fm.turns("c1") if r.status != "completed"]
        assert refused.status == "failed"
        assert refused.stop_reason == "refusal"
        completed(await run_turn(fm, "c1", "something else"))
        sent = json.loads(api.requests[-1].body)
        assert "something refused" not in json.dumps(sent["messages"])


@pytest.mark.parametrize("reason", ["stop_sequence", "model_context_window_exceeded"])
async def test_other_stop_reasons_are_told_to_the_caller(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path, reason: str
) -> None:
    api, responder = script
    responder.push(Reply((ReplyText("Partly"),), stop_reason=reason))
    async with frontmind(api, tmp_path) as fm:
        done = completed(await run_turn(fm, "c1", "hello"))
        assert done.stop_reason == reason
        assert bool(done.warnings) == (reason == "model_context_window_exceeded")
        assert (await fm.history("c1"))[1].content == (TextBlock("Partly"),)


# -- per-continuum model settings -----------------------------------------------------------------


async def test_model_settings_per_continuum(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    responder.push("one", "two")
    async with frontmind(api, tmp_path) as fm:
        own, effective = await fm.model_settings("c1")
        assert own == ContinuumModel()
        assert effective.name == fm.config.model.name
        completed(await run_turn(fm, "c1", "hello"))  # loads the lane first
        own, effective = await fm.set_model_settings(
            "c1",
            model="claude-sonnet-4-6",  # takes manual thinking (deprecated, not refused)
            thinking="enabled",
            budget_tokens=2048,
            max_tokens=8192,
            effort="high",
        )
        assert effective.thinking == "enabled"
        assert effective.max_tokens == 8192
        request = json.loads(msgspec.json.encode(await fm.context("c1", "next")))
        assert request["model"] == "claude-sonnet-4-6"
        assert request["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert request["output_config"] == {"effort": "high"}
        other = json.loads(msgspec.json.encode(await fm.context("c2", "hi")))
        assert other["model"] == fm.config.model.name
        assert "thinking" not in other
        refused: list[tuple[dict[str, Any], str]] = [
            ({"thinking": "enabled", "budget_tokens": 4096, "max_tokens": 4096}, "budget_tokens"),
            ({"thinking": "enabled", "budget_tokens": 512, "max_tokens": 4096}, "at least 1024"),
            ({"model": "claude-opus-5", "thinking": "enabled"}, "thinking.type.enabled"),
            ({"model": "claude-haiku-4-5", "max_tokens": 100_000}, "max_tokens"),
        ]
        for settings, fragment in refused:
            with pytest.raises(InvalidModelSettings, match=fragment):
                await fm.set_model_settings("c1", **settings)
        # Nothing refused was stored.
        assert (await fm.model_settings("c1"))[0].model == "claude-sonnet-4-6"
        # The next turn runs with them: thinking leads the stored reply.
        completed(await run_turn(fm, "c1", "next"))
        sent = api.message_bodies()[-1]
        assert sent["model"] == "claude-sonnet-4-6"
        assert sent["output_config"] == {"effort": "high"}
        reply = (await fm.history("c1"))[-1].content[0]
        assert isinstance(reply, RawBlock)
        assert reply.kind == "thinking"


async def test_the_system_message_channel_needs_a_model_that_takes_it(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, _ = script
    with pytest.raises(SettingsError, match="role-system"):
        async with frontmind(
            api,
            tmp_path,
            cfg=config(model={"name": "claude-sonnet-5"}, composer={"channel": "system_message"}),
        ):
            pass
    cfg = config(model={"name": "claude-opus-5"}, composer={"channel": "system_message"})
    async with frontmind(api, tmp_path, cfg=cfg) as fm:
        with pytest.raises(InvalidModelSettings, match="role-system"):
            await fm.set_model_settings("c1", model="claude-sonnet-5")
        await fm.remember("The cat is named Tom")
        request = json.loads(msgspec.json.encode(await fm.context("c1", "my cat?")))
        assert [m["role"] for m in request["messages"]] == ["user", "system"]


# -- the daemon ---------------------------------------------------------------------------------


async def test_the_daemon_takes_blocks_and_settings_with_clear_errors(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    async with (
        frontmind(api, tmp_path) as fm,
        serve_app(build_app(fm)) as served,
        httpx2.AsyncClient(base_url=served.url, timeout=30) as client,
    ):
        url = "/v1/continuums/alice"
        put = await client.put(
            f"{url}/settings", json={"model": "claude-opus-4-8", "max_tokens": 4096}
        )
        assert put.status_code == 200, put.text
        assert put.json()["effective"]["name"] == "claude-opus-4-8"
        assert (await client.get(f"{url}/settings")).json()["own"] == {
            "model": "claude-opus-4-8",
            "max_tokens": 4096,
        }
        bad = await client.put(
            f"{url}/settings", json={"thinking": "enabled", "budget_tokens": 9000}
        )
        assert bad.status_code == 400
        assert "budget_tokens" in bad.json()["error"]["message"]
        unknown = await client.put(f"{url}/settings", json={"temperature": 1})
        assert unknown.status_code == 400
        cases = [
            ({"message": "hi", "content": [{"type": "text", "text": "hi"}]}, 400, "either"),
            ({}, 400, "either"),
            ({"content": [{"type": "audio"}]}, 400, "not 'audio'"),
            ({"content": [_image(data="A" * (5 * 1024 * 1024 + 4))]}, 413, "5 MB"),
        ]
        for body, status, fragment in cases:
            response = await client.post(f"{url}/turns", json=body)
            assert response.status_code == status, response.text
            assert fragment in response.json()["error"]["message"]
        assert api.requests == []
        responder.push("Hello there.")
        image = {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.png"}}
        ok = await client.post(
            f"{url}/turns", json={"content": [image, {"type": "text", "text": "a cat?"}]}
        )
        assert ok.status_code == 200
        assert "turn.completed" in ok.text
        assert json.loads(api.requests[0].body)["model"] == "claude-opus-4-8"
        stored = (await client.get(f"{url}/messages")).json()["messages"]
        assert stored[0]["content"] == [image, {"type": "text", "text": "a cat?"}]


# -- twenty turns with thinking, through tool loops ------------------------------------------

_CACHE_MARK = re.compile(rb',"cache_control":\{"ttl":"(5m|1h)","type":"ephemeral"\}')


class _SentMessage(msgspec.Struct):
    role: str
    content: list[msgspec.Raw]


class _SentBody(msgspec.Struct):
    messages: list[_SentMessage]


def _sent(body: bytes) -> list[tuple[str, tuple[bytes, ...]]]:
    """Each message of a request as its role and its blocks' exact bytes (breakpoints,
    which move from turn to turn by design, taken out)."""
    decoded = msgspec.json.decode(body, type=_SentBody)
    return [
        (m.role, tuple(_CACHE_MARK.sub(b"", bytes(b)) for b in m.content)) for m in decoded.messages
    ]


async def test_twenty_turns_with_thinking_replay_every_block_byte_for_byte(
    tmp_path: Path,
) -> None:
    signer = ThinkingSigner()
    texts = [
        "Remind me to water the plants in 30 minutes.",
        "Remember that the cat is named Tom.",
        "List my reminders",
        "What should I do next about the launch?",
        "Search for plants",
    ]
    cfg = config(
        model={
            "name": "claude-sonnet-4-6",  # manual thinking: refused from Claude 4.7 on
            "thinking": "enabled",
            "budget_tokens": 1024,
            "max_tokens": 4096,
        }
    )
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path, cfg=cfg) as fm:
        calls: list[int] = []
        for turn in range(20):
            done = completed(await run_turn(fm, "c1", f"{texts[turn % len(texts)]} ({turn})"))
            calls.append(done.model_calls)
        bodies = [r.body for r in api.requests if r.path == "/v1/messages"]
        assert len(bodies) == sum(calls)
        assert sum(1 for c in calls if c > 1) >= 8  # the tool loops ran
        history = await fm.history("c1")
    first_calls = [sum(calls[:n]) for n in range(20)]
    thinking_seen = 0
    for n in range(19):
        this = _sent(bodies[first_calls[n]])
        last_call = _sent(bodies[first_calls[n + 1] - 1])
        following = _sent(bodies[first_calls[n + 1]])
        # This turn's history, then the frame (delimiter and notification center).
        past = this[:-3]
        assert following[: len(past)] == past, f"turn {n + 2} changed earlier history"
        # What the turn added is what its last call sent after the frame, byte for byte,
        # then its final reply.
        added = following[len(past) : -3]
        assert added[:-1] == last_call[len(past) + 2 :], f"turn {n + 1}'s tool loop drifted"
        role, reply = added[-1]
        assert role == "assistant"
        for block in reply:
            fields = json.loads(block)
            if fields["type"] == "thinking":
                # Unaltered: the text is exactly the text the model signed.
                assert signer.thinking_text(fields["thinking"], fields["signature"]) is not None
                thinking_seen += 1
    assert thinking_seen >= 19
    # Every assistant message in storage leads with its thinking block.
    assistant = [m for m in history if m.role == "assistant"]
    assert all(
        isinstance(m.content[0], RawBlock) and m.content[0].kind == "thinking" for m in assistant
    )


async def test_a_paused_turn_is_continued_by_sending_the_reply_back(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    api, responder = script
    use = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "cats"},
    }
    result = json.loads(SEARCH_RESULT)
    responder.push(
        Reply(
            (ReplyText("Searching"), ReplyRawBlock(use), ReplyRawBlock(result)),
            stop_reason="pause_turn",
        ),
        "Found it.",
    )
    async with frontmind(api, tmp_path) as fm:
        done = completed(await run_turn(fm, "c1", "look it up"))
        assert done.stop_reason == "end_turn"
        assert done.model_calls == 2
        bodies = api.message_bodies()
        # The second call ends on the paused reply, sent back as it came.
        sent_back = bodies[1]["messages"][-1]
        assert sent_back["role"] == "assistant"
        # The last block that takes cache_control carries the call's breakpoint.
        marked = dict(sent_back["content"][2])
        assert marked.pop("cache_control") == {"ttl": "5m", "type": "ephemeral"}
        assert [sent_back["content"][1], marked] == [use, result]
        history = await fm.history("c1")
        assert [m.role for m in history] == ["user", "assistant", "assistant"]
        assert [b.kind for b in history[1].content if isinstance(b, RawBlock)] == [
            "server_tool_use",
            "web_search_tool_result",
        ]
        responder.push("And again.")
        completed(await run_turn(fm, "c1", "thanks"))
        # The paused reply is replayed as it was sent back, byte for byte.
        replayed = _sent(api.requests[-1].body)
        assert replayed[1] == _sent(api.requests[-2].body)[-1]


def _search_use(n: int) -> dict[str, Any]:
    return {
        "type": "server_tool_use",
        "id": f"srvtoolu_{n}",
        "name": "web_search",
        "input": {"query": f"cats {n}"},
    }


async def test_a_turn_ending_before_its_search_ran_leaves_later_turns_working(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A paused reply may end in a server tool's use the server has not run yet; sent
    back as it is, the model goes on. A turn that ended there (still paused at the loop
    limit, or cut at max_tokens) stored the use without its result, and the API refuses
    that in any later request: every later turn of the continuum failed with a 400."""
    api, responder = script
    responder.push(
        Reply(
            (
                ReplyText("Searching."),
                ReplyRawBlock(_search_use(1)),
                ReplyRawBlock(json.loads(SEARCH_RESULT)),
            ),
            stop_reason="pause_turn",
        ),
        Reply((ReplyText("More."), ReplyRawBlock(_search_use(2))), stop_reason="pause_turn"),
        Reply((ReplyRawBlock(_search_use(3)),), stop_reason="max_tokens"),
        "You are welcome.",
        "Still here.",
    )
    cfg = config(tools={"max_iterations": 2})
    async with frontmind(api, tmp_path, cfg=cfg) as fm:
        paused = completed(await run_turn(fm, "c1", "look it up"))
        assert paused.stop_reason == "pause_turn"
        cut = completed(await run_turn(fm, "c1", "and the next one"))
        assert cut.stop_reason == "max_tokens"
        assert completed(await run_turn(fm, "c1", "thanks")).text == "You are welcome."
        history = await fm.history("c1")
    async with frontmind(api, tmp_path, cfg=cfg) as fm:  # and from the store, reopened
        assert completed(await run_turn(fm, "c1", "still there?")).text == "Still here."
    kinds = [[b.kind for b in m.content if isinstance(b, RawBlock)] for m in history]
    # The search that ran keeps its use and result; the ones that never ran are gone.
    assert kinds[1:3] == [["server_tool_use", "web_search_tool_result"], []]
    assert [b.text for b in history[2].content if isinstance(b, TextBlock)] == ["More."]
    assert [m.role for m in history[3:5]] == ["user", "assistant"]
    assert history[4].content == (TextBlock("(no reply)"),)
    assert any("left out" in w for w in paused.warnings)


async def test_a_search_stored_without_its_result_is_left_out_of_the_replay(
    script: tuple[LocalMessagesAPI, ScriptedResponder], tmp_path: Path
) -> None:
    """A store written before such turns were kept whole holds a server tool's use
    without its result: every turn of that continuum was refused. The replay leaves
    the use out; the store keeps what it holds."""
    api, responder = script
    use = RawBlock("server_tool_use", json.dumps(_search_use(1)))
    messages = (
        Message("user", (TextBlock("look it up"),)),
        Message("assistant", (TextBlock("Searching."), use)),
    )
    responder.push("Hello.")
    async with frontmind(api, tmp_path) as fm:
        write = _stored_turn("c1", "t0", at=fm._clock() - 60, messages=messages)
        assert await fm.storage.commit_turn(DEFAULT_USER, write)
        assert completed(await run_turn(fm, "c1", "hello")).text == "Hello."
        history = await fm.history("c1")
    sent = api.message_bodies()[-1]["messages"]
    assert [b["type"] for b in sent[1]["content"]] == ["text"]
    assert history[1].content == (TextBlock("Searching."), use)


async def test_the_system_message_channel_runs_turns_through_tool_loops(tmp_path: Path) -> None:
    cfg = config(model={"name": "claude-opus-4-8"}, composer={"channel": "system_message"})
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path, cfg=cfg) as fm:
        completed(await run_turn(fm, "c1", "hello"))
        loop = completed(await run_turn(fm, "c1", "Remind me to call Bob in 2 hours."))
        assert loop.model_calls == 2
        after = completed(await run_turn(fm, "c1", "thanks"))
        bodies = api.message_bodies()
    roles = [m["role"] for m in bodies[2]["messages"]]  # the loop's second call
    assert roles[-4:] == ["user", "system", "assistant", "user"]
    # The notification center stays the same system message through the loop.
    assert bodies[2]["messages"][-3] == bodies[1]["messages"][-1]
    assert bodies[1]["messages"][-1]["content"][0]["text"].startswith("NOTIFICATION CENTER")
    # The turn after the loop reads everything the loop turn's first call wrote.
    first_call = loop.usage  # (summed over both calls; the first read the turn before)
    assert first_call.cache_read_input_tokens > 0
    assert after.cache_miss_reason is None
    assert after.usage.cache_read_input_tokens > 0


def test_a_run_of_parallel_tool_calls_is_one_lookback_position() -> None:
    uses = tuple(ToolUseBlock(f"toolu_{i}", "list_reminders", "{}") for i in range(30))
    results = tuple(ToolResultBlock(f"toolu_{i}", "none") for i in range(30))

    def history(rounds: int) -> list[Message]:
        turn = [Message("user", (TextBlock("go"),), turn_id="t2")]
        for _ in range(rounds):
            turn += [
                Message("assistant", uses, turn_id="t2"),
                Message("user", results, turn_id="t2"),
            ]
        turn.append(Message("assistant", (TextBlock("done"),), turn_id="t2"))
        first = [
            Message("user", (TextBlock("hi"),), turn_id="t1"),
            Message("assistant", (TextBlock("hello"),), turn_id="t1"),
        ]
        return first + turn

    def marks(rounds: int) -> list[int]:
        sent = json.loads(msgspec.json.encode(_layout(history(rounds), boundary=1)))
        blocks = [b for m in sent["messages"] for b in m["content"]]
        return [i for i, b in enumerate(blocks) if "cache_control" in b]

    # 61 blocks but 4 positions since the previous breakpoint: no intermediate needed.
    assert len(marks(1)) == 1
    # 9 rounds: 20 positions on, one past the lookback: an intermediate breakpoint.
    assert len(marks(9)) == 2
