"""The model's stream is read with a decoder that ends lines at CR, LF or CR LF only.

A JSON string may hold U+2028, U+2029 and U+0085 raw; `str.splitlines` (and with it
`iter_lines()`) splits there and cut the event in two ("a malformed stream event").
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import anyio.abc
import pytest

from actors import AnthropicModel, StreamDone, StreamText
from actors._layout import ModelRequest, OutMessage, OutText
from actors._llm import SSEDecoder
from frontmind.localapi import LocalMessagesAPI, ScriptedResponder
from storage import TextBlock
from tests._harness import completed, frontmind, run_turn
from tests._http import read_request, tiny_server

pytestmark = pytest.mark.anyio

# Line separators of Unicode that are no line ends in SSE, and a few neighbours.
ODD = "a\u2028b\u2029c\u0085d\u000be\u000cf\u001cg\u001dh\u001ei"


def _events(text: str) -> list[tuple[str, str]]:
    """The stream of one text reply, as the Messages API sends it."""
    return [
        ("message_start", json.dumps({"type": "message_start", "message": _message()})),
        ("ping", json.dumps({"type": "ping"})),
        (
            "content_block_start",
            json.dumps(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                }
            ),
        ),
        (
            "content_block_delta",
            json.dumps(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
                ensure_ascii=False,  # the separators travel raw, as the API may send them
            ),
        ),
        ("content_block_stop", json.dumps({"type": "content_block_stop", "index": 0})),
        (
            "message_delta",
            json.dumps(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                }
            ),
        ),
        ("message_stop", json.dumps({"type": "message_stop"})),
    ]


def _message() -> dict[str, object]:
    return {
        "id": "msg_crlf",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }


def _wire(events: list[tuple[str, str]], newline: bytes) -> bytes:
    lines = []
    for name, data in events:
        lines.append(b"event: " + name.encode() + newline)
        lines.append(b"data: " + data.encode() + newline + newline)
    return b"".join(lines)


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_the_decoder_splits_at_cr_and_lf_only_whatever_the_chunks(newline: bytes) -> None:
    wire = _wire(_events(ODD), newline)
    expected = [(name, data.encode()) for name, data in _events(ODD)]
    assert "\u2028".encode() in wire
    for size in (1, 2, 3, 7, 64, len(wire)):
        decoder = SSEDecoder()
        got: list[tuple[str, bytes]] = []
        for start in range(0, len(wire), size):
            got.extend(decoder.feed(wire[start : start + size]))
        assert got == expected, (newline, size)


def test_the_decoder_joins_data_lines_and_skips_comments() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b": a comment\nevent: x\ndata: one\ndata:two\nid: 7\n\ndata: y\n\n")
    assert events == [("x", b"one\ntwo"), ("", b"y")]


async def test_a_reply_holding_unicode_line_separators_streams_whole(tmp_path: Path) -> None:
    responder = ScriptedResponder()
    async with LocalMessagesAPI(responder=responder) as api, frontmind(api, tmp_path) as fm:
        responder.push(ODD, f"again: {ODD}")
        first = completed(await run_turn(fm, "c1", "hello"))
        second = completed(await run_turn(fm, "c1", "once more"))
        history = await fm.history("c1")
    assert first.text == ODD
    assert second.text == f"again: {ODD}"
    # Stored as sent, and replayed on the second turn byte for byte.
    assert history[1].content == (TextBlock(ODD),)
    replayed = json.loads(api.requests[-1].body)["messages"]
    assert [b["text"] for b in replayed[1]["content"]] == [ODD]


def crlf_server(body: bytes) -> AbstractAsyncContextManager[str]:
    """A real HTTP server that answers every request with `body` as an SSE stream, in
    small chunks (so CR and LF of one line end fall into different reads)."""

    async def answer(client: anyio.abc.SocketStream) -> None:
        await read_request(client)
        await client.send(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        for start in range(0, len(body), 5):
            piece = body[start : start + 5]
            await client.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        await client.send(b"0\r\n\r\n")

    return tiny_server(answer)


async def test_crlf_line_ends_through_the_sdk() -> None:
    body = _wire(_events(ODD), b"\r\n")
    async with crlf_server(body) as url:
        model = AnthropicModel(api_key="k", base_url=url, max_retries=0, timeout=10)
        try:
            request = ModelRequest(
                model="claude-sonnet-4-6",
                max_tokens=64,
                messages=(OutMessage("user", (OutText("hi"),)),),
            )
            events = [e async for e in model.stream(request)]
        finally:
            await model.aclose()
    assert [e.text for e in events if isinstance(e, StreamText)] == [ODD]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.content == (TextBlock(ODD),)
    assert done.stop_reason == "end_turn"
    assert done.message_id == "msg_crlf"
