"""Escaping untrusted text for the markup it sits in, and neutralizing the frame.

Sections are wrapped in `<name>` tags inside an assistant-role message. Text from
outside (reminder titles, memory text, search passages, documents) could otherwise close
a tag, or forge the notification center's frame: a line of "═" or its header. Escaping
makes `<`, `>` and `&` inert; neutralizing rewrites box-drawing rules to "=" and the
header to lower case, so no stored text can open, close or imitate the frame.
"""

from __future__ import annotations

import re

__all__ = ["FRAME_RULE", "HEADER", "escape_field", "escape_text", "neutralize_frame"]

HEADER = "NOTIFICATION CENTER"
FRAME_RULE = "═" * 60

# The whole box-drawing block (U+2500–U+257F): any of it could draw a convincing rule.
_BOX_DRAWING = re.compile(r"[\u2500-\u257f]")
_HEADER_WORDS = re.compile(r"notification\s*cent(?:er|re)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def neutralize_frame(text: str) -> str:
    text = _BOX_DRAWING.sub("=", text)
    return _HEADER_WORDS.sub(lambda m: m.group(0).lower(), text)


def escape_text(text: str) -> str:
    """Multi-line untrusted text: escaped and neutralized, line breaks kept."""
    text = _CONTROL.sub("", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return neutralize_frame(text)


def escape_field(text: str, limit: int = 300) -> str:
    """A one-line untrusted field: whitespace folded, escaped, neutralized, shortened."""
    folded = " ".join(text.split())
    if len(folded) > limit:
        folded = folded[: limit - 1] + "…"
    return escape_text(folded)
