"""Context search: the model starts it with a tool call; results arrive in the background.

A search is durable, shared work: the tool stores it (`Storage.request_search`) and
wakes the `ContextSearcher`; a searcher (this replica's, or any other's sharing the
store) claims it, runs it off the turn path and stores its passages. A claim whose
replica died runs out (SEARCH_LEASE_SECONDS) and is claimed again. The search trinket
renders from the store, in one indexed read, so whichever replica composes the
continuum's next turn shows the search, pending or found, for `search_keep_turns` turns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from runtime import Actor
from storage import (
    MAX_SEARCH_ATTEMPTS,
    SEARCH_LEASE_SECONDS,
    ContextSearch,
    Passage,
    Storage,
    StorageError,
)

from .._markup import markup_field
from .._messages import Drain, Turn, Wake
from .._trinket import Trinket
from ._timefmt import relative

__all__ = ["ContextSearcher", "SearchTrinket", "searcher_name"]

SECTION = "context_search_results"

log = logging.getLogger("frontmind.search")


def searcher_name() -> str:
    return "searcher"


class SearchTrinket(Trinket):
    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    async def render(self, turn: Turn) -> str:
        searches = await self._storage.searches(turn.user, turn.continuum_id)
        lines: list[str] = []
        for search in searches:
            query = markup_field(search.query, 120)
            if search.state != "done":
                lines.append(f'Search "{query}": still running…')
            elif search.error is not None:
                lines.append(f'Search "{query}": failed ({markup_field(search.error, 120)})')
            elif not search.passages:
                lines.append(f'Search "{query}": nothing found')
            else:
                lines.append(f'Search "{query}": {len(search.passages)} passages')
                lines.extend(
                    f"- [{p.source}, {relative(p.created_at, turn.now)}] "
                    f"{markup_field(p.text, 300)}"
                    for p in search.passages
                )
        return "\n".join(lines)


SearcherMessage = Wake | Drain


class ContextSearcher(Actor[SearcherMessage, int | None]):
    """Runs the stored searches of every user and continuum, one at a time, off the turn
    path. `Wake` (from the tool, and the ticker) runs what is claimable; `Drain` does the
    same and replies how many ran."""

    protocol = SearcherMessage

    def __init__(
        self,
        storage: Storage,
        *,
        limit: int,
        keep_turns: int,
        clock: Callable[[], float],
        lease_seconds: float = SEARCH_LEASE_SECONDS,
    ) -> None:
        self._storage = storage
        self._limit = limit
        self._keep_turns = keep_turns
        self._clock = clock
        self._lease = lease_seconds

    async def handle(self, message: SearcherMessage) -> int | None:
        ran = 0
        while True:
            try:
                search = await self._storage.claim_search(
                    now=self._clock(), lease_seconds=self._lease
                )
            except StorageError as exc:  # the next wake tries again
                log.warning("cannot claim searches: %s", exc)
                break
            if search is None:
                break
            await self._run(search)
            ran += 1
        return ran if isinstance(message, Drain) else None

    async def _run(self, search: ContextSearch) -> None:
        error: str | None = None
        passages: list[Passage] = []
        if search.attempts > MAX_SEARCH_ATTEMPTS:
            # Claimed that often and never finished: each searcher that took it died.
            error = f"interrupted {search.attempts - 1} times"
        else:
            try:
                passages = await self._search(search)
            except StorageError as exc:  # shown in the section; the next search may succeed
                error = f"{type(exc).__name__}: {exc}"
        try:
            await self._storage.finish_search(
                search,
                now=self._clock(),
                passages=passages[: self._limit],
                error=error,
                keep_turns=self._keep_turns,
            )
        except StorageError as exc:  # the claim runs out and the search is run again
            log.warning("could not store the result of search %d: %s", search.id, exc)

    async def _search(self, search: ContextSearch) -> list[Passage]:
        # Segment summaries first (at most two): they keep trimmed segments reachable
        # and say in a line what a passage says only in part.
        segments = await self._storage.search_segments(
            search.user, search.query, continuum_id=search.continuum_id, limit=2
        )
        passages = [Passage("summary", f"{s.title}: {s.summary}", s.ended_at) for s in segments]
        hits = await self._storage.search_messages(
            search.user, search.query, continuum_id=search.continuum_id, limit=self._limit
        )
        passages.extend(Passage("message", h.text, h.created_at) for h in hits)
        memories = await self._storage.search_memories(search.user, search.query, limit=self._limit)
        passages.extend(Passage("memory", m.memory.text, m.memory.created_at) for m in memories)
        return passages
