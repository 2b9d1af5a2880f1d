"""What of a conversation's images and documents one request can carry.

The API bounds a request, and a request holds the whole history:
- at most `max_media` images and PDF pages (models.toml: 100 for a 200k-token window,
  600 for the others; "Images and vision", https://platform.claude.com/docs/en/build-with-claude/vision,
  "General limits"; the live 400 counts a PDF's pages with the images: "Too much media:
  0 document pages + 103 images > 100");
- at most 32 MB ("Request size limits",
  https://platform.claude.com/docs/en/api/overview#request-size-limits): six phone
  photos of 5 MB of base64 each fill it;
- past 20 images, none over 2000 px a side ("if you submit more than 20 images in one
  API request, this limit is 2000x2000 px", the same page).

Each message is checked where it enters (`_content.py`: 100 images, 30 MB, 8000 px), the
history as a whole was not: the seventh photo of 4.8 MB made the request 413, and every
later turn that added a photo failed the same way; a tool's screenshots could make even
a text turn fail, for good.

So the messages a request sends are fitted here, never the stored ones:
1. Over the count or the size, the oldest images and documents go as a text note saying
   so, in steps (a quarter of the count, `SIZE_STEP` of bytes) so that the cached prefix
   changes once a step, not on every turn; the message being answered keeps its own.
   A server tool's result holding a fetched PDF (web fetch's) counts by its bytes; left
   out, it stays the result its use needs, the document's base64 source a text one
   holding the note.
2. Then, in a request of more than 20 images, each base64 image over 2000 px a side (its
   size read from its header) goes as a note.
A note is the same on every turn for the same block, so a cached prefix stays valid.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import msgspec

from storage import ContentBlock, Message, RawBlock, TextBlock, ToolResultBlock, ToolUseBlock

from ._content import image_size
from ._history_cost import document_pages

__all__ = [
    "MANY_IMAGES",
    "MAX_EDGE_MANY",
    "MAX_REQUEST_BYTES",
    "fit_media",
    "pieces",
    "result_items",
    "with_notes",
]

MANY_IMAGES = 20
MAX_EDGE_MANY = 2000
# The docs' "32 MB", read as the smaller of its two meanings (32,000,000, not 32 MiB).
MAX_REQUEST_BYTES = 32_000_000
# What the fit leaves for what it does not measure exactly: JSON framing, a text's escapes.
_MARGIN_BYTES = 1024 * 1024
SIZE_STEP = 8 * 1024 * 1024  # base64 left out at a time once a request is over its size
# Enough base64 for any header `image_size` reads (a JPEG's start-of-frame may follow
# large metadata segments): 96 KiB of image bytes.
_HEAD_CHARS = 128 * 1024
# Media counts of block JSON already read, by (length, hash): a request's history is
# decoded anew each turn, and a PDF's pages are counted from its decoded bytes.
_UNITS: dict[tuple[int, str, str, str], int] = {}
_UNITS_KEPT = 4096


class _Piece(NamedTuple):
    """One image or document of the request: where it is, what it counts, its bytes."""

    message: int
    block: int
    item: int  # -1: the block itself; else its place in the tool result's list
    units: int
    size: int


def fit_media(
    messages: Sequence[Message],
    *,
    current: int,
    max_media: int,
    other_bytes: Callable[[], int],
) -> list[Message]:
    """`messages` as sent. `current`: the index of the message being answered (its own
    images stay); `max_media`: the model's images and PDF pages a request takes;
    `other_bytes`: the size of the rest of the request (system, tools, the notification
    center), asked only when the messages alone come near the limit."""
    units = images_upper = quick = 0
    # Text and tool calls are skipped: the history's token budget bounds them (a window
    # of a million tokens is some 4 MB of text), and ordinary turns are all text.
    for message in messages:
        for block in message.content:
            if type(block) is RawBlock:
                quick += _quick_bytes(block.json)
                if block.kind == "image":
                    units += 1
                    images_upper += 1
                elif block.kind == "document":
                    units += _units(block.json)
            elif type(block) is ToolResultBlock and block.content_json:
                quick += _quick_bytes(block.content_json)
                counted = _units(block.content_json)
                units += counted
                images_upper += counted  # its images, and its PDFs' pages: at most
    limit = MAX_REQUEST_BYTES - _MARGIN_BYTES
    size = 0
    if quick > limit // 4:  # near the limit with the text: measured, the rest too
        size = sum(_block_bytes(b) for m in messages for b in m.content)
        limit -= other_bytes()
    fitted = list(messages)
    if units > max_media or size > limit:
        fitted = _left_out(fitted, current, units - max_media, max_media, size - limit)
    if images_upper > MANY_IMAGES and _count_images(fitted) > MANY_IMAGES:
        fitted = [_wide_fitted(m) for m in fitted]
    return fitted


def _left_out(
    messages: list[Message], current: int, units_over: int, max_media: int, bytes_over: int
) -> list[Message]:
    """The oldest pieces, outside the message being answered, as notes: enough for the
    count and for the size, each rounded up to its step (the cut moves once a step)."""
    step = max(1, max_media // 4)
    units_wanted = math.ceil(units_over / step) * step if units_over > 0 else 0
    bytes_wanted = math.ceil(bytes_over / SIZE_STEP) * SIZE_STEP if bytes_over > 0 else 0
    chosen: set[tuple[int, int, int]] = set()
    units = size = 0
    for piece in pieces(messages):
        if units >= units_wanted and size >= bytes_wanted:
            break
        if piece.message == current or (piece.units == 0 and size >= bytes_wanted):
            continue
        chosen.add((piece.message, piece.block, piece.item))
        units += piece.units
        size += piece.size
    return with_notes(messages, chosen, _left_out_note)


def with_notes(
    messages: Sequence[Message], chosen: set[tuple[int, int, int]], note: Callable[[Any], str]
) -> list[Message]:
    """`messages` with each chosen piece (message, block, item: -1 for the block itself,
    else its place in a tool result's list) as the text `note` gives for its fields."""
    touched = {c[0] for c in chosen}
    return [
        _noted(message, i, chosen, note) if i in touched else message
        for i, message in enumerate(messages)
    ]


def pieces(messages: Sequence[Message]) -> Iterator[_Piece]:
    """Every image and document of `messages`, oldest first, with where it is."""
    for i, message in enumerate(messages):
        for j, block in enumerate(message.content):
            if isinstance(block, RawBlock) and block.kind in ("image", "document"):
                units = 1 if block.kind == "image" else _units(block.json)
                yield _Piece(i, j, -1, units, len(block.json))
            elif isinstance(block, RawBlock) and _holds_fetched(block):
                # A server tool's result holding a fetched PDF: its bytes, not a count
                # (the media count is the API's to judge for it).
                yield _Piece(i, j, -1, 0, len(block.json))
            elif isinstance(block, ToolResultBlock) and _units(block.content_json):
                for k, item in enumerate(result_items(block.content_json)):
                    kind = item.get("type") if isinstance(item, dict) else None
                    if kind in ("image", "document"):
                        yield _Piece(i, j, k, _item_units(item), _item_bytes(item))


def _noted(
    message: Message, index: int, chosen: set[tuple[int, int, int]], note: Callable[[Any], str]
) -> Message:
    in_results = {(m, b) for m, b, item in chosen if item >= 0}
    blocks: list[ContentBlock] = []
    for j, block in enumerate(message.content):
        if (index, j, -1) in chosen and isinstance(block, RawBlock) and _holds_fetched(block):
            # It stays a server tool's result (its use needs it): the fetched document
            # keeps its place, its base64 source a text one saying it was left out.
            kept = _fetched_noted(msgspec.json.decode(block.json))
            blocks.append(RawBlock(block.kind, msgspec.json.encode(kept).decode()))
        elif (index, j, -1) in chosen and isinstance(block, RawBlock):
            blocks.append(TextBlock(note(msgspec.json.decode(block.json))))
        elif isinstance(block, ToolResultBlock) and (index, j) in in_results:
            items = result_items(block.content_json)
            kept = [
                {"type": "text", "text": note(item)} if (index, j, k) in chosen else item
                for k, item in enumerate(items)
            ]
            blocks.append(
                msgspec.structs.replace(block, content_json=msgspec.json.encode(kept).decode())
            )
        else:
            blocks.append(block)
    return msgspec.structs.replace(message, content=tuple(blocks))


def _holds_fetched(block: RawBlock) -> bool:
    """A server tool's result (web fetch's) holding a base64 document: a fetched PDF."""
    return (
        block.kind.endswith("_tool_result")
        and '"base64"' in block.json
        and '"document"' in block.json
    )


def _fetched_noted(value: Any) -> Any:
    """`value` with each base64 document in it given a text source holding the note."""
    if isinstance(value, list):
        return [_fetched_noted(item) for item in value]
    if not isinstance(value, dict):
        return value
    source = value.get("source")
    if (
        value.get("type") == "document"
        and isinstance(source, dict)
        and source.get("type") == "base64"
    ):
        note = {"type": "text", "media_type": "text/plain", "data": _left_out_note(value)}
        return {**value, "source": note}
    return {key: _fetched_noted(item) for key, item in value.items()}


def _left_out_note(block: Any) -> str:
    """What stands for an image or a document left out: the same for the same block."""
    kind = "an image" if isinstance(block, dict) and block.get("type") == "image" else None
    if kind is None:
        title = block.get("title") if isinstance(block, dict) else None
        kind = f"a document ({title!s:.80})" if isinstance(title, str) and title else "a document"
    return (
        f"[{kind} from earlier in the conversation, left out of this request: one request "
        "carries at most so many images and documents, and so many bytes]"
    )


def _units(text: str) -> int:
    """Images and PDF pages in a block's JSON, or in a tool result's list of blocks.
    Remembered by the text's length and three samples of it (read in constant time: the
    history is decoded anew for every request, and hashing megabytes of base64 each time
    would cost what counting once did); a PDF's pages are counted from its bytes."""
    third = len(text) // 3
    key = (len(text), text[:64], text[third : third + 64], text[-64:])
    found = _UNITS.get(key)
    if found is None:
        if '"source"' not in text:  # no image or document in it
            return 0
        if len(_UNITS) >= _UNITS_KEPT:
            del _UNITS[next(iter(_UNITS))]
        decoded: Any = msgspec.json.decode(text)
        items = decoded if isinstance(decoded, list) else [decoded]
        found = _UNITS[key] = sum(_item_units(item) for item in items)
    return found


def _item_units(item: Any) -> int:
    if not isinstance(item, dict):
        return 0
    if item.get("type") == "image":
        return 1
    return document_pages(item) or 0


def _item_bytes(item: Any) -> int:
    """An item's bytes in the request: its base64 (or text) and some framing."""
    source = item.get("source") if isinstance(item, dict) else None
    data = source.get("data") if isinstance(source, dict) else None
    return (len(data) if isinstance(data, str) else 0) + 256


def _quick_bytes(text: str) -> int:
    """No fewer than a JSON text's bytes, in constant time (`isascii` reads a flag)."""
    return len(text) if text.isascii() else 4 * len(text)


def _bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def _text_bytes(text: str) -> int:
    """A text as a JSON string (its escapes counted for the commonest characters)."""
    escapes = text.count('"') + text.count("\\") + text.count("\n")
    return _bytes(text) + escapes + 32


def _block_bytes(block: ContentBlock) -> int:
    if isinstance(block, TextBlock):
        return _text_bytes(block.text)
    if isinstance(block, RawBlock):
        return _bytes(block.json)
    if isinstance(block, ToolUseBlock):
        return _bytes(block.name) + _bytes(block.input_json) + len(block.id) + 64
    if block.content_json:
        return _bytes(block.content_json) + len(block.tool_use_id) + 64
    return _text_bytes(block.content) + len(block.tool_use_id) + 64


def result_items(content_json: str) -> list[Any]:
    """A tool result's list of blocks (empty for a text result)."""
    decoded = msgspec.json.decode(content_json)
    return decoded if isinstance(decoded, list) else []


def _count_images(messages: Sequence[Message]) -> int:
    count = 0
    for message in messages:
        for block in message.content:
            if isinstance(block, RawBlock) and block.kind == "image":
                count += 1
            elif isinstance(block, ToolResultBlock) and '"image"' in block.content_json:
                count += sum(1 for b in result_items(block.content_json) if _is_image(b))
    return count


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "image"


def _wide_fitted(message: Message) -> Message:
    blocks: list[ContentBlock] = []
    changed = False
    for block in message.content:
        new = block
        if isinstance(block, RawBlock) and block.kind == "image":
            note = _wide_note(msgspec.json.decode(block.json))
            new = block if note is None else TextBlock(note)
        elif isinstance(block, ToolResultBlock) and '"image"' in block.content_json:
            items = result_items(block.content_json)
            notes = [_wide_note(b) if _is_image(b) else None for b in items]
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


def _wide_note(block: Any) -> str | None:
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
