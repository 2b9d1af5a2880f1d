"""Images and documents of the history the API can no longer use.

A block enters the history only with a turn the API answered, but it is sent again with
every later request, and the API uses it again each time:
- an image or a PDF by URL is downloaded anew: once its page is gone (a 404, a host that
  no longer answers), every request holding it is refused, 400 "Unable to download the
  file" (or, for a site that came to forbid it, "This URL is disallowed by the website's
  robots.txt file.", SWE-bench/SWE-bench#548);
- a base64 image is decoded anew: one the API cannot decode is refused with 400 "Could
  not process image" ("every subsequent message in the same session also returns the
  same error", anthropics/claude-code#25592).
So one such block broke every later turn of its continuum until trimming left it out,
which a short continuum never does. Docs: "Images and vision" ("URL-based image
example", https://platform.claude.com/docs/en/build-with-claude/vision) and "PDF
support" (https://platform.claude.com/docs/en/build-with-claude/pdf-support).

The live 400s name no block (public reports quote their whole body bare). So the blocks a
refusal can be about are those of its kind (`media_refusal`): every block by URL, or
every base64 image. Of the history, they go to the model as a note (in the request only:
the stored history keeps them), and the request is sent once more (once a kind: a
history can hold both); the conversation actor remembers them, so later turns send the
note at once (`with_unusable`). The same block gets the same note on every turn, so the
cached prefix holds.

A block of the running turn's own tool results (a browsing tool's image by a URL that is
dead, a screenshot the API cannot decode) goes as a note the same way, saying a tool
returned it, so the tool loop goes on: the model answers without it, or tries another
tool. Only the message being answered fails its turn: the user must fix it.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Sequence, Set
from typing import Any, Literal, NamedTuple

import msgspec

from storage import Message, RawBlock, ToolResultBlock

from ._media_fit import pieces, result_items, with_notes

__all__ = ["Refusal", "Suspect", "media_refusal", "suspects", "with_unusable"]

Kind = Literal["url", "image"]

# The live API's words for a block it could not use, and the kind of block each names.
_REFUSALS: tuple[tuple[str, Kind], ...] = (
    ("Unable to download the file", "url"),
    ("disallowed by the website's robots.txt", "url"),
    ("Could not process image", "image"),
)


class Refusal(NamedTuple):
    """A request refused for one of its images or documents: the API's words."""

    words: str
    kind: Kind


class Suspect(NamedTuple):
    """A block a refusal can be about: where it is (message, block, item: -1 for the
    block itself, else its place in a tool result's list), what it is remembered by,
    and how an error names it.

    The label is shown only in the error of a refusal the turn cannot get past
    (`_refused_media`, actors/_conversation.py), and only for the turn's own messages
    (`suspects` of its tail): there, a block that is not in a tool result is in the
    message being answered (the tail's first; the model's messages hold no image or
    document that is read here, a server tool's fetched PDF aside), which "the message"
    names. The history's suspects are used by their key alone: they go as notes, and
    an error never names them (so a history block's label, "the message's content[i]"
    of some older message, is never seen)."""

    place: tuple[int, int, int]
    key: str
    label: str


def media_refusal(error: str) -> Refusal | None:
    """What kind of block a refused request's error is about (None: not such an error)."""
    for words, kind in _REFUSALS:
        if words in error:
            return Refusal(words, kind)
    return None


def suspects(messages: Sequence[Message], kind: Kind) -> list[Suspect]:
    """The blocks of `messages` that a refusal of this kind can be about."""
    found: list[Suspect] = []
    for place, fields in _media(messages):
        key = _key(fields)
        if key is not None and key.startswith(kind):
            message = messages[place[0]].content[place[1]]
            where = (
                f"the message's content[{place[1]}]"
                if place[2] < 0
                else f"the result of tool call {getattr(message, 'tool_use_id', '?')}"
            )
            found.append(Suspect(place, key, f"{where} ({_what(fields)})"))
    return found


def with_unusable(
    messages: Sequence[Message], unusable: Set[str], *, running: bool = False
) -> list[Message]:
    """`messages` with each block remembered as unusable as its note. Sent with every
    request of the continuum: only blocks of the kinds remembered are read (a URL
    remembered hashes no image's data). `running`: the messages are the running turn's
    own tool rounds (their note says a tool returned the block)."""
    if not unusable:
        return list(messages)
    kinds = {key.split(" ", 1)[0] for key in unusable}
    found = _media(messages, tuple(_SOURCES[k] for k in kinds if k in _SOURCES))
    chosen = {place for place, fields in found if _key(fields) in unusable}
    if not chosen:
        return list(messages)
    return with_notes(messages, chosen, functools.partial(_note, running=running))


# What the JSON of a block of each kind holds (a block without it is not read).
_SOURCES: dict[str, str] = {"url": '"url"', "image": '"base64"'}


def _media(
    messages: Sequence[Message], sources: tuple[str, ...] = tuple(_SOURCES.values())
) -> Iterator[tuple[tuple[int, int, int], Any]]:
    """Each image and document of `messages` (a server tool's fetched PDF aside: it is
    the API's own copy) with its fields; only those whose JSON holds one of `sources`."""
    items: tuple[int, int, list[Any]] | None = None  # a tool result's, decoded once
    for piece in pieces(messages):
        block = messages[piece.message].content[piece.block]
        place = (piece.message, piece.block, piece.item)
        if isinstance(block, RawBlock) and block.kind in ("image", "document"):
            if any(source in block.json for source in sources):
                yield place, msgspec.json.decode(block.json)
        elif isinstance(block, ToolResultBlock):
            if not any(source in block.content_json for source in sources):
                continue
            if items is None or items[:2] != place[:2]:
                items = (*place[:2], result_items(block.content_json))
            yield place, items[2][piece.item]


def _key(fields: Any) -> str | None:
    """What a block is remembered by: its URL, or a hash of a base64 image's data (a
    block of another source: None)."""
    source = fields.get("source") if isinstance(fields, dict) else None
    if not isinstance(source, dict):
        return None
    if source.get("type") == "url":
        return f"url {source.get('url')}"
    if fields.get("type") == "image" and source.get("type") == "base64":
        digest = hashlib.blake2b(str(source.get("data")).encode(), digest_size=16)
        return f"image {digest.hexdigest()}"
    return None


def _what(fields: Any) -> str:
    kind = "an image" if fields.get("type") == "image" else "a document"
    title = fields.get("title")
    if isinstance(title, str) and title:
        kind += f" ({title:.80})"
    source = fields["source"]
    if source.get("type") == "url":
        return f"{kind} by URL {source.get('url')!s:.200}"
    return f"{kind} ({source.get('media_type')})"


def _note(fields: Any, *, running: bool = False) -> str:
    """What stands for a block the API could not use: the same for the same block.
    `running`: one a tool returned in the running turn (the model is still working: it
    can call a tool again, or go on without it)."""
    url = fields["source"].get("type") == "url"
    failure = "download a file by URL" if url else "process an image"
    if running:
        return (
            f"[{_what(fields)} returned by the tool, left out of this request: the Messages "
            f"API could not {failure} of this request, and this may be it; call a tool "
            "again, or go on without it, if it is needed]"
        )
    return (
        f"[{_what(fields)} from earlier in the conversation, left out of this request: "
        f"the Messages API could not {failure} of this conversation, and this may be it; "
        "ask for it again if it is needed]"
    )
