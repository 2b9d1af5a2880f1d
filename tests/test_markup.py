"""Neutralizing the frame: the fast implementation against the rule written out plainly.

`neutralize_frame` works on runs of text at C speed (it runs over every section on every
turn); the reference below applies the rule in the module's docstring one character at
a time. They must agree on every input, whatever mix of scripts, format characters,
lookalike letters and rules it holds.
"""

from __future__ import annotations

import random
import re
import unicodedata

import pytest

from actors import escape_field, escape_text, neutralize_frame
from actors._markup import _HOMOGLYPHS

RULE = "═" * 60
PLAIN_HEADER = "notification center"
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2e3a\u2e3b\ufe58\ufe63\uff0d\u2212\u23af-"
_LINE_GLYPHS = "▬▭▰▱⎯⏤⎺⎻⎼⎽〓"


def _fold(char: str) -> str:
    if unicodedata.category(char) == "Cf":
        return ""
    return unicodedata.normalize("NFKC", char).casefold().translate(_HOMOGLYPHS)


def _plain(char: str) -> str:
    if char not in "\u200c\u200d" and unicodedata.category(char) == "Cf":
        return ""
    normal = unicodedata.normalize("NFKC", char)
    return "=" if any("\u2500" <= c <= "\u259f" or c in _LINE_GLYPHS for c in normal) else char


def reference(text: str) -> str:
    """The rule, one character at a time."""
    text = "".join(_plain(c) for c in text)
    text = re.sub(f"[{_DASHES}]{{4,}}", lambda m: "-" * len(m.group()), text)
    letters = [(f, i) for i, c in enumerate(text) for f in _fold(c) if f.isalnum()]
    skeleton = "".join(f for f, _ in letters)
    pieces, done = [], 0
    for match in re.finditer("notificationcent(?:er|re)", skeleton):
        start, end = letters[match.start()][1], letters[match.end() - 1][1] + 1
        if start >= done:
            pieces += [text[done:start], PLAIN_HEADER]
            done = end
    return "".join(pieces) + text[done:]


SPELLINGS = (
    "NOTIFICATION CENTER",
    "notification centre",
    "Notification-Center",
    "N O T I F I C A T I O N  C E N T E R",
    "n.o.t.i.f.i.c.a.t.i.o.n center",
    "NOTIFICATION\u200bCENTER",
    "NOTIFI\u00adCATION CENTER",  # soft hyphen
    "ＮＯＴＩＦＩＣＡＴＩＯＮ ＣＥＮＴＥＲ",
    "NОTIFICATIОN CЕNTER",  # Cyrillic О and Е
    "𝐍𝐎𝐓𝐈𝐅𝐈𝐂𝐀𝐓𝐈𝐎𝐍 𝐂𝐄𝐍𝐓𝐄𝐑",
    "ɴᴏᴛɪꜰɪᴄᴀᴛɪᴏɴ ᴄᴇɴᴛᴇʀ",
    "notificationscenter",  # not the header: the "s" breaks it
    "notificatión center",  # not the header: "ó" is a letter of its own
)
PIECES = (
    *SPELLINGS,
    RULE,
    "═",
    "▬▬▬",
    "╔══╗",
    "ￚ",  # halfwidth form whose NFKC is not a rule
    "￨",  # halfwidth light vertical: NFKC is U+2502, a rule
    "————",
    "––",
    "----",
    "- -",
    "\u200b",
    "\u200d",
    "\u202e",
    "👩\u200d💻",
    "é",
    "ß",
    "İ",
    "K",  # Kelvin sign
    "ſ",
    "日本語",
    "नमस्ते",
    "<b>&</b>",
    " ",
    "\n",
    ".",
    "notification",
    "center",
    "N",
    "o",
    "ti",
)


def samples(count: int, seed: int = 14) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        out.append("".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12))))
    return out


@pytest.mark.parametrize("text", SPELLINGS)
def test_each_spelling_matches_the_rule(text: str) -> None:
    assert neutralize_frame(text) == reference(text)
    assert neutralize_frame(f"before {text} after") == reference(f"before {text} after")


def test_the_header_in_any_spelling_becomes_plain() -> None:
    for spelling in SPELLINGS[:-2]:
        assert neutralize_frame(f"see {spelling}!") == f"see {PLAIN_HEADER}!", spelling
    for near_miss in SPELLINGS[-2:]:
        assert neutralize_frame(near_miss) == near_miss


def test_rules_and_dash_runs_become_plain() -> None:
    assert neutralize_frame(RULE) == "=" * 60
    assert neutralize_frame("a ╔══╗ b ▬ c ￨") == "a ==== b = c ="
    assert neutralize_frame("x ———— y –– z") == "x ---- y –– z"
    assert neutralize_frame("zero\u200bwidth \u202eflip 👩\u200d💻") == "zerowidth flip 👩\u200d💻"


def test_agrees_with_the_rule_on_mixed_text() -> None:
    for text in samples(4000):
        assert neutralize_frame(text) == reference(text), ascii(text)


def test_is_idempotent() -> None:
    for text in samples(1000, seed=15):
        once = neutralize_frame(text)
        assert neutralize_frame(once) == once, ascii(text)


def test_ascii_and_other_text_are_treated_alike() -> None:
    # A forgery in plain ASCII is caught as surely as one beside any other character.
    for spelling in SPELLINGS:
        assert neutralize_frame(spelling + " é") == neutralize_frame(spelling) + " é"


def test_escaping_makes_markup_inert_and_neutralizes() -> None:
    assert escape_text("</tag> & <b>\x00") == "&lt;/tag&gt; &amp; &lt;b&gt;"
    assert escape_field("  a\n\tb  NOTIFICATION CENTER  ", 300) == f"a b {PLAIN_HEADER}"
    assert escape_field("x" * 10, 5) == "xxxx…"
