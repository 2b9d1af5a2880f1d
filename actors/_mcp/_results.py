"""An MCP tool result as a `tool_result` the model can read, whatever the server sent.

Text stays text; an image becomes an image block (the media types the API takes, at
most 5 MB each), and so does an image resource; a PDF resource becomes a document
block; an embedded text resource becomes text headed by its URI; a resource link,
audio or other binary data become a line of text saying what was there (the API takes
none of them in a tool result). Text past the server's `max_result_chars` is cut, with
a note saying how much was left out: a server that returns megabytes costs the model a
bounded result, never a failed turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from .._content import IMAGE_MEDIA_TYPES, MAX_IMAGE_BYTES, ResultBudget, base64_problem
from .._tool_spec import ToolOutcome

__all__ = ["mcp_outcome"]

_encoder = msgspec.json.Encoder()


class _Parts:
    """The result's blocks as the API takes them, with the text budget applied."""

    def __init__(self, budget: int) -> None:
        self.blocks: list[dict[str, Any]] = []
        self.texts: list[str] = []
        self.left = budget
        self.cut = 0  # characters left out
        self.binaries = ResultBudget()

    def text(self, text: str) -> None:
        if not text.strip():
            return
        if len(text) > self.left:
            self.cut += len(text) - self.left
            text = text[: self.left]
            self.left = 0
            if not text.strip():
                return
        else:
            self.left -= len(text)
        self.texts.append(text)
        self.blocks.append({"type": "text", "text": text})

    def binary(self, kind: str, media: str, data: str, label: str) -> None:
        if len(data) > MAX_IMAGE_BYTES:
            self.text(
                f"[{label}: {media}, {len(data)} bytes of base64, over the 5 MB the API takes]"
            )
            return
        # Data that is not what its media type says (a JPEG sent as image/png, a broken
        # PDF) would make the API refuse this request and every later one of the turn:
        # the model is told what was there instead.
        problem = base64_problem(media, data)
        if problem is not None:
            self.text(f"[{label}: {media}, not shown: {problem}]")
            return
        if not self.binaries.admit(kind, len(data), f"{label} ({media})"):
            return
        self.texts.append(f"[{kind}]")
        source = {"type": "base64", "media_type": media, "data": data}
        self.blocks.append({"type": kind, "source": source})


def _add(parts: _Parts, block: Any) -> None:
    kind = getattr(block, "type", None)
    if kind == "text":
        parts.text(block.text)
    elif kind == "image":
        if block.mime_type in IMAGE_MEDIA_TYPES:
            parts.binary("image", block.mime_type, block.data, "an image")
        else:
            parts.text(f"[an image of type {block.mime_type}, which the model cannot read]")
    elif kind == "audio":
        parts.text(f"[audio ({block.mime_type}), which the model cannot hear]")
    elif kind == "resource_link":
        described = f": {block.description}" if getattr(block, "description", None) else ""
        mime = f" ({block.mime_type})" if getattr(block, "mime_type", None) else ""
        parts.text(f"[resource link] {block.name} <{block.uri}>{mime}{described}")
    elif kind == "resource":
        resource = block.resource
        uri, mime = str(resource.uri), getattr(resource, "mime_type", None) or "unknown type"
        text = getattr(resource, "text", None)
        if text is not None:
            parts.text(f"[resource <{uri}>]\n{text}")
        elif mime == "application/pdf":
            parts.binary("document", mime, resource.blob, f"the document <{uri}>")
        elif mime in IMAGE_MEDIA_TYPES:
            # A server's screenshot or chart as a resource: the model saw only a line
            # saying some bytes were there; an image block is counted by the request's
            # media fit as any image of a result is.
            parts.binary("image", mime, resource.blob, f"the image <{uri}>")
        else:
            size = len(resource.blob) * 3 // 4
            parts.text(f"[resource <{uri}>: {mime}, about {size} bytes of binary data, not shown]")
    else:
        parts.text(f"[a content block of type {kind!r}, not shown]")


def mcp_outcome(result: Any, max_chars: int) -> ToolOutcome:
    """The `tool_result` for a `CallToolResult` (duck-typed: the `mcp` SDK loads only
    when servers are configured)."""
    parts = _Parts(max_chars)
    content: Sequence[Any] = result.content or ()
    for block in content:
        _add(parts, block)
    structured = getattr(result, "structured_content", None)
    if not parts.blocks and structured is not None:
        parts.text(_encoder.encode(structured).decode())
    left_out = parts.binaries.note()
    if left_out is not None:
        parts.left = max(parts.left, len(left_out))  # the note itself always fits
        parts.text(left_out)
    if parts.cut:
        parts.left = len("[truncated: ]") + 200  # room for the note itself
        parts.text(
            f"[truncated: {parts.cut:,} more characters of this result were left out; "
            f"the server's limit is max_result_chars = {max_chars:,}]"
        )
    is_error = bool(getattr(result, "is_error", False))
    if not parts.blocks:
        return ToolOutcome("(the tool returned nothing)", is_error=is_error)
    text = "\n".join(parts.texts)
    if all(b["type"] == "text" for b in parts.blocks):
        return ToolOutcome(text, is_error=is_error)
    blocks_json = "[" + ",".join(_encoder.encode(b).decode() for b in parts.blocks) + "]"
    return ToolOutcome(text, is_error=is_error, blocks_json=blocks_json)
