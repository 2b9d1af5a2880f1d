"""Context search: the model starts it with a tool call; results arrive in the background.

The search trinket answers every turn at once from its state (pending, or the found
passages); the searching itself runs in the `ContextSearcher` actor, so a slow search
never holds up a turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runtime import Actor, ActorRef, KernelError
from storage import Storage, StorageError

from .._markup import escape_field
from .._messages import (
    Passage,
    SearchFinished,
    SearchRequested,
    Turn,
    TurnCommitted,
)
from .._trinket import Directory, Trinket, trinket_name
from ._timefmt import relative

__all__ = ["ContextSearcher", "SearchTrinket", "searcher_name"]

SECTION = "context_search_results"
_MAX_SEARCHES = 5


def searcher_name() -> str:
    return "searcher"


def _tell(ref: ActorRef[Any, Any] | None, message: object) -> str | None:
    """Tell without raising; returns what went wrong, if anything."""
    if ref is None:
        return "the actor is not running"
    try:
        ref.tell(message)
    except KernelError as exc:
        return str(exc)
    return None


@dataclass
class _Search:
    query: str
    passages: tuple[Passage, ...] = ()
    done: bool = False
    error: str | None = None
    turns_left: int = 0


@dataclass
class _Continuum:
    searches: list[_Search] = field(default_factory=list)


class SearchTrinket(Trinket):
    def __init__(self, directory: Directory, *, keep_turns: int) -> None:
        self._directory = directory
        self._keep_turns = keep_turns
        # Keyed by (user, continuum id): each user's searches are their own.
        self._state: dict[tuple[str, str], _Continuum] = {}

    async def on_message(self, message: SearchRequested | SearchFinished) -> None:
        state = self._state.setdefault((message.user, message.continuum_id), _Continuum())
        if isinstance(message, SearchRequested):
            state.searches = [s for s in state.searches if s.query != message.query]
            state.searches.append(_Search(message.query))
            del state.searches[:-_MAX_SEARCHES]
            problem = _tell(self._directory(searcher_name()), message)
            if problem is not None:
                state.searches[-1] = _Search(
                    message.query, done=True, error=problem, turns_left=self._keep_turns
                )
            return
        for search in state.searches:
            if search.query == message.query and not search.done:
                search.done, search.passages, search.error = True, message.passages, message.error
                search.turns_left = self._keep_turns

    async def on_turn_committed(self, event: TurnCommitted) -> None:
        state = self._state.get((event.user, event.continuum_id))
        if state is None:
            return
        for search in state.searches:
            if search.done:
                search.turns_left -= 1
        state.searches = [s for s in state.searches if not s.done or s.turns_left > 0]

    async def render(self, turn: Turn) -> str:
        state = self._state.get((turn.user, turn.continuum_id))
        if state is None or not state.searches:
            return ""
        lines: list[str] = []
        for search in state.searches:
            query = escape_field(search.query, 120)
            if not search.done:
                lines.append(f'Search "{query}": still running…')
            elif search.error is not None:
                lines.append(f'Search "{query}": failed ({escape_field(search.error, 120)})')
            elif not search.passages:
                lines.append(f'Search "{query}": nothing found')
            else:
                lines.append(f'Search "{query}": {len(search.passages)} passages')
                lines.extend(
                    f"- [{p.source}, {relative(p.created_at, turn.now)}] "
                    f"{escape_field(p.text, 300)}"
                    for p in search.passages
                )
        return "\n".join(lines)


class ContextSearcher(Actor[SearchRequested, None]):
    """Runs searches over past messages and memories, one at a time, off the turn path."""

    protocol = SearchRequested
    replies = None

    def __init__(self, storage: Storage, directory: Directory, *, limit: int) -> None:
        self._storage = storage
        self._directory = directory
        self._limit = limit

    async def handle(self, message: SearchRequested) -> None:
        error = None
        passages: list[Passage] = []
        try:
            hits = await self._storage.search_messages(
                message.user, message.query, continuum_id=message.continuum_id, limit=self._limit
            )
            passages.extend(Passage("message", h.text, h.created_at) for h in hits)
            memories = await self._storage.search_memories(
                message.user, message.query, limit=self._limit
            )
            passages.extend(Passage("memory", m.memory.text, m.memory.created_at) for m in memories)
        except StorageError as exc:  # shown in the section; the next search may succeed
            error = f"{type(exc).__name__}: {exc}"
        trinket = self._directory(trinket_name(SECTION, message.user, message.continuum_id))
        if trinket is not None:
            result = SearchFinished(
                message.user,
                message.continuum_id,
                message.query,
                tuple(passages[: self._limit]),
                error,
            )
            _tell(trinket, result)  # if the trinket is gone, nobody is left to show it to
