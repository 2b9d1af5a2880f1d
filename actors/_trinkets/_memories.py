from __future__ import annotations

from storage import Storage

from .._markup import escape_field
from .._messages import Turn
from .._trinket import Trinket
from ._timefmt import relative

__all__ = ["MemoriesTrinket"]


class MemoriesTrinket(Trinket):
    """The stored memories most relevant to the user's message (BM25 and recency)."""

    def __init__(self, storage: Storage, *, top_k: int) -> None:
        self._storage = storage
        self._top_k = top_k

    async def render(self, turn: Turn) -> str:
        hits = await self._storage.search_memories(
            turn.user, turn.user_text, limit=self._top_k, now=turn.now
        )
        return "\n".join(
            f"- ({relative(hit.memory.created_at, turn.now).replace('now', 'just now')}) "
            f"{escape_field(hit.memory.text, 400)}"
            for hit in hits
        )
