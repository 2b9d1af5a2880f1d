"""Images as the API checks and counts them, from the header bytes alone.

Docs (https://platform.claude.com/docs/en/build-with-claude/vision, "Evaluate image
size" and "FAQ"): JPEG, PNG, GIF and WebP; at most 5 MB per image through the API and
8000 x 8000 px (2000 x 2000 px when a request holds more than 20 images); an image whose
long edge exceeds 1568 px, or that is larger than about 1.15 megapixels, is scaled down
with its aspect ratio kept; an image costs `width * height / 750` tokens at the size it
is used. The size is read from the format's header (no image library): PNG's IHDR, a
JPEG start-of-frame marker, GIF's logical screen, WebP's VP8 / VP8L / VP8X chunk.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct

__all__ = [
    "MAX_IMAGE_BYTES",
    "ImageError",
    "decode_image",
    "image_tokens",
    "max_edge",
    "sniff_media_type",
]

MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_EDGE = 8000
MAX_EDGE_MANY = 2000  # when a request holds more than MANY_IMAGES images
MANY_IMAGES = 20
_LONG_EDGE = 1568
_MAX_PIXELS = 1_150_000


class ImageError(ValueError):
    """What is wrong with an image, in the API's words."""


def sniff_media_type(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _png_size(data: bytes) -> tuple[int, int] | None:
    if len(data) < 24 or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _gif_size(data: bytes) -> tuple[int, int] | None:
    if len(data) < 10:
        return None
    width, height = struct.unpack("<HH", data[6:10])
    return width, height


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        # Start of frame: SOF0-SOF15 except DHT (C4), JPG (C8) and DAC (CC).
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


_SIZERS = {
    "image/png": _png_size,
    "image/gif": _gif_size,
    "image/jpeg": _jpeg_size,
    "image/webp": _webp_size,
}


def decode_image(encoded: str, media_type: str) -> tuple[int, int]:
    """The (width, height) of a base64 image said to be `media_type`, or `ImageError`."""
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("The image data is not valid base64.") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError(f"image exceeds 5 MB maximum: {len(data)} bytes > {MAX_IMAGE_BYTES} bytes")
    actual = sniff_media_type(data)
    if actual is None:
        raise ImageError("Could not process image")
    if actual != media_type:
        raise ImageError(
            f"The image was specified using the {media_type} media type, but the image "
            f"appears to be a {actual} image"
        )
    size = _SIZERS[actual](data)
    if size is None or 0 in size:
        raise ImageError("Could not process image")
    return size


def max_edge(images_in_request: int) -> int:
    return MAX_EDGE_MANY if images_in_request > MANY_IMAGES else MAX_EDGE


def image_tokens(width: int, height: int) -> int:
    """The docs' width * height / 750 at the size the API uses the image at."""
    scale = min(1.0, _LONG_EDGE / max(width, height), math.sqrt(_MAX_PIXELS / (width * height)))
    used_w, used_h = max(1, int(width * scale)), max(1, int(height * scale))
    return math.ceil(used_w * used_h / 750)
