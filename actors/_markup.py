"""Escaping untrusted text for the markup it sits in, and neutralizing the frame.

Sections are wrapped in `<name>` tags inside an assistant-role message. Text from
outside (reminder titles, memory text, search passages, documents, the user's own
messages) could otherwise close a tag, or forge the notification center's frame: a line
of "═" or its header. Escaping makes `<`, `>` and `&` inert; neutralizing makes every
lookalike of the frame plain, whatever its spelling:

- characters are compared after Unicode NFKC normalization and case folding, with a
  small table of Cyrillic, Greek and small-capital homoglyphs, so fullwidth
  "ＮＯＴＩＦＩＣＡＴＩＯＮ", "𝐍𝐎𝐓𝐈𝐅𝐈𝐂𝐀𝐓𝐈𝐎𝐍" or a Cyrillic "О" match too;
- format characters (zero-width space, bidi controls, soft hyphen, …) are removed,
  except the zero-width (non-)joiners that emoji and Indic scripts need; the header is
  matched across those too, and across any punctuation or spacing between its words;
- the header, however spelled, becomes the plain lower-case "notification center";
- every box-drawing and block character, and the line glyphs ▬ ▭ ⎯ ⏤ 〓, becomes "=";
  a run of four or more dashes of any kind (— ― – ‒ ⸺ …) becomes as many "-".

It is a pure function of its input and idempotent, so the same text always gives the
same bytes (the prompt cache depends on it).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["FRAME_RULE", "HEADER", "escape_field", "escape_text", "neutralize_frame"]

HEADER = "NOTIFICATION CENTER"
FRAME_RULE = "═" * 60
_PLAIN_HEADER = "notification center"

_HEADER_WORDS = re.compile(r"notification[^a-z0-9]*cent(?:er|re)", re.IGNORECASE)
_SKELETON_HEADER = re.compile(r"notificationcent(?:er|re)")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_JOINERS = frozenset("\u200c\u200d")  # needed by emoji sequences and Indic scripts
# Line glyphs outside the box-drawing and block-element ranges.
_LINE_GLYPHS = frozenset("▬▭▰▱⎯⏤⎺⎻⎼⎽〓")
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2e3a\u2e3b\ufe58\ufe63\uff0d\u2212\u23af-"
_DASH_RUN = re.compile(f"[{_DASHES}]{{4,}}")
_HOMOGLYPHS = str.maketrans(
    {
        # Cyrillic
        "а": "a", "с": "c", "е": "e", "і": "i", "ї": "i", "о": "o", "р": "p", "т": "t",
        "ѕ": "s", "ј": "j", "һ": "h", "ԁ": "d", "ո": "n", "п": "n",
        # Greek
        "α": "a", "ε": "e", "ι": "i", "ν": "n", "ο": "o", "τ": "t", "ρ": "p", "ϲ": "c",
        "κ": "k", "η": "n",
        # Latin small capitals and dotless i
        "ᴀ": "a", "ᴄ": "c", "ᴇ": "e", "ꜰ": "f", "ɪ": "i", "ɴ": "n", "ᴏ": "o", "ʀ": "r",
        "ᴛ": "t", "ı": "i",
    }
)  # fmt: skip


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """What a character looks like, for matching: "" for a format character."""
    if unicodedata.category(char) == "Cf":
        return ""
    return unicodedata.normalize("NFKC", char).casefold().translate(_HOMOGLYPHS)


def _is_rule(char: str) -> bool:
    return any(
        "\u2500" <= c <= "\u259f" or c in _LINE_GLYPHS for c in unicodedata.normalize("NFKC", char)
    )


@lru_cache(maxsize=4096)
def _plain(char: str) -> str:
    """The character as neutralized text: "" for a format character, "=" for a rule.

    Cached per character: every section passes through here on every turn, and the
    Unicode lookups cost microseconds a character (bench/compose.py).
    """
    if char not in _JOINERS and unicodedata.category(char) == "Cf":
        return ""
    return "=" if _is_rule(char) else char


class _FoldTable(dict[int, str]):
    """`_fold` as a `str.translate` table, filled as characters are met."""

    def __missing__(self, code: int) -> str:
        if len(self) > 65_536:  # bounded, whatever text passes through
            self.clear()
        folded = self[code] = _fold(chr(code))
        return folded


_FOLD_TABLE = _FoldTable()
_NOT_ALNUM = re.compile(r"[\W_]+")


def _neutralize_header(text: str) -> str:
    # Most text holds no header at all: find that out at C speed first.
    if not _SKELETON_HEADER.search(_NOT_ALNUM.sub("", text.translate(_FOLD_TABLE))):
        return text
    # The skeleton keeps letters and digits only, each with the index of the original
    # character it came from: a match is then mapped back onto the original text.
    letters: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        for folded in _fold(char):
            if folded.isalnum():
                letters.append(folded)
                origin.append(index)
    skeleton = "".join(letters)
    pieces: list[str] = []
    done = 0
    for match in _SKELETON_HEADER.finditer(skeleton):
        start, end = origin[match.start()], origin[match.end() - 1] + 1
        if start < done:
            continue
        pieces.append(text[done:start])
        pieces.append(_PLAIN_HEADER)
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def neutralize_frame(text: str) -> str:
    """Text that can neither open, close nor imitate the notification center's frame."""
    if text.isascii():
        # Nothing to normalize: only the header can be imitated with ASCII.
        text = _HEADER_WORDS.sub(_PLAIN_HEADER, text) if "otif" in text.lower() else text
        return _DASH_RUN.sub(lambda m: "-" * len(m.group(0)), text)
    text = "".join(map(_plain, text))
    text = _DASH_RUN.sub(lambda m: "-" * len(m.group(0)), text)
    return _neutralize_header(text)


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
