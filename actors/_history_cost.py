"""What a stored message costs the history budget: its text at the shared estimate
(`_tokens.py`), images and PDFs by what the API counts for them, never by the length
of their base64 data (a one-page scan is megabytes of base64 and one page's tokens)."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import msgspec

from storage import Message, RawBlock, TextBlock, ToolUseBlock

from ._tokens import BLOCK_FRAMING_TOKENS, estimate_tokens

__all__ = ["IMAGE_TOKENS", "PDF_PAGE_TOKENS", "document_pages", "message_tokens"]

# Estimated cost of an image: about 1,600 tokens at the largest size the API keeps
# unscaled ("Images and vision": tokens = width × height / 750).
IMAGE_TOKENS = 1600
# A PDF is given to the model page by page, as the page's text and an image of it:
# "typically 1,500 to 3,000 tokens per page" (PDF support, "Estimate your costs",
# https://platform.claude.com/docs/en/build-with-claude/pdf-support). The upper figure:
# the budget must not under-count. Its base64 text says nothing of its tokens (a page
# with a scanned image is megabytes of base64 and one page's tokens).
PDF_PAGE_TOKENS = 3000
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def document_pages(block: Any) -> int | None:
    """The PDF pages of a document block (decoded JSON), else None (no PDF). A document
    by URL or file id is at least one page (its pages are not known here); the local
    API counts it so too."""
    if not isinstance(block, dict) or block.get("type") != "document":
        return None
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    if source.get("type") in ("url", "file"):
        return 1
    if source.get("type") != "base64" or source.get("media_type") != "application/pdf":
        return None
    try:
        pdf = base64.b64decode(str(source.get("data", "")))
    except (binascii.Error, ValueError):
        return None
    return max(1, len(_PDF_PAGE.findall(pdf)))


def _binary_tokens(block: Any) -> int | None:
    """The estimate of an image or PDF block (decoded JSON), else None."""
    if not isinstance(block, dict):
        return None
    if block.get("type") == "image":
        return IMAGE_TOKENS
    pages = document_pages(block)
    return None if pages is None else pages * PDF_PAGE_TOKENS


def _without_binaries(value: Any) -> tuple[Any, int]:
    """`value` with its image and PDF blocks taken out, wherever they are (a server tool
    result holds a fetched PDF inside its own content), and those blocks' estimate."""
    binary = _binary_tokens(value)
    if binary is not None:
        return None, binary + BLOCK_FRAMING_TOKENS
    if isinstance(value, dict):
        kept: dict[str, Any] = {}
        total = 0
        for key, item in value.items():
            kept[key], tokens = _without_binaries(item)
            total += tokens
        return kept, total
    if isinstance(value, list):
        items: list[Any] = []
        total = 0
        for item in value:
            rest, tokens = _without_binaries(item)
            total += tokens
            if rest is not None:
                items.append(rest)
        return items, total
    return value, 0


def _json_tokens(text: str) -> int:
    """A block's JSON (or a tool result's array of blocks) as tokens: images and PDFs,
    also nested in a server tool result, by what the API counts for them, never by the
    length of their base64 data nor the few bytes of a URL or a file id."""
    if '"source"' not in text:  # no image or document block anywhere
        return estimate_tokens(text)
    decoded: Any = msgspec.json.decode(text)
    blocks = decoded if isinstance(decoded, list) else [decoded]
    total = 0
    for block in blocks:
        rest, binary = _without_binaries(block)
        if rest is not None:
            total += estimate_tokens(msgspec.json.encode(rest).decode())
        total += binary
    return total


def message_tokens(message: Message) -> int:
    total = 0
    for block in message.content:
        if isinstance(block, TextBlock):
            total += estimate_tokens(block.text)
        elif isinstance(block, ToolUseBlock):
            total += estimate_tokens(block.name + block.input_json)
        elif isinstance(block, RawBlock):
            if block.kind == "image":
                total += IMAGE_TOKENS
            else:
                total += _json_tokens(block.json)
        elif block.content_json:
            total += _json_tokens(block.content_json)
        else:
            total += estimate_tokens(block.content)
        total += BLOCK_FRAMING_TOKENS
    return total
