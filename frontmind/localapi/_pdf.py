"""PDF documents as the API counts them, read with the standard library alone.

Docs (https://platform.claude.com/docs/en/build-with-claude/pdf-support, "Estimate
your costs"): each page is given to the model as extracted text and as an image of the
page, so a page costs its text's tokens plus an image's (`width * height / 750` after
downscaling, see `_images`); "typically 1,500 to 3,000 tokens per page". Pages are the
`/Type /Page` objects, their size the `/MediaBox` (US letter when none is found); text is
what the content streams show with `Tj` / `TJ`, after inflating `FlateDecode` streams.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
import zlib

from ._images import image_tokens
from ._tokens import text_token_weight

__all__ = ["PdfError", "pdf_pages", "pdf_tokens"]

_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_MEDIA_BOX = re.compile(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]")
_STREAM = re.compile(rb"stream\r?\n(.*?)\r?\nendstream", re.S)
_SHOWN = re.compile(rb"\((?:\\.|[^\\)])*\)")
_RENDER_DPI_SCALE = 4  # pages are rendered finely, then downscaled like any image
_LETTER = (612.0, 792.0)


class PdfError(ValueError):
    """What is wrong with a PDF, in the API's words."""


def _decode(encoded: str) -> bytes:
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise PdfError("The PDF specified was not valid.") from None
    if not data.startswith(b"%PDF-"):
        raise PdfError("The PDF specified was not valid.")
    return data


def _page_size(data: bytes) -> tuple[float, float]:
    match = _MEDIA_BOX.search(data)
    if match is None:
        return _LETTER
    x0, y0, x1, y1 = (float(v) for v in match.groups())
    return abs(x1 - x0) or _LETTER[0], abs(y1 - y0) or _LETTER[1]


def _shown_text(data: bytes) -> str:
    parts: list[str] = []
    for match in _STREAM.finditer(data):
        raw = match.group(1)
        with contextlib.suppress(zlib.error):  # not deflated: read as it is
            raw = zlib.decompress(raw)
        if b"Tj" not in raw and b"TJ" not in raw:
            continue
        # Pieces of one TJ array are one run of text; spacing inside them is layout.
        parts.append("".join(m.group(0)[1:-1].decode("latin-1") for m in _SHOWN.finditer(raw)))
    return " ".join(" ".join(parts).split())


def pdf_tokens(encoded: str) -> float:
    """Tokens of a base64 PDF: per page an image, plus the text of every page."""
    data = _decode(encoded)
    pages = max(len(_PAGE.findall(data)), 1)
    width, height = _page_size(data)
    page_image = image_tokens(round(width * _RENDER_DPI_SCALE), round(height * _RENDER_DPI_SCALE))
    return pages * page_image + text_token_weight(_shown_text(data))


def pdf_pages(encoded: str) -> int:
    """Pages of a base64 PDF, as a request's media count takes them (at least one)."""
    return max(len(_PAGE.findall(_decode(encoded))), 1)
