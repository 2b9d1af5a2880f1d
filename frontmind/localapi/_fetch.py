"""What the API does with an image or a document once the request is valid: it downloads
each one given by URL, and decodes each image.

The live API refuses the whole request when one of them fails, with words that name no
block (public reports quote the whole error body):
- a URL it cannot download (a 404, a host gone): 400 "Unable to download the file"
  (measured against the live API with httpbin and Wikipedia URLs, as a public test of an
  agent records; Claude Code's report anthropics/claude-code#13480 shows the same kind
  of lasting refusal for an image of the history);
- a URL the site's robots.txt disallows: 400 "This URL is disallowed by the website's
  robots.txt file." (SWE-bench/SWE-bench#548);
- a base64 image whose header is valid but whose data cannot be decoded: 400 "Could
  not process image" (anthropics/claude-code#1747, #25592: "every subsequent message in
  the same session also returns the same error").
Docs: "Images and vision" (https://platform.claude.com/docs/en/build-with-claude/vision,
"URL-based image example") and "PDF support" take URL sources as the API fetching them.

This server is offline and fetches nothing; its rule, deterministic:
- a URL whose host is under `.invalid` (RFC 6761: a name that never resolves) cannot be
  downloaded, nor one `LocalMessagesAPI.take_down` named (a page that has gone); any
  other URL is taken as fetched;
- a PNG's image data (its IDAT chunks, zlib) must inflate: the one format the standard
  library decodes; the other formats are read by their header only (`_images.py`).
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Iterator, Set
from urllib.parse import urlsplit

from ._schema import DocumentBlock, ImageBlock, MessageParam, ToolResultBlock, blocks_of
from ._validate import ApiError

__all__ = ["DOWNLOAD_FAILED", "UNDECODABLE_IMAGE", "check_fetched"]

DOWNLOAD_FAILED = "Unable to download the file"
UNDECODABLE_IMAGE = "Could not process image"
_PIXELS_AT_ONCE = 1024 * 1024


def check_fetched(messages: list[MessageParam], gone: Set[str]) -> None:
    """Raise the live API's 400 for the first image or document it could not use
    (`gone`: URLs taken down on this server)."""
    for block in _media(messages):
        source = block.source
        if source.get("type") == "url" and _unreachable(str(source.get("url")), gone):
            raise ApiError(400, DOWNLOAD_FAILED)
        if (
            isinstance(block, ImageBlock)
            and source.get("type") == "base64"
            and source.get("media_type") == "image/png"
            and not _png_inflates(str(source.get("data")))
        ):
            raise ApiError(400, UNDECODABLE_IMAGE)


def _media(messages: list[MessageParam]) -> Iterator[ImageBlock | DocumentBlock]:
    for message in messages:
        for block in blocks_of(message):
            if isinstance(block, ImageBlock | DocumentBlock):
                yield block
            elif isinstance(block, ToolResultBlock) and isinstance(block.content, list):
                yield from (p for p in block.content if isinstance(p, ImageBlock | DocumentBlock))


def _unreachable(url: str, gone: Set[str]) -> bool:
    host = (urlsplit(url).hostname or "").rstrip(".")
    return url in gone or host == "invalid" or host.endswith(".invalid")


def _png_inflates(encoded: str) -> bool:
    """Whether a PNG's IDAT data inflates (True for a PNG with none: a header alone is
    read as `_images.py` reads it, and the validation before this judged it). Frontmind
    checks messages alike (`actors/_content.py`), in code of its own: this server stands
    for the remote API, and sharing the check would hide a fault in it from the tests."""
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return True  # refused by the validation before this
    idat = bytearray()
    at = 8
    while at + 8 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        if not kind.isalpha():
            break  # not a chunk: the header alone was what the validation read
        if kind == b"IDAT":
            idat += data[at + 8 : at + 8 + length]
        at += 12 + length
    if not idat:
        return True
    # Raw deflate, past the stream's 2-byte header: its checksum is not read (decoders
    # differ on it; a stream cut short or garbled is what fails them all).
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    rest = bytes(idat[2:])
    try:
        while rest and not inflater.eof:
            # A megabyte of pixels at a time: an 8000 x 8000 image is 256 MB of them.
            inflater.decompress(rest, _PIXELS_AT_ONCE)
            rest = inflater.unconsumed_tail
        inflater.flush()
    except zlib.error:
        return False
    return inflater.eof
