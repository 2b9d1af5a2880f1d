"""The local Messages API downloads nothing, and decodes only a PNG's image data: a URL on
a `.invalid` host, or one taken down, is a failed download, and a PNG whose data does
not inflate cannot be processed; each refuses the whole request with the live API's
words, which name no block (frontmind/localapi/_fetch.py)."""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import anthropic
import pytest

from frontmind.localapi import LocalMessagesAPI
from tests.test_localapi_models import image, png

pytestmark = pytest.mark.anyio

MODEL = "claude-opus-4-8"


def broken_png() -> str:
    """A PNG with a valid header whose image data was cut short (a download that
    stopped): its size reads, its pixels do not."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = bytes(range(256)) * 40
    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 80, 128, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw)[:-40])
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(data).decode()


def by_url(url: str, kind: str = "image") -> dict[str, Any]:
    return {"type": kind, "source": {"type": "url", "url": url}}


@pytest.fixture
async def api() -> AsyncIterator[LocalMessagesAPI]:
    async with LocalMessagesAPI() as server:
        yield server


async def ask(client: anthropic.AsyncAnthropic, *blocks: dict[str, Any]) -> Any:
    content: Any = [*blocks, {"type": "text", "text": "what is it?"}]
    return await client.messages.create(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": content}]
    )


async def refusal(request: Awaitable[Any]) -> str:
    """The message of the 400 a request gets."""
    with pytest.raises(anthropic.BadRequestError) as refused:
        await request
    body: Any = refused.value.body
    return str(body["error"]["message"])


async def test_a_url_is_taken_as_fetched_until_it_is_taken_down(
    api: LocalMessagesAPI, client: anthropic.AsyncAnthropic
) -> None:
    photo, paper = "https://photos.example/cat.png", "https://papers.example/a.pdf"
    assert (await ask(client, by_url(photo), by_url(paper, "document"))).content
    api.take_down(paper)
    assert (await ask(client, by_url(photo))).content
    with pytest.raises(anthropic.BadRequestError) as refused:
        await ask(client, by_url(photo), by_url(paper, "document"))
    # The live API's whole message: no path names the block.
    assert refused.value.body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "Unable to download the file"},
        "request_id": refused.value.request_id,
    }


async def test_a_url_on_an_invalid_host_cannot_be_downloaded(
    client: anthropic.AsyncAnthropic,
) -> None:
    gone = "Unable to download the file"
    assert await refusal(ask(client, by_url("https://gone.invalid/cat.png"))) == gone
    assert await refusal(ask(client, by_url("https://gone.invalid/a.pdf", "document"))) == gone


async def test_a_png_whose_data_does_not_inflate_cannot_be_processed(
    client: anthropic.AsyncAnthropic,
) -> None:
    assert (await ask(client, image(png(80, 128)))).content
    assert await refusal(ask(client, image(broken_png()))) == "Could not process image"
    # In a tool's result too: the request is refused whole.
    use = {"type": "tool_use", "id": "toolu_1", "name": "shot", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [image(broken_png())]}
    messages: Any = [
        {"role": "user", "content": "take a screenshot"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]
    tools: Any = [
        {"name": "shot", "description": "A screenshot.", "input_schema": {"type": "object"}}
    ]
    request = client.messages.create(model=MODEL, max_tokens=64, messages=messages, tools=tools)
    assert await refusal(request) == "Could not process image"
