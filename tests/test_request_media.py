"""A request holds the whole history, and the API bounds a request: its images and PDF
pages (100 for a 200k-token window, 600 for the others), its size (32 MB), and past 20
images the size of each. What a request cannot carry goes as a note; the stored history
keeps everything (actors/_media_fit.py)."""

from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from frontmind import tool
from frontmind.localapi import LocalMessagesAPI, Reply, ReplyToolUse, ScriptedResponder
from storage import DEFAULT_USER, Message, RawBlock, TextBlock
from tests._factories import turn as stored_turn
from tests._harness import FakeClock, completed, config, frontmind, run_turn, unmarked
from tests.test_localapi_models import image, png

pytestmark = pytest.mark.anyio

LEFT_OUT = (
    "[an image from earlier in the conversation, left out of this request: one request "
    "carries at most so many images and documents, and so many bytes]"
)


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI() as server:
        yield server


def photo() -> str:
    """A PNG of 1,900 x 1,900 px of noise (no two alike), stored: 4.8 MB of base64,
    like a phone's photo."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    side = 1900
    rows = os.urandom(side * side)
    raw = b"".join(b"\x00" + rows[i * side : (i + 1) * side] for i in range(side))
    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 0))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(data).decode()


def notes_and_images(body: dict[str, Any]) -> tuple[int, int]:
    notes = images = 0
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else []:
            parts = block["content"] if block["type"] == "tool_result" else [block]
            for part in parts if isinstance(parts, list) else []:
                images += part["type"] == "image"
                notes += part["type"] == "text" and part["text"] == LEFT_OUT
    return notes, images


async def test_photos_past_the_request_size_go_as_notes_oldest_first(tmp_path: Path) -> None:
    """Six photos of 4.8 MB fill a request's 32 MB: the seventh turn's request was a
    413, and so was every later turn that added a photo. The oldest photos now go as
    notes, in steps of 8 MB, so two turns in a row send the same prefix."""
    counts, sizes, sent = [], [], []
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path) as fm:
        for i in range(9):
            message: Any = [image(photo()), {"type": "text", "text": f"photo {i}"}]
            assert completed(await run_turn(fm, "c1", message)).text
            body = api.message_bodies()[-1]  # the server keeps the latest few
            counts.append(notes_and_images(body))
            sizes.append(len(api.state.requests[-1].body))
            sent.append(body["messages"])
        history = await fm.history("c1")
    assert max(sizes) < 32_000_000
    assert counts[:6] == [(0, n) for n in range(1, 7)]
    assert counts[6:] == [(2, 5), (2, 6), (4, 5)]
    # The seventh and eighth requests cut at the same place: the cached prefix holds.
    seventh, eighth = (unmarked(messages) for messages in sent[6:8])
    history_of_seventh = seventh[:-3]  # before the notification center and the message
    assert eighth[: len(history_of_seventh)] == history_of_seventh
    assert sent[-1][-1]["content"][0]["type"] == "image"  # the newest stays
    stored = [b for m in history for b in m.content if isinstance(b, RawBlock)]
    assert [b.kind for b in stored] == ["image"] * 9


async def test_a_request_holds_at_most_the_models_images(tmp_path: Path) -> None:
    """A model of a 200k-token window takes 100 images a request (models.toml). A tool's
    screenshots, 20 a call, made the sixth call's request a 400, and every later one.
    (The row's window is widened here, its image limit kept: the window's fit counts an
    image at the most it can cost, 1,600 tokens, and 120 of them would fill 200k.)"""
    row = {"name": "claude-haiku-4-5", "context_window": 1_000_000, "max_media": 100}
    responder = ScriptedResponder()

    @tool
    def screens() -> list[dict[str, Any]]:
        """Twenty small screenshots."""
        return [image(png(10, 10)) for _ in range(20)]

    cfg = config(
        model={"name": "claude-haiku-4-5"}, models=[row], history={"budget_tokens": 190_000}
    )
    for i in range(6):
        responder.push(Reply((ReplyToolUse("screens", {}, f"toolu_{i}"),)), f"Seen {i}.")
    counts = []
    async with (
        LocalMessagesAPI(responder=responder, models=[row]) as api,
        frontmind(api, tmp_path, cfg=cfg, tools=[screens]) as fm,
    ):
        for i in range(6):
            assert completed(await run_turn(fm, "c1", f"look {i}")).text == f"Seen {i}."
            counts.append(notes_and_images(api.message_bodies()[-1]))
    # Each turn's last request (the tool's result answered): 20, 40 ... 100 images;
    # then 120, of which the oldest 25 (a quarter of 100) go as notes.
    assert counts == [(0, 20), (0, 40), (0, 60), (0, 80), (0, 100), (25, 95)]


def fetched(n: int) -> tuple[RawBlock, RawBlock, TextBlock]:
    """A web fetch of a PDF of one scanned page, as the API returns it: 4.8 MB of base64
    inside the server tool's result."""
    head = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
    page = b"3 0 obj\n<< /Type /Page /Parent 2 0 R >>\nendobj\n"
    data = base64.b64encode(head + page + os.urandom(3_600_000) + b"\n%%EOF\n").decode()
    use = {"type": "server_tool_use", "id": f"srvtoolu_{n}", "name": "web_fetch", "input": {}}
    document = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": data},
        "title": f"Report {n}",
    }
    result = {
        "type": "web_fetch_tool_result",
        "tool_use_id": f"srvtoolu_{n}",
        "content": {
            "type": "web_fetch_result",
            "url": f"https://x.test/{n}.pdf",
            "content": document,
        },
    }
    return (
        RawBlock("server_tool_use", json.dumps(use)),
        RawBlock("web_fetch_tool_result", json.dumps(result)),
        TextBlock(f"Read report {n}."),
    )


async def test_fetched_pdfs_past_the_request_size_go_as_notes(tmp_path: Path) -> None:
    """Web fetch returns a PDF as base64 inside its result, which every later request
    carries. Seven scanned reports made the request 413, and every later turn, for
    good: the fit left out images and documents, never a server tool's result. The
    oldest fetched documents now go with a text source holding the note."""
    clock = FakeClock()
    written: list[RawBlock] = []
    async with LocalMessagesAPI() as api, frontmind(api, tmp_path, clock=clock) as fm:
        for n in range(8):
            reply = fetched(n)
            written += [b for b in reply if isinstance(b, RawBlock)]
            messages = (
                Message("user", (TextBlock(f"read report {n}"),)),
                Message("assistant", reply),
            )
            write = stored_turn("c1", f"t{n}", at=clock.now - 100 + n, messages=messages)
            assert await fm.storage.commit_turn(DEFAULT_USER, write)
        assert completed(await run_turn(fm, "c1", "which report was longest?")).text
        size = len(api.state.requests[-1].body)
        body = api.message_bodies()[-1]
        history = await fm.history("c1")
    assert size < 32_000_000
    sources = [
        block["content"]["content"]["source"]
        for message in body["messages"]
        for block in message["content"]
        if block["type"] == "web_fetch_tool_result"
    ]
    assert [s["type"] for s in sources] == ["text"] * 2 + ["base64"] * 6
    assert sources[0]["data"].startswith("[a document (Report 0) from earlier")
    stored = [b for m in history for b in m.content if isinstance(b, RawBlock)]
    assert stored == written  # the store keeps every byte


async def test_the_local_api_counts_pdf_pages_with_images(
    client: anthropic.AsyncAnthropic,
) -> None:
    """Docs: "Images and vision", General limits: 100 a request for a 200k-token window,
    600 for the others; the live 400 counts a PDF's pages with the images."""
    pages = b"".join(
        b"%d 0 obj\n<< /Type /Page /Parent 2 0 R >>\nendobj\n" % n for n in range(3, 23)
    )
    pdf = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n" + pages
    document = {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.b64encode(pdf + b"%%EOF\n").decode(),
        },
    }
    content: Any = [
        *(image(png(10, 10)) for _ in range(90)),
        document,
        {"type": "text", "text": "?"},
    ]
    messages: Any = [{"role": "user", "content": content}]
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model="claude-haiku-4-5", max_tokens=100, messages=messages)
    body: Any = info.value.body
    assert body["error"]["message"] == "Too much media: 20 document pages + 90 images > 100"
    answer = await client.messages.create(
        model="claude-sonnet-4-6", max_tokens=100, messages=messages
    )
    assert answer.content
