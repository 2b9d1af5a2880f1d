"""The notification center's exact text, and its token budget.

user:       ════… (60)                       the delimiter: the opening frame
assistant:  NOTIFICATION CENTER
            This section moves to the front of your context each turn
            to keep important information front-of-mind.
            ════… (60)
            <blank>
            <section>…</section>  <blank>     each non-empty section
            ════… (60)

The compact frame (`composer.frame = "compact"`) says the same in fewer tokens:

user:       ═══                              the delimiter
assistant:  NOTIFICATION CENTER (refreshed every turn)
            <section>…</section>              each non-empty section
            ═══
"""

from __future__ import annotations

from collections.abc import Sequence

from ._markup import FRAME_RULE, HEADER
from ._tokens import estimate_tokens

__all__ = [
    "COMPACT_DELIMITER",
    "DELIMITER",
    "SHORTENED_MARKER",
    "delimiter",
    "fit_notification_center",
    "render_notification_center",
    "wrap_section",
]

DELIMITER = FRAME_RULE
COMPACT_RULE = "═══"
COMPACT_DELIMITER = COMPACT_RULE
SHORTENED_MARKER = "[… shortened to fit the notification center budget]"
_INTRO = (
    f"{HEADER}\n"
    "This section moves to the front of your context each turn\n"
    "to keep important information front-of-mind.\n"
    f"{FRAME_RULE}\n\n"
)
# The same header and rule glyph (so the base prompt's description and the frame
# neutralization hold), without the explanation line and the 60-glyph rules.
_COMPACT_INTRO = f"{HEADER} (refreshed every turn)\n"


def delimiter(frame: str) -> str:
    """The user message that opens the notification center in this frame."""
    return COMPACT_DELIMITER if frame == "compact" else DELIMITER


def wrap_section(name: str, content: str) -> str:
    return f"<{name}>\n{content.strip()}\n</{name}>"


def _render(order: Sequence[str], contents: dict[str, str], frame: str = "seed") -> str:
    if frame == "compact":
        body = "".join(wrap_section(n, contents[n]) + "\n" for n in order if n in contents)
        return _COMPACT_INTRO + body + COMPACT_RULE
    body = "".join(wrap_section(n, contents[n]) + "\n\n" for n in order if n in contents)
    return _INTRO + body + FRAME_RULE


def render_notification_center(
    sections: Sequence[tuple[str, str, int]], budget_tokens: int, frame: str = "seed"
) -> tuple[str, set[str]]:
    """(text, names of shortened or dropped sections) for (name, content, priority).

    Empty sections are left out; no sections at all gives "" (no delimiter, no message).
    Over budget, the lowest-priority sections lose lines from their end first (with a
    visible marker); if even that is not enough, they are dropped whole, lowest first.
    """
    text, _, cut = fit_notification_center(sections, budget_tokens, frame)
    return text, cut


def fit_notification_center(
    sections: Sequence[tuple[str, str, int]], budget_tokens: int, frame: str = "seed"
) -> tuple[str, dict[str, str], set[str]]:
    """`render_notification_center`, and each section's content as the text holds it
    (shortened, or absent when dropped), which is what a section's tokens are counted on."""
    present = [(n, c, p) for n, c, p in sections if c.strip()]
    if not present:
        return "", {}, set()
    order = [n for n, _, _ in present]
    contents = {n: c.strip() for n, c, _ in present}
    text = _render(order, contents, frame)
    if estimate_tokens(text) <= budget_tokens:
        return text, contents, set()
    by_priority = [n for n, _, _ in sorted(present, key=lambda item: item[2])]
    cut: set[str] = set()
    for name in by_priority:
        # Shorten the least important section first; drop it whole only if even its
        # shortest form does not fit, before touching anything more important.
        cut.add(name)
        lines = contents[name].splitlines()
        # The most lines that fit with the marker, found by bisection: popping one line
        # at a time re-rendered the whole center per line, so a section of 20,000 lines
        # held the event loop for seconds (minutes for more).
        low, high = 0, len(lines) - 1  # lines[:k] for k in low..high; high: one line less
        fits: tuple[str, str] | None = None
        while low <= high:
            keep = (low + high) // 2
            contents[name] = "\n".join([*lines[:keep], SHORTENED_MARKER])
            text = _render(order, contents, frame)
            if estimate_tokens(text) <= budget_tokens:
                fits, low = (text, contents[name]), keep + 1
            else:
                high = keep - 1
        if fits is not None:
            contents[name] = fits[1]
            return fits[0], contents, cut
        del contents[name]
        if not contents:
            return "", contents, cut
        text = _render(order, contents, frame)
        if estimate_tokens(text) <= budget_tokens:
            return text, contents, cut
    raise AssertionError("unreachable")  # pragma: no cover
