from __future__ import annotations

from storage import Storage

from .._markup import markup_text
from .._messages import Turn
from .._trinket import Trinket

__all__ = ["DomainDocTrinket", "StaticTrinket"]


class StaticTrinket(Trinket):
    """Fixed text: the base prompt, tool guidance, tool hints."""

    def __init__(self, text: str) -> None:
        self._text = text

    async def render(self, turn: Turn) -> str:
        return self._text


class DomainDocTrinket(Trinket):
    """The turn's user's documents, in label order (stable, so it stays cached): each
    user's documents form that user's own system prompt. Nothing is kept between
    renders, so no user's documents can outlive a render for another user."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    async def render(self, turn: Turn) -> str:
        documents = await self._storage.documents(turn.user)
        return "\n\n".join(
            f'<document label="{doc.label}">\n{markup_text(doc.content)}\n</document>'
            for doc in documents
        )
