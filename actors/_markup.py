"""Escaping untrusted text for the markup it sits in, and neutralizing the frame.

Sections are wrapped in `<name>` tags inside an assistant-role message. Text from
outside (reminder titles, memory text, search passages, documents, the user's own
messages) could otherwise close a tag, or forge the notification center's frame: a line
of "═" or its header. Escaping makes `<`, `>` and `&` inert; neutralizing makes every
lookalike of the frame plain, whatever its spelling:

- characters are compared after Unicode NFKC normalization and case folding, with a
  small table of Cyrillic, Greek and small-capital homoglyphs and of the letters and
  digits that pass for the header's letters (0 for O; 1 and l for I; 3 for E; 4 for A;
  7 for T), so fullwidth "ＮＯＴＩＦＩＣＡＴＩＯＮ", "𝐍𝐎𝐓𝐈𝐅𝐈𝐂𝐀𝐓𝐈𝐎𝐍", a Cyrillic "О",
  "N0TIFICATI0N" or "NOTlFlCATlON" match too (punctuation standing for a letter, as
  "NOT!F!CAT!ON", is not matched: it is read as spacing between letters);
- format characters (zero-width space, bidi controls, soft hyphen, …) are removed,
  except the zero-width (non-)joiners that emoji and Indic scripts need; the header is
  matched across those too, and across any punctuation or spacing between its letters
  ("N O T I F I C A T I O N  C E N T E R");
- the header, however spelled, becomes the plain lower-case "notification center";
- every box-drawing and block character, every character of Symbols for Legacy
  Computing (U+1FB00..U+1FBFF: its line, block and mosaic glyphs; its segmented digits
  normalize to digits and stay), and the line glyphs ▬ ▭ ⎯ ⏤ 〓, becomes "=";
  a run of four or more dashes of any kind (— ― – ‒ ⸺ …) becomes as many "-".

It is a pure function of its input and idempotent, so the same text always gives the
same bytes (the prompt cache depends on it).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

__all__ = [
    "FRAME_RULE",
    "HEADER",
    "escape_field",
    "escape_text",
    "neutralize_frame",
    "spells_header",
]

HEADER = "NOTIFICATION CENTER"
FRAME_RULE = "═" * 60
_PLAIN_HEADER = "notification center"

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
        # Letters and digits that pass for the header's letters
        "0": "o", "ø": "o", "1": "i", "l": "i", "ǀ": "i", "ӏ": "i", "ɩ": "i", "3": "e",
        "ɛ": "e", "4": "a", "ɑ": "a", "7": "t", "ƒ": "f", "г": "r",
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
        "\u2500" <= c <= "\u259f" or "\U0001fb00" <= c <= "\U0001fbff" or c in _LINE_GLYPHS
        for c in unicodedata.normalize("NFKC", char)
    )


def _plain(char: str) -> str:
    """The character as neutralized text: "" for a format character, "=" for a rule.

    Looked up through `_PLAIN_TABLE`: every section passes through here on every turn,
    and the Unicode lookups cost microseconds a character (bench/compose.py).
    """
    if char not in _JOINERS and unicodedata.category(char) == "Cf":
        return ""
    return "=" if _is_rule(char) else char


class _CharTable(dict[int, str]):
    """A per-character function as a `str.translate` table, filled as characters are met."""

    def __init__(self, function: Callable[[str], str]) -> None:
        super().__init__()
        self._function = function

    def __missing__(self, code: int) -> str:
        if len(self) > 65_536:  # bounded, whatever text passes through
            self.clear()
        value = self[code] = self._function(chr(code))
        return value


def _skeleton_of(char: str) -> str:
    """What a character adds to the header's skeleton: its folded letters and digits."""
    return "".join(c for c in _fold(char) if c.isalnum())


_PLAIN_TABLE = _CharTable(_plain)
_SKELETON_TABLE = _CharTable(_skeleton_of)
# ASCII is left alone by `_plain` and folds to its lower case: only runs of other
# characters need the tables, and most text has few of them (translating the whole text
# through a table costs a dictionary lookup a character).
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
# In text whose non-ASCII runs are replaced by their skeletons, the header's letters with
# only ASCII punctuation or spacing between them (the skeleton's characters are letters
# and digits already). Written as the ASCII it matches, not as the negation of letters,
# digits and every non-ASCII code point: `re` compiles a class spanning all of Unicode
# slowly (17 of them made this module's import 0.1 s of every process's start).
_GAP = r"[\x00-/:-@\[-`{-\x7f]*"  # ASCII that is neither a letter nor a digit


def _letter(letter: str) -> str:
    """The header's letter and the ASCII letters and digits that fold to it ("[o0]")."""
    stands_for = "".join(c for c in map(chr, range(128)) if c.isalnum() and _fold(c) == letter)
    return f"[{stands_for}]"


_FOLDED_HEADER = re.compile(
    _GAP.join(map(_letter, "notificationcent"))
    + _GAP
    + "(?:{e}{gap}{r}|{r}{gap}{e})".format(e=_letter("e"), r=_letter("r"), gap=_GAP),
    re.IGNORECASE | re.ASCII,
)


def _plain_run(match: re.Match[str]) -> str:
    return match.group().translate(_PLAIN_TABLE)


def _skeleton_run(match: re.Match[str]) -> str:
    return match.group().translate(_SKELETON_TABLE)


def _dashes(match: re.Match[str]) -> str:
    return "-" * len(match.group())


def _neutralize_header(text: str) -> str:
    # Most text holds no header at all: find that out at C speed first.
    folded = text if text.isascii() else _NON_ASCII.sub(_skeleton_run, text)
    if _FOLDED_HEADER.search(folded) is None:
        return text
    # The skeleton keeps letters and digits only, each with the index of the original
    # character it came from: a match is then mapped back onto the original text.
    letters: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        for folded_char in _skeleton_of(char):
            letters.append(folded_char)
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


def spells_header(text: str) -> bool:
    """Whether `text` spells the notification center's header, in any of the ways
    `neutralize_frame` reads (lookalikes, spacing, case)."""
    return _neutralize_header(text) != text


def neutralize_frame(text: str) -> str:
    """Text that can neither open, close nor imitate the notification center's frame."""
    if not text.isascii():
        text = _NON_ASCII.sub(_plain_run, text)
    text = _DASH_RUN.sub(_dashes, text)
    return _neutralize_header(text)


def markup_text(text: str) -> str:
    """Multi-line untrusted text with its markup made inert (`<`, `>`, `&`, control
    characters), not yet neutralized: for the built-in sections, which the composer
    neutralizes whole (one pass over the section, not one per field)."""
    text = _CONTROL.sub("", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markup_field(text: str, limit: int = 300) -> str:
    """A one-line untrusted field: whitespace folded, shortened, markup made inert."""
    folded = " ".join(text.split())
    if len(folded) > limit:
        folded = folded[: limit - 1] + "…"
    return markup_text(folded)


def escape_text(text: str) -> str:
    """Multi-line untrusted text: escaped and neutralized, line breaks kept."""
    return neutralize_frame(markup_text(text))


def escape_field(text: str, limit: int = 300) -> str:
    """A one-line untrusted field: whitespace folded, escaped, neutralized, shortened."""
    return neutralize_frame(markup_field(text, limit))
