"""A user message made of content blocks: checked where it enters, before any model call.

A message is either text, or a list of blocks in the Messages API's own shape: `text`,
`image` and `document`. Text becomes a typed `TextBlock`; an image or a document is kept
as the exact JSON it came as (`RawBlock`), and is replayed as those bytes on every later
turn.

Limits, from the API documentation (late 2026):
- Images: base64, URL or Files API sources; JPEG, PNG, GIF or WebP; at most 5 MB each
  ("Images and vision", https://platform.claude.com/docs/en/build-with-claude/vision:
  the API refuses larger images); at most 100 images per request for 200K-window models
  (600 for the others): Frontmind holds each message to 100, and a request's whole
  history to the model's count and size (`_media_fit.py`).
- Documents: PDF (base64, URL or file) or plain text sources ("PDF support",
  https://platform.claude.com/docs/en/build-with-claude/pdf-support).
- A request is at most 32 MB on the standard endpoints ("Request size limits",
  https://platform.claude.com/docs/en/api/overview#request-size-limits): one message
  may use at most that, less room for the rest of the request.

A tool's result (a user tool's blocks, an MCP server's content) is held to a smaller
share (`ResultBudget`): it rides in every later request of the conversation beside the
user's own images and the other results, so one result takes at most
`MAX_RESULT_IMAGES` images and `MAX_RESULT_BINARY_BYTES` of base64 images and
documents; what is over is left out, and a text note in the result says so.

What the model reads as text in such blocks (a text block's text, a plain-text or
content document's text, its title and context) can be neutralized like any other text
from outside (`neutralize_blocks`): a block with nothing to neutralize keeps its exact
JSON, so ordinary content goes to the model and into the history byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

from storage import (
    MAX_MESSAGE_CHARS,
    ContentBlock,
    InvalidInput,
    MessageTooLarge,
    RawBlock,
    TextBlock,
    check_message,
    check_storable,
    excerpt,
    visible,
)

from ._markup import neutralize_frame, spells_header

__all__ = [
    "IMAGE_MEDIA_TYPES",
    "MAX_IMAGES_PER_MESSAGE",
    "MAX_IMAGE_BYTES",
    "MAX_RESULT_BINARY_BYTES",
    "MAX_RESULT_IMAGES",
    "MAX_USER_CONTENT_BYTES",
    "ResultBudget",
    "UserInput",
    "base64_problem",
    "block_fields",
    "budget_result_blocks",
    "neutral_text",
    "neutral_tool_blocks_json",
    "neutral_tool_text",
    "neutralize_blocks",
    "neutralize_blocks_json",
    "user_content",
]

MAX_IMAGE_BYTES = 5 * 1024 * 1024  # per image, as base64 text
# Pixels on either side ("Images and vision": a larger image is refused, and with it
# the request; a request of more than 20 images takes at most 2000, not checked here).
MAX_IMAGE_EDGE = 8000
MAX_IMAGES_PER_MESSAGE = 100
MAX_USER_CONTENT_BYTES = 30 * 1024 * 1024  # of the 32 MB request: room for the rest
IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# One tool result's share: a fifth of the 100 images and a quarter of the 32 MB a request
# may hold, so a few such results and the rest of the conversation still fit.
MAX_RESULT_IMAGES = 20
MAX_RESULT_BINARY_BYTES = 8 * 1024 * 1024  # base64 images and documents, summed
_SOURCES = {
    "image": frozenset({"base64", "url", "file"}),
    "document": frozenset({"base64", "url", "file", "text", "content"}),
}
_DOCUMENT_KEYS = frozenset({"type", "source", "title", "context", "citations"})
_encoder = msgspec.json.Encoder()

UserInput = str | Sequence[Mapping[str, Any] | msgspec.Raw]


def _decoded(block: Mapping[str, Any] | msgspec.Raw, position: int) -> tuple[dict[str, Any], bytes]:
    if isinstance(block, msgspec.Raw):
        raw = bytes(block)
        try:
            fields = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise InvalidInput(f"content[{position}]: malformed JSON: {exc}") from None
    elif isinstance(block, Mapping):
        fields = dict(block)
        _check_strings(fields, f"content[{position}]")  # before encoding: it names the place
        try:
            raw = _encoder.encode(fields)
        except (TypeError, UnicodeEncodeError, msgspec.EncodeError) as exc:
            raise InvalidInput(f"content[{position}]: not JSON: {exc}") from None
    else:
        raise InvalidInput(f"content[{position}]: a block is an object, not {type(block).__name__}")
    if not isinstance(fields, dict):
        raise InvalidInput(f"content[{position}]: a block is an object")
    if isinstance(block, msgspec.Raw):
        _check_strings(fields, f"content[{position}]")
    return fields, raw


def _check_strings(value: object, where: str) -> None:
    """Every text in a block storable as it is (`check_storable`): a NUL or a lone
    surrogate is refused here, not by PostgreSQL at the turn's commit."""
    if isinstance(value, str):
        check_storable(value, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(item, f"{where}.{key}" if isinstance(key, str) else where)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_strings(item, f"{where}[{index}]")


def _shown(value: object) -> str:
    """A rejected value as an error quotes it: an excerpt (it may be megabytes)."""
    return repr(excerpt(value)) if isinstance(value, str) else excerpt(repr(value))


def _check_source(kind: str, fields: dict[str, Any], where: str) -> None:
    source = fields.get("source")
    if not isinstance(source, dict):
        raise InvalidInput(f"{where}: an {kind} needs a 'source' object")
    source_type = source.get("type")
    if source_type not in _SOURCES[kind]:
        allowed = ", ".join(sorted(_SOURCES[kind]))
        raise InvalidInput(
            f"{where}.source.type: must be one of {allowed}, not {_shown(source_type)}"
        )
    if source_type == "url" and not str(source.get("url", "")).startswith(("https://", "http://")):
        raise InvalidInput(f"{where}.source.url: must be an http(s) URL")
    if source_type == "file" and not isinstance(source.get("file_id"), str):
        raise InvalidInput(f"{where}.source.file_id: must be a string")
    if source_type == "text":
        # The API's plain-text source: {"media_type": "text/plain", "data": "..."}; an
        # empty or missing field is its 400 once the turn streams.
        if source.get("media_type") != "text/plain":
            raise InvalidInput(f"{where}.source.media_type: must be text/plain")
        if not isinstance(source.get("data"), str) or not source["data"]:
            raise InvalidInput(f"{where}.source.data: must be text, not empty")
    if source_type == "content":
        content = source.get("content")
        if not isinstance(content, str | list) or content == "":
            raise InvalidInput(f"{where}.source.content: must be text or a list of blocks")
    if source_type == "base64":
        media = source.get("media_type")
        if kind == "image" and media not in IMAGE_MEDIA_TYPES:
            allowed = ", ".join(sorted(IMAGE_MEDIA_TYPES))
            raise InvalidInput(f"{where}.source.media_type: must be one of {allowed}")
        if kind == "document" and media != "application/pdf":
            raise InvalidInput(f"{where}.source.media_type: must be application/pdf")
        data = source.get("data")
        if not isinstance(data, str) or not data:
            raise InvalidInput(f"{where}.source.data: must be base64 text")
        if kind == "image" and len(data) > MAX_IMAGE_BYTES:
            raise MessageTooLarge(
                f"{where}: the image is {len(data)} bytes of base64; the API's limit is "
                f"{MAX_IMAGE_BYTES} (5 MB) per image"
            )
        problem = base64_problem(str(media), data)
        if problem is not None:
            raise InvalidInput(f"{where}.source.data: {problem}")


def base64_problem(media: str, data: str) -> str | None:
    """Why the API would refuse `data` as base64 of `media` (None: it is that): not
    valid base64, bytes that are not what the media type says, or an image over
    `MAX_IMAGE_EDGE` pixels on a side. The API refuses each, but only once the turn is
    streaming: "the image does not match the provided media type" (vision) / "the PDF
    specified was not valid" (PDF support) / "image dimensions exceed max allowed size"."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "not valid base64"
    if not _is_a(media, raw):
        return f"the data is not {media}"
    size = image_size(media, raw)
    if size is not None and max(size) > MAX_IMAGE_EDGE:
        return (
            f"it is {size[0]} x {size[1]} pixels; the API takes at most {MAX_IMAGE_EDGE} on a side"
        )
    # Its size first: the pixels are inflated to be read, and a PNG of 5 MB can hold
    # gigabytes of them (seconds of the event loop) when its size is not bounded.
    if media == "image/png" and not _png_pixels_whole(raw):
        # A screenshot or a download cut short: its header reads, its pixels do not, and
        # the API refuses the request ("Could not process image"), naming no block.
        return "the PNG's image data is cut short or corrupt"
    return None


def image_size(media: str, raw: bytes) -> tuple[int, int] | None:
    """An image's (width, height) as its header gives it (None: not an image, or a
    header this cannot read, which is left to the API)."""
    if media == "image/png" and raw[12:16] == b"IHDR" and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        return width, height
    if media == "image/gif" and len(raw) >= 10:
        width, height = struct.unpack("<HH", raw[6:10])
        return width, height
    if media == "image/webp":
        return _webp_size(raw)
    if media == "image/jpeg":
        return _jpeg_size(raw)
    return None


def _webp_size(raw: bytes) -> tuple[int, int] | None:
    chunk = raw[12:16]
    if chunk == b"VP8X" and len(raw) >= 30:
        return 1 + int.from_bytes(raw[24:27], "little"), 1 + int.from_bytes(raw[27:30], "little")
    if chunk == b"VP8L" and len(raw) >= 25:
        bits = int.from_bytes(raw[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and len(raw) >= 30:
        width, height = struct.unpack("<HH", raw[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    """From the first start-of-frame marker, walking the segments before it."""
    i = 2
    while i + 9 < len(raw):
        if raw[i] != 0xFF:
            i += 1
            continue
        marker = raw[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        (length,) = struct.unpack(">H", raw[i + 2 : i + 4])
        # SOF0-SOF15, except DHT (C4), JPG (C8) and DAC (CC), which share the range.
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", raw[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


# What each media type's data starts with (its signature): PNG, JPEG, GIF, WebP's RIFF
# header with WEBP at byte 8, a PDF's header within its first kilobyte (the PDF format
# allows bytes before it).
_SIGNATURES = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
}


def _is_a(media: str, raw: bytes) -> bool:
    if media == "image/webp":
        return raw[:4] == b"RIFF" and raw[8:12] == b"WEBP"
    if media == "application/pdf":
        return b"%PDF-" in raw[: 1024 + 4]  # starting at any of the first 1,024 bytes
    return raw.startswith(_SIGNATURES[media])


# The most of a PNG's pixels inflated where it enters (a few milliseconds): the check
# runs on the event loop, and an 8000 x 8000 image is 256 MB of them (0.6 s). Past this
# much, a PNG whose chunks are whole is left to the API, whose refusal of it names the
# block (actors/_media_refused.py).
PNG_PIXELS_CHECKED = 4 * 1024 * 1024


def _png_pixels_whole(raw: bytes) -> bool:
    """Whether a PNG's chunks are whole and its image data (its IDAT chunks, one zlib
    stream) inflates, up to `PNG_PIXELS_CHECKED` bytes of pixels. A PNG with none (a
    header alone) is left to the API. The local Messages API reads PNGs alike
    (`frontmind/localapi/_fetch.py`) on purpose, not through this: it stands for the
    remote API in the tests, and a check shared with it could not fail them."""
    idat = bytearray()
    at = 8
    while at + 8 <= len(raw):
        (length,) = struct.unpack(">I", raw[at : at + 4])
        kind = raw[at + 4 : at + 8]
        if not kind.isalpha():
            break  # not a chunk
        if at + 12 + length > len(raw):
            return False  # a chunk cut short: a download that stopped
        if kind == b"IDAT":
            idat += raw[at + 8 : at + 8 + length]
        at += 12 + length
    if not idat:
        return True
    # Raw deflate, past the stream's 2-byte header: its checksum is not read (decoders
    # differ on it; a stream cut short or garbled is what fails them all).
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    rest = bytes(idat[2:])
    produced = 0
    try:
        while rest and not inflater.eof:
            produced += len(inflater.decompress(rest, 256 * 1024))
            if produced >= PNG_PIXELS_CHECKED:
                return True  # its chunks are whole; the API judges the rest
            rest = inflater.unconsumed_tail
        inflater.flush()
    except zlib.error:
        return False
    return inflater.eof


class ResultBudget:
    """What of one tool result's images and documents fits (see the module doc)."""

    def __init__(self) -> None:
        self.images = 0
        self.size = 0
        self.left_out: list[str] = []  # what was dropped, e.g. "an image (image/png)"

    def admit(self, kind: str, size: int, label: str) -> bool:
        """Whether a block of `kind` ("image" / "document"), `size` bytes of base64 (0 for
        a URL or file source), fits; if not, it is counted as left out."""
        images = self.images + (kind == "image")
        if images > MAX_RESULT_IMAGES or self.size + size > MAX_RESULT_BINARY_BYTES:
            self.left_out.append(label)
            return False
        self.images, self.size = images, self.size + size
        return True

    def note(self) -> str | None:
        """The text saying what was left out (None: nothing)."""
        if not self.left_out:
            return None
        shown = ", ".join(self.left_out[:5]) + (", ..." if len(self.left_out) > 5 else "")
        return (
            f"[left out: {len(self.left_out)} more images or documents ({shown}); one tool "
            f"result holds at most {MAX_RESULT_IMAGES} images and "
            f"{MAX_RESULT_BINARY_BYTES // (1024 * 1024)} MB of images and documents]"
        )


def block_fields(item: Mapping[str, Any] | msgspec.Raw) -> Any:
    """A result block's fields, a block given as raw JSON decoded (None: not JSON)."""
    if not isinstance(item, msgspec.Raw):
        return item
    try:
        return msgspec.json.decode(bytes(item))
    except msgspec.DecodeError:
        return None


def budget_result_blocks(
    blocks: Sequence[Mapping[str, Any] | msgspec.Raw],
) -> list[Mapping[str, Any] | msgspec.Raw]:
    """A tool's result blocks within `ResultBudget`: the images and documents over it
    replaced by one text note at the end. Blocks it cannot read are left to
    `user_content`'s checks."""
    budget = ResultBudget()
    kept: list[Mapping[str, Any] | msgspec.Raw] = []
    for item in blocks:
        fields = block_fields(item)
        kind = fields.get("type") if isinstance(fields, Mapping) else None
        if kind in ("image", "document"):
            assert isinstance(fields, Mapping)
            source = fields.get("source")
            source = source if isinstance(source, Mapping) else {}
            data = source.get("data") if source.get("type") == "base64" else None
            size = len(data) if isinstance(data, str) else 0
            media = source.get("media_type") or source.get("type") or "unknown"
            if not budget.admit(kind, size, f"{'an' if kind == 'image' else 'a'} {kind} ({media})"):
                continue
        kept.append(item)
    note = budget.note()
    if note is not None:
        kept.append({"type": "text", "text": note})
    return kept


def neutral_text(text: str) -> str:
    """`neutralize_frame`, but text it would leave with nothing visible (format
    characters alone, which cannot draw a frame) is kept: the API refuses empty text."""
    neutral = neutralize_frame(text)
    return neutral if neutral == text or visible(neutral) else text


def _strings(value: Any) -> Iterator[str]:
    """Every string in a decoded JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def neutral_tool_text(text: str) -> str:
    """A tool's text result: byte for byte (a file's box drawing, a command's table,
    its format characters: what the tool said, which the model may copy into a file)
    unless it spells the notification center's header, as a forged frame must; then
    neutralized whole, as a user's text is."""
    return neutral_text(text) if spells_header(text) else text


def neutral_tool_blocks_json(blocks_json: str) -> str:
    """A tool result's content blocks (their JSON array): as they came unless a text in
    them spells the header (`neutral_tool_text`); then neutralized as a user's blocks are."""
    if not blocks_json or not any(map(spells_header, _strings(msgspec.json.decode(blocks_json)))):
        return blocks_json
    return neutralize_blocks_json(blocks_json)


def _neutral_value(value: Any) -> Any:
    """A text, or a content document's list of text blocks, neutralized."""
    if isinstance(value, str):
        return neutral_text(value)
    if isinstance(value, list):
        return [_neutral_block(item) for item in value]
    return value


def _neutral_block(block: Any) -> Any:
    """A block with what the model reads as text neutralized (the same object when
    nothing changed)."""
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    changed = dict(block)
    if kind == "text":
        changed["text"] = _neutral_value(block.get("text"))
    elif kind == "document":
        for key in ("title", "context"):
            if key in block:
                changed[key] = _neutral_value(block[key])
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") in ("text", "content"):
            key = "data" if source["type"] == "text" else "content"
            changed["source"] = {**source, key: _neutral_value(source.get(key))}
    return block if changed == block else changed


def neutralize_blocks(blocks: tuple[ContentBlock, ...]) -> tuple[ContentBlock, ...]:
    """Text blocks and text documents with any forged frame neutralized; every other
    block, and a document with nothing to neutralize, exactly as it came."""
    out: list[ContentBlock] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            neutral = neutral_text(block.text)
            out.append(block if neutral == block.text else TextBlock(neutral))
        elif isinstance(block, RawBlock) and block.kind == "document":
            fields = msgspec.json.decode(block.json)
            neutral_fields = _neutral_block(fields)
            same = neutral_fields is fields
            out.append(
                block if same else RawBlock("document", _encoder.encode(neutral_fields).decode())
            )
        else:
            out.append(block)
    return tuple(out)


def neutralize_blocks_json(blocks_json: str) -> str:
    """A tool result's content blocks (their JSON array) with any forged frame
    neutralized: the same string when there is nothing to neutralize."""
    if not blocks_json:
        return blocks_json
    blocks = msgspec.json.decode(blocks_json)
    if not isinstance(blocks, list):
        return blocks_json
    neutral = [_neutral_block(block) for block in blocks]
    if all(a is b for a, b in zip(neutral, blocks, strict=True)):
        return blocks_json
    return _encoder.encode(neutral).decode()


def user_content(message: UserInput) -> tuple[tuple[ContentBlock, ...], str]:
    """(the blocks to store, the message's text for records and search), or an error
    saying what was wrong: `InvalidInput` (400) or `MessageTooLarge` (413)."""
    if isinstance(message, str):
        return (TextBlock(check_message(message)),), message
    items: Sequence[Any] = message
    if isinstance(items, bytes | bytearray) or not isinstance(items, Sequence):
        raise InvalidInput("a message is text or a list of content blocks")
    if not message:
        raise InvalidInput("the message has no content blocks")
    blocks: list[ContentBlock] = []
    texts: list[str] = []
    size = images = 0
    for position, item in enumerate(items):
        where = f"content[{position}]"
        fields, raw = _decoded(item, position)
        size += len(raw)
        if size > MAX_USER_CONTENT_BYTES:
            raise MessageTooLarge(
                f"the message is over {MAX_USER_CONTENT_BYTES} bytes; the API takes at most "
                "32 MB per request"
            )
        kind = fields.get("type")
        if "cache_control" in fields:
            raise InvalidInput(f"{where}: Frontmind places cache breakpoints itself")
        if kind == "text":
            text = fields.get("text")
            if not isinstance(text, str) or set(fields) - {"type", "text"}:
                raise InvalidInput(f"{where}: a text block is {{'type': 'text', 'text': ...}}")
            if not visible(text):
                raise InvalidInput(
                    f"{where}: the text is empty, or holds only invisible characters"
                    " (the API refuses empty text)"
                )
            texts.append(text)
            blocks.append(TextBlock(text))
        elif kind in ("image", "document"):
            allowed = {"type", "source"} if kind == "image" else _DOCUMENT_KEYS
            extra = sorted(set(fields) - allowed)
            if extra:
                raise InvalidInput(f"{where}: unknown fields {extra} in an {kind} block")
            _check_source(kind, fields, where)
            if kind == "image":
                images += 1
                if images > MAX_IMAGES_PER_MESSAGE:
                    raise InvalidInput(
                        f"the message has more than {MAX_IMAGES_PER_MESSAGE} images, the "
                        "API's limit per request"
                    )
            texts.append(f"[{kind}]")
            blocks.append(RawBlock(kind, raw.decode()))
        else:
            raise InvalidInput(
                f"{where}.type: a user message takes text, image and document blocks, "
                f"not {_shown(kind)}"
            )
    text = "\n".join(texts)
    if len(text) > MAX_MESSAGE_CHARS:
        raise MessageTooLarge(
            f"the message's text is {len(text)} characters; the limit is {MAX_MESSAGE_CHARS}"
        )
    return tuple(blocks), text
