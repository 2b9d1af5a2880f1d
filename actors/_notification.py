"""The notification center's exact text, and its token budget.

user:       ════… (60)                       the delimiter: the opening frame
assistant:  NOTIFICATION CENTER
            This section moves to the front of your context each turn
            to keep important information front-of-mind.
            ════… (60)
            <blank>
            <section>…</section>  <blank>     each non-empty section
            ════… (60)
"""

from __future__ import annotations

from collections.abc import Sequence

from ._markup import FRAME_RULE, HEADER
from ._tokens import estimate_tokens

__all__ = ["DELIMITER", "SHORTENED_MARKER", "render_notification_center", "wrap_section"]

DELIMITER = FRAME_RULE
SHORTENED_MARKER = "[… shortened to fit the notification center budget]"
_INTRO = (
    f"{HEADER}\n"
    "This section moves to the front of your context each turn\n"
    "to keep important information front-of-mind.\n"
    f"{FRAME_RULE}\n\n"
)


def wrap_section(name: str, content: str) -> str:
    return f"<{name}>\n{content.strip()}\n</{name}>"


def _shorten(name: str, content: str, max_tokens: int) -> str:
    """Drop lines from the end until the wrapped section fits, then add the marker."""
    lines = content.strip().splitlines()
    while lines:
        candidate = "\n".join([*lines, SHORTENED_MARKER])
        if estimate_tokens(wrap_section(name, candidate)) <= max_tokens:
            return candidate
        lines.pop()
    return SHORTENED_MARKER


def render_notification_center(
    sections: Sequence[tuple[str, str, int]], budget_tokens: int
) -> tuple[str, set[str]]:
    """(text, names of shortened sections) for (name, content, priority) in display order.

    Empty sections are left out; no sections at all gives "" (no delimiter, no message).
    Over budget, the lowest-priority sections are shortened first, each to what is left.
    """
    present = [(n, c, p) for n, c, p in sections if c.strip()]
    if not present:
        return "", set()
    contents = {n: c for n, c, _ in present}
    fixed = estimate_tokens(_INTRO + FRAME_RULE)
    sizes = {n: estimate_tokens(wrap_section(n, c)) + 1 for n, c in contents.items()}
    shortened: set[str] = set()
    overflow = fixed + sum(sizes.values()) - budget_tokens
    for name, _, _ in sorted(present, key=lambda item: item[2]):
        if overflow <= 0:
            break
        allowed = max(sizes[name] - overflow, 0)
        contents[name] = _shorten(name, contents[name], allowed)
        new_size = estimate_tokens(wrap_section(name, contents[name])) + 1
        overflow -= sizes[name] - new_size
        shortened.add(name)
    body = "".join(wrap_section(n, contents[n]) + "\n\n" for n, _, _ in present)
    return _INTRO + body + FRAME_RULE, shortened
