from __future__ import annotations

from runtime import KernelError, MailboxFull
from storage import Storage

from .._markup import markup_field
from .._messages import MemoriesSurfaced, Turn
from .._recall import Embedder, recall
from .._surfacings import Surfacings
from .._trinket import Directory, Trinket
from ._timefmt import relative

__all__ = ["MemoriesTrinket"]


class MemoriesTrinket(Trinket):
    """The stored memories most relevant to the user's message, ranked by the blend in
    actors/_recall.py (keyword relevance, importance, recency, use; similarity too with
    an embedder)."""

    def __init__(
        self,
        storage: Storage,
        *,
        top_k: int,
        directory: Directory | None = None,
        embedder: Embedder | None = None,
        weight: float = 0.5,
        embed_deadline: float = 0.15,
        surfacings: Surfacings | None = None,
    ) -> None:
        self._surfacings = surfacings
        self._storage = storage
        self._top_k = top_k
        self._directory = directory
        self._embedder = embedder
        self._weight = weight
        self._embed_deadline = embed_deadline

    async def render(self, turn: Turn) -> str:
        hits = await recall(
            self._storage,
            turn.user,
            turn.user_text,
            limit=self._top_k,
            now=turn.now,
            embedder=self._embedder,
            weight=self._weight,
            deadline=self._embed_deadline,
        )
        if hits and not turn.preview and self._directory is not None:
            # Counted by the background worker: no write on the turn's path (and none
            # for a preview: nothing was shown to the model).
            worker = self._directory("background")
            ids = tuple(h.memory.id for h in hits)
            if worker is not None:
                try:
                    worker.tell(MemoriesSurfaced(turn.user, ids))
                except MailboxFull:  # the worker is busy: its next count takes it
                    if self._surfacings is not None:
                        self._surfacings.add(turn.user, ids)
                except KernelError:  # the worker has stopped: closing
                    pass
        return "\n".join(
            f"- ({relative(hit.memory.created_at, turn.now).replace('now', 'just now')}) "
            f"{markup_field(hit.memory.text, 400)}"
            for hit in hits
        )
