"""Images as a request may carry them: more than 20 in one request, none over 2000 px.

The API takes images up to 8000 px a side, but "if you submit more than 20 images in one
API request, this limit is 2000x2000 px" ("Images and vision",
https://platform.claude.com/docs/en/build-with-claude/vision). Each message is checked
where it enters (at most 8000 px), but a request holds the whole history: a screenshot of
2500 px, taken in when the conversation held few images, made every later request with
more than 20 images a 400, and every turn that added one failed.

So the messages a request sends are fitted here, never the stored ones: when they hold
more than 20 images, each base64 image over 2000 px a side (its size read from its
header) goes as a text note saying so. The note is the same on every turn, so the
cached prefix changes once, where the request first passes 20 images.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

import msgspec

from storage import ContentBlock, Message, RawBlock, TextBlock, ToolResultBlock

from ._content import image_size

__all__ = ["MANY_IMAGES", "MAX_EDGE_MANY", "fit_images"]

MANY_IMAGES = 20
MAX_EDGE_MANY = 2000
# Enough base64 for any header `image_size` reads (a JPEG's start-of-frame may follow
# large metadata segments): 96 KiB of image bytes.
_HEAD_CHARS = 128 * 1024


def fit_images(messages: Sequence[Message]) -> list[Message]:
    """`messages` as sent: as they are with at most 20 images, else with each base64
    image over 2000 px a side replaced by a note."""
    # At most the images counted so: a tool result's "image" strings bound its images
    # without decoding its JSON (megabytes of base64) on every request.
    if _count(messages, exact=False) <= MANY_IMAGES or _count(messages) <= MANY_IMAGES:
        return list(messages)
    return [_fitted(m) for m in messages]


def _count(messages: Sequence[Message], *, exact: bool = True) -> int:
    count = 0
    for message in messages:
        for block in message.content:
            if isinstance(block, RawBlock) and block.kind == "image":
                count += 1
            elif isinstance(block, ToolResultBlock) and '"image"' in block.content_json:
                if exact:
                    count += sum(1 for b in _items(block.content_json) if _is_image(b))
                else:
                    count += block.content_json.count('"image"')
    return count


def _items(content_json: str) -> list[Any]:
    decoded = msgspec.json.decode(content_json)
    return decoded if isinstance(decoded, list) else []


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "image"


def _fitted(message: Message) -> Message:
    blocks: list[ContentBlock] = []
    changed = False
    for block in message.content:
        new = block
        if isinstance(block, RawBlock) and block.kind == "image":
            note = _note(msgspec.json.decode(block.json))
            new = block if note is None else TextBlock(note)
        elif isinstance(block, ToolResultBlock) and '"image"' in block.content_json:
            items = _items(block.content_json)
            notes = [_note(b) if _is_image(b) else None for b in items]
            if any(n is not None for n in notes):
                kept = [
                    b if n is None else {"type": "text", "text": n}
                    for b, n in zip(items, notes, strict=True)
                ]
                new = msgspec.structs.replace(
                    block, content_json=msgspec.json.encode(kept).decode()
                )
        changed = changed or new is not block
        blocks.append(new)
    return msgspec.structs.replace(message, content=tuple(blocks)) if changed else message


def _note(block: Any) -> str | None:
    """The note that stands for an image block over the many-image limit (None: the
    image stays: within it, or not base64, whose size is the API's to judge)."""
    source = block.get("source") if isinstance(block, dict) else None
    if not isinstance(source, dict) or source.get("type") != "base64":
        return None
    data = str(source.get("data", ""))
    head = data[: _HEAD_CHARS - _HEAD_CHARS % 4]
    try:
        raw = base64.b64decode(head)
    except (binascii.Error, ValueError):
        return None
    size = image_size(str(source.get("media_type", "")), raw)
    if size is None or max(size) <= MAX_EDGE_MANY:
        return None
    return (
        f"[an image of {size[0]} x {size[1]} px, left out of this request: a request of more "
        f"than {MANY_IMAGES} images takes none over {MAX_EDGE_MANY} px a side]"
    )
