"""Recall: which memories a turn's notification center shows.

Every memory the keyword search finds is ranked by the documented blend in
`storage._fts.memory_score` (text relevance × importance × recency × use). With an
embedder configured (`[memory] embedder = "pkg.mod:Embedder"`), its cosine similarity
joins the relevance term:

    relevance = (1 - w) × keyword relevance / best keyword relevance + w × cosine

with w = `memory.embedding_weight` (0.5), over the keyword hits and the user's nearest
memories by vector whose cosine reaches MIN_SIMILARITY, so a paraphrase that shares no
word with a memory still finds it. The nearest are found in the database, through its
vector index (`Storage.nearest_memories`): a turn reads a few dozen rows, never every
vector. The query's embedding has its own deadline (`memory.embed_deadline_ms`, inside
the composer's); an embedder that is slow or fails leaves that turn to keywords alone.

A memory's vector is written with its text when the writer has it (`remember` and the
extraction embed what they store, to find the memory it repeats); otherwise the
background worker embeds it later. The embedder's name
and dimension are recorded with them (`prepare_embedder`, at startup): another embedder
makes every stored vector unused at once, and the worker embeds the memories again.
Nothing is downloaded for the default (no embedder: keyword search alone).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import weakref
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import anyio

from storage import (
    MAX_NEAREST,
    MAX_SEARCH_HITS,
    Memory,
    MemoryHit,
    Storage,
    StorageError,
    memory_score,
)

from ._exceptions import SettingsError
from ._imports import import_module_near

__all__ = [
    "Embedder",
    "check_embedder_spec",
    "embedder_name",
    "load_embedder",
    "prepare_embedder",
    "recall",
    "text_vector",
]

log = logging.getLogger("frontmind.recall")
# Below this cosine a memory that no keyword found is not considered related at all.
MIN_SIMILARITY = 0.2
# How long the startup's dimension check may take (a hosted embedder answers one text).
PROBE_TIMEOUT_S = 30.0
# The same check for an embedder that says its dimension: it starts without the answer
# when it is this late (startup does not wait on a slow service).
DECLARED_PROBE_TIMEOUT_S = 5.0


@runtime_checkable
class Embedder(Protocol):
    """What `[memory] embedder` names: a class built with no arguments. It may say its
    `dimensions` (an int) and its `model` (a str: another model means other vectors)."""

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


def check_embedder_spec(spec: str) -> tuple[str, str]:
    """The module and class `spec` names, without importing either: what a command
    that never embeds (`frontmind stats`, `users add`) checks of `[memory] embedder`."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SettingsError(f"memory.embedder: {spec!r} must look like 'package.module:Class'")
    return module_name, attribute


# Each embedder built, by (spec, search): one per event loop that asked for it (gone
# with its loop), and one built outside any loop (the daemon's config check), which
# the first loop to ask adopts.
_BY_LOOP: weakref.WeakKeyDictionary[object, dict[tuple[str, tuple[str, ...]], Embedder]] = (
    weakref.WeakKeyDictionary()
)
_UNBOUND: dict[tuple[str, tuple[str, ...]], Embedder] = {}


def load_embedder(spec: str, search: tuple[str, ...] = ()) -> Embedder:
    """The embedder `spec` names, built once per event loop (a local model loads once
    in a daemon); its module is also looked for in `search` (actors/_imports.py).
    Another loop (a library user's second `asyncio.run`, a test framework's loop per
    test) gets one of its own: what an embedder holds (an HTTP client's pooled
    connections) belongs to the loop that made it."""
    key = (spec, search)
    try:
        loop: object | None = asyncio.get_running_loop()
    except RuntimeError:  # no loop runs here (the config check)
        loop = None
    if loop is None:
        if key not in _UNBOUND:
            _UNBOUND[key] = _build_embedder(spec, search)
        return _UNBOUND[key]
    built = _BY_LOOP.setdefault(loop, {})
    if key not in built:
        adopted = _UNBOUND.pop(key, None)
        built[key] = adopted if adopted is not None else _build_embedder(spec, search)
    return built[key]


def _build_embedder(spec: str, search: tuple[str, ...]) -> Embedder:
    module_name, attribute = check_embedder_spec(spec)
    try:
        cls = getattr(import_module_near(module_name, search), attribute)
        embedder = cls()
    except (ImportError, AttributeError) as exc:
        raise SettingsError(f"memory.embedder: cannot load {spec!r}: {exc}") from exc
    # The embedder is the user's code: whatever building it raises (a key missing from
    # the environment, a model that cannot load) is a startup error naming it.
    except Exception as exc:
        raise SettingsError(f"memory.embedder: {spec!r} could not be built: {exc!r}") from exc
    if not isinstance(embedder, Embedder):
        raise SettingsError(f"memory.embedder: {spec!r} has no async embed(texts) method")
    return embedder


def embedder_name(spec: str, embedder: Embedder) -> str:
    """What is recorded with the vectors: the class, and its model when it says one."""
    model = getattr(embedder, "model", None)
    return spec if not isinstance(model, str) or not model else f"{spec} {model}"


class _NotAwaitable(Exception):
    """The embedder's `embed` answered at once, with what it names: it is no coroutine."""


async def _awaited_embed(embedder: Embedder, texts: list[str]) -> Sequence[Sequence[float]]:
    answer = embedder.embed(texts)
    if not inspect.isawaitable(answer):
        raise _NotAwaitable(type(answer).__name__)
    return await answer


async def _dimensions(spec: str, embedder: Embedder, recorded: int | None = None) -> int:
    """The embedder's dimension, checked by embedding one text. One that says its
    `dimensions` and answers with another length is refused here, rather than having
    every vector it makes refused later (no memory would ever be found by meaning). One
    that cannot answer now (a hosted service down at startup) starts with what it says,
    or else with the dimension the store recorded for it (`recorded`: it has run on this
    store before): its turns fall back to keywords until it answers. Only an embedder
    never seen, saying nothing, has no dimension to start with."""
    said = getattr(embedder, "dimensions", None)
    declared = said if isinstance(said, int) and not isinstance(said, bool) else None
    known = recorded if declared is None else declared
    try:
        with anyio.fail_after(PROBE_TIMEOUT_S if declared is None else DECLARED_PROBE_TIMEOUT_S):
            vectors = await _awaited_embed(embedder, ["dimension check"])
    # A plain `def embed` would run on the event loop at every turn and fail there
    # (its answer cannot be awaited): refused, whether or not it says its dimension.
    except _NotAwaitable as exc:
        raise SettingsError(
            f"memory.embedder: {spec!r}: embed(texts) must be async (`async def embed`,"
            f" a local model in a worker thread); it answered a {exc} at once"
        ) from None
    except TimeoutError as exc:
        if known is not None:
            log.warning("embedder %s did not answer the dimension check in time", spec)
            return known
        raise SettingsError(f"memory.embedder: {spec!r} did not answer in time") from exc
    # The embedder is the user's code: whatever it raises is a startup error naming it.
    except Exception as exc:
        if known is not None:
            log.warning("embedder %s failed the dimension check: %r", spec, exc)
            return known
        raise SettingsError(f"memory.embedder: {spec!r} failed: {exc!r}") from exc
    try:  # the shape of the answer: a list of one vector of numbers
        count = len(vectors)
        width = len([float(x) for x in vectors[0]]) if count == 1 else 0
    except (TypeError, ValueError, LookupError) as exc:
        raise SettingsError(
            f"memory.embedder: {spec!r} returned no list of vectors: {type(exc).__name__}: {exc}"
        ) from exc
    if count != 1:
        raise SettingsError(f"memory.embedder: {spec!r} returned {count} vectors for 1 text")
    if declared is not None and width != declared:
        raise SettingsError(
            f"memory.embedder: {spec!r} says it has {declared} dimensions"
            f" but returned a vector of {width}"
        )
    return width


async def prepare_embedder(spec: str, storage: Storage, search: tuple[str, ...] = ()) -> Embedder:
    """Load the embedder, check its dimension, and record it with the stored vectors
    (another embedder than recorded: they are dropped, and embedded again in the
    background). A bad embedder is a startup error."""
    embedder = load_embedder(spec, search)
    name = embedder_name(spec, embedder)
    try:
        recorded = await storage.recorded_embedder()
    except StorageError as exc:
        raise SettingsError(f"memory.embedder: {exc}") from exc
    known = recorded[1] if recorded is not None and recorded[0] == name else None
    dimensions = await _dimensions(spec, embedder, known)
    try:
        if await storage.use_embedder(name, dimensions):
            log.info("embedder %s: memories are embedded again in the background", spec)
    except StorageError as exc:
        raise SettingsError(f"memory.embedder: {exc}") from exc
    return embedder


# The kinds of embedder failure already logged with their traceback: a hosted service
# that is down fails every turn's call, and forty lines a turn would bury the rest.
_TRACED: set[type[BaseException]] = set()


def _embedder_failed(exc: Exception, purpose: str) -> None:
    """Log an embedder's failure: with its traceback the first time its kind is seen
    (a bug in the embedder shows where), in one line after that."""
    first = type(exc) not in _TRACED
    _TRACED.add(type(exc))
    log.warning(
        "the embedder failed (%s: %s); %s used keywords alone",
        type(exc).__name__,
        exc,
        purpose,
        exc_info=exc if first else None,
    )


# How often a process whose embedder was replaced on its shared store says so (each
# turn would otherwise log it), and when it last said so, by store.
REPLACED_LOG_EVERY_S = 60.0
_REPLACED_LOGGED: weakref.WeakKeyDictionary[Storage, float] = weakref.WeakKeyDictionary()


async def vectors_current(storage: Storage, purpose: str) -> bool:
    """Whether the store's vectors are still this process's embedder's, asked before
    the embedder is called: once a replica sharing the store started with another
    embedder, this one's vectors are refused, and each call (a hosted service's, paid)
    would be wasted until this process restarts with it. `purpose` goes without
    vectors then; said at most every REPLACED_LOG_EVERY_S for a store. A store that
    cannot answer: as if it were (the call that follows fails on its own, as before)."""
    try:
        if await storage.embedder_current():
            return True
    except StorageError:
        return True
    now = time.monotonic()
    if now - _REPLACED_LOGGED.get(storage, float("-inf")) >= REPLACED_LOG_EVERY_S:
        _REPLACED_LOGGED[storage] = now
        log.warning(
            "the store's vectors are now another embedder's (a process sharing it started"
            " with another `[memory] embedder`): %s goes without vectors (words decide),"
            " and this process calls its embedder no more until it restarts with it",
            purpose,
        )
    return False


async def text_vector(
    embedder: Embedder, text: str, deadline: float, *, purpose: str = "recall"
) -> Sequence[float] | None:
    """The text's vector, or None when the embedder is late or fails (`purpose`, recall
    or `remember`, then uses keywords alone)."""
    with anyio.move_on_after(deadline):
        try:
            vectors = await embedder.embed([text])
            count = len(vectors)  # an answer that is no list of vectors fails here too
        # The embedder is the user's code: if it fails, the caller falls back to keywords
        # for this turn rather than losing the section or the memory.
        except Exception as exc:  # noqa: BLE001 - logged by _embedder_failed
            _embedder_failed(exc, purpose)
            return None
        if count != 1:
            log.warning("the embedder returned %d vectors for 1 text", count)
            return None
        return vectors[0]
    log.warning(
        "the embedder missed its %.0f ms deadline; %s used keywords", deadline * 1e3, purpose
    )
    return None


async def recall(
    storage: Storage,
    user: str,
    text: str,
    *,
    limit: int,
    now: float,
    embedder: Embedder | None = None,
    weight: float = 0.5,
    deadline: float = 0.15,
) -> list[MemoryHit]:
    if embedder is None:
        return await storage.search_memories(user, text, limit=limit, now=now)
    if not text.strip():
        return await storage.search_memories(user, text, limit=limit, now=now)
    # The query's embedding (the user's code, often a network call) is made while the
    # keyword search runs; then one read finds the nearest memories to it and the
    # similarity of every keyword hit (`among`). The two reads one after the other
    # cost less than side by side (a third read, for the hits the nearest left out,
    # and two reads contending for two cores: 0.7–1.1 ms less CPU a recall at 50,000).
    query: Sequence[float] | None = None

    async def embedded() -> None:
        nonlocal query
        if await vectors_current(storage, "recall"):
            query = await text_vector(embedder, text, deadline)

    # Four times as many candidates as are shown, by words and by vector, as many as
    # one search takes (`trinkets.memories_top_k` goes up to MAX_SEARCH_HITS).
    wanted = limit * 4
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(embedded)
            hits = await storage.search_memories(
                user, text, limit=min(wanted, MAX_SEARCH_HITS), now=now
            )
    except BaseExceptionGroup as group:  # the keyword search's (`embedded` raises none)
        if len(group.exceptions) == 1:
            raise group.exceptions[0]  # noqa: B904 - its own cause and traceback kept
        raise
    if query is None:
        return hits[:limit]
    try:
        near = await storage.nearest_memories(
            user, query, k=min(wanted, MAX_NEAREST), now=now, among=[h.memory.id for h in hits]
        )
    except StorageError as exc:  # a vector the store refuses (another dimension)
        log.warning("vector recall failed; keywords alone: %s", exc)
        return hits[:limit]
    # A hit's score is the whole blend already: its text's relevance alone is the score
    # over its importance, recency and use, which the blend below applies once.
    weights = {h.memory.id: _weight(h.memory, now) for h in hits}
    relevance_of = {h.memory.id: h.score / weights[h.memory.id] for h in hits}
    best = max(relevance_of.values(), default=0.0)
    keyword = {i: (r / best if best > 0 else 0.0) for i, r in relevance_of.items()}
    candidates = {h.memory.id: h.memory for h in hits}
    similarity: dict[int, float] = {}
    # A few dozen candidates at most (the keyword hits and the k nearest).
    for memory, close in near:
        if close >= MIN_SIMILARITY or memory.id in keyword:
            candidates[memory.id] = memory
            similarity[memory.id] = max(close, 0.0)
    ranked = []
    for memory_id, memory in candidates.items():
        relevance = (1 - weight) * keyword.get(memory_id, 0.0) + weight * similarity.get(
            memory_id, 0.0
        )
        if relevance <= 0:
            continue
        factor = weights[memory_id] if memory_id in weights else _weight(memory, now)
        ranked.append(MemoryHit(memory, relevance * factor))
    ranked.sort(key=lambda h: h.score, reverse=True)
    return ranked[:limit]


def _weight(memory: Memory, now: float) -> float:
    """The ranking's terms beside relevance: importance × recency × use (positive)."""
    return memory_score(-1.0, memory.importance, now - memory.created_at.timestamp(), memory.uses)
