from __future__ import annotations

from contextlib import suppress

from runtime import KernelError
from storage import Storage

from .._markup import escape_field
from .._messages import MemoriesSurfaced, Turn
from .._trinket import Directory, Trinket
from ._timefmt import relative

__all__ = ["MemoriesTrinket"]


class MemoriesTrinket(Trinket):
    """The stored memories most relevant to the user's message (BM25 and recency)."""

    def __init__(self, storage: Storage, *, top_k: int, directory: Directory | None = None) -> None:
        self._storage = storage
        self._top_k = top_k
        self._directory = directory

    async def render(self, turn: Turn) -> str:
        hits = await self._storage.search_memories(turn.user_text, limit=self._top_k, now=turn.now)
        if hits and self._directory is not None:
            # Counted by the background worker: no write on the turn's path.
            worker = self._directory("background")
            if worker is not None:
                with suppress(KernelError):
                    worker.tell(MemoriesSurfaced(tuple(h.memory.id for h in hits)))
        return "\n".join(
            f"- ({relative(hit.memory.created_at, turn.now).replace('now', 'just now')}) "
            f"{escape_field(hit.memory.text, 400)}"
            for hit in hits
        )
