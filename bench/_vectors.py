"""Vector recall at scale, a section of bench/compose.py: a store of N memories with a
vector each (a deterministic 384-dimension embedder), then the nearest-memories query,
whole compositions with the embedder configured while a 1 ms ticker watches the event
loop (and, for comparison, the ticker alone on the same machine), and recall@10 of the
database's search against exact brute-force cosine (numpy).

Goals (issue 29): compose p99 ≤ 5 ms at 50,000 memories and ≤ 10 ms at 500,000; the
event loop never blocked more than 5 ms by recall; recall@10 ≥ 0.95.
"""

from __future__ import annotations

import itertools
import random
import shutil
import sqlite3
import tempfile
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from actors import MemorySettings
from actors._recall import embedder_name, recall
from bench._common import loaded, summary
from bench._store import CONTINUUM, WORDS, build_store, sentence
from frontmind import Config, Frontmind
from frontmind._frontmind import NoModel
from storage import DEFAULT_USER, SCHEMA_VERSION, AddMemory, PostgresStorage, SQLiteStorage

DIMENSIONS = 384
SPEC = "bench._vectors:BenchEmbedder"
BATCH = 5_000

__all__ = ["BenchEmbedder", "measure_vectors", "postgres_vectors", "vector_store"]


def _word_matrix() -> dict[str, np.ndarray]:
    """Each word of the store's vocabulary: a fixed random direction (seeded by it)."""
    return {
        w: np.random.default_rng(zlib.crc32(w.encode())).standard_normal(DIMENSIONS).astype("f4")
        for w in WORDS
    }


class BenchEmbedder:
    """Deterministic: a text's vector is the sum of its words' directions. It computes
    in a worker thread, as a local library would (never on the event loop)."""

    dimensions = DIMENSIONS
    _words: dict[str, np.ndarray] | None = None

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        if BenchEmbedder._words is None:
            BenchEmbedder._words = _word_matrix()
        words = BenchEmbedder._words
        zero = np.zeros(DIMENSIONS, "f4")
        out = np.empty((len(texts), DIMENSIONS), "f4")
        for i, text in enumerate(texts):
            tokens = text.lower().rstrip(".").split()
            out[i] = sum((words.get(t, zero) for t in tokens), zero) + 1e-3
        return out

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        matrix = await anyio.to_thread.run_sync(self.vectors, list(texts))
        rows: list[list[float]] = matrix.tolist()
        return rows


async def build_vector_store(path: Path, memories: int) -> float:
    """2,000 messages and `memories` memories, every one with its vector."""
    now = await build_store(path, messages=2_000, memories=0, reminders=50)
    rng = random.Random(5)
    embedder = BenchEmbedder()
    async with await SQLiteStorage.open(path) as storage:
        await storage.use_embedder(embedder_name(SPEC, embedder), DIMENSIONS)
        for start in range(0, memories, BATCH):
            texts = [sentence(rng, 12) for _ in range(min(BATCH, memories - start))]
            # Added a batch per transaction (the port adds one at a time: hours at 500k).
            async with storage._transaction() as db:
                for text in texts:
                    created = now - rng.random() * 400 * 86400
                    new = AddMemory(text, rng.random(), created)
                    await storage._insert_memory(db, DEFAULT_USER, new)
            batch = await storage.memories_without_vectors(limit=BATCH)
            matrix = embedder.vectors([m.text for m in batch])
            await storage.set_memory_vectors(list(zip(batch, matrix.tolist(), strict=True)))
            print(f"\r  {start + len(texts):,} memories", end="", flush=True)
        print()
    return now


def _all_vectors(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, embedding FROM memories WHERE embedding IS NOT NULL")
        ids, blobs = zip(*rows, strict=True)
    matrix = np.frombuffer(b"".join(blobs), "f4").reshape(len(ids), DIMENSIONS)
    return np.array(ids), matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


async def measure_vectors(folder: Path, now: float, turns: int) -> dict[str, Any]:
    rng = random.Random(9)
    queries = [sentence(rng, 14) for _ in range(max(turns, 300) + 40)]
    taken = itertools.cycle(queries)
    embedder = BenchEmbedder()
    vectors = embedder.vectors(queries[:100]).tolist()
    results: dict[str, Any] = {}
    async with await SQLiteStorage.open(folder / "frontmind.db") as storage:
        await storage.use_embedder(embedder_name(SPEC, embedder), DIMENSIONS)
        results["cache_load_s"] = await _cache_loaded(storage)
        cycle = itertools.cycle(vectors)
        samples = []
        for i in range(320):
            started = time.perf_counter()
            await storage.nearest_memories(DEFAULT_USER, next(cycle), k=20, now=now)
            if i >= 20:
                samples.append(time.perf_counter() - started)
        results["nearest_k20"] = summary(samples)
        found = [
            [m.id for m, _ in await storage.nearest_memories(DEFAULT_USER, v, k=10, now=now)]
            for v in vectors
        ]

        async def recalls() -> None:
            for _ in range(turns):
                await recall(
                    storage, DEFAULT_USER, next(taken), limit=5, now=now, embedder=embedder
                )

        # Recall alone (keyword search, the query's embedding, the nearest, the blend)
        # while the ticker runs, beside the ticker alone: what recall adds to the loop.
        results["loop_late_ms"] = {
            "idle": await _lateness(lambda: anyio.sleep(2.0)),
            "recalling": await _lateness(recalls),
        }
    ids, matrix = _all_vectors(folder / "frontmind.db")
    agree = 0
    for vector, got in zip(vectors, found, strict=True):
        q = np.array(vector, "f4")
        exact = ids[np.argsort(-(matrix @ (q / np.linalg.norm(q))))[:10]]
        agree += len(set(exact.tolist()) & set(got))
    results["recall_at_10"] = agree / (10 * len(vectors))
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        shutil.copy(folder / "frontmind.db", data / "frontmind.db")
        with sqlite3.connect(data / "frontmind.db") as db:
            db.execute("UPDATE jobs SET state = 'done' WHERE state = 'pending'")
        config = Config(memory=MemorySettings(embedder=SPEC))
        async with (
            Frontmind.open(data, config, model=NoModel(), clock=lambda: now) as fm,
            loaded(fm, CONTINUUM),
        ):
            await _cache_loaded(fm.storage)
            for _ in range(20):
                await fm.compose(CONTINUUM, next(taken))
            samples = []

            async def compositions() -> None:
                for _ in range(turns):
                    started = time.perf_counter()
                    await fm.compose(CONTINUUM, next(taken))
                    samples.append(time.perf_counter() - started)

            results["loop_late_ms"]["composing"] = await _lateness(compositions)
            composed = await fm.compose(CONTINUUM, next(taken))
            results["compose"] = summary(samples)
            results["compose_statuses"] = {s.name: s.status for s in composed.sections}
            results["memories_shown"] = composed.notification.count("\n- (")
    return results


async def _cache_loaded(storage: object) -> float | None:
    """Seconds until SQLite's vector cache holds the user's vectors (the first searches
    after opening take sqlite-vec's pass while it loads); None without a cache."""
    cache = getattr(storage, "_vector_cache", None)
    if cache is None:
        return None
    started = time.perf_counter()
    if not await anyio.to_thread.run_sync(cache.loaded, DEFAULT_USER, DIMENSIONS, 600.0):
        raise RuntimeError("the vector cache did not load the bench's vectors")
    return time.perf_counter() - started


async def _lateness(work: Callable[[], Awaitable[object]]) -> dict[str, float]:
    """How late a 1 ms ticker on the event loop runs while `work` does (p99, max ms)."""
    late: list[float] = []

    async def ticker() -> None:
        while True:
            started = time.perf_counter()
            await anyio.sleep(0.001)
            late.append(time.perf_counter() - started - 0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await work()
        tg.cancel_scope.cancel()
    late.sort()
    return {"p99": late[int(len(late) * 0.99)] * 1000, "max": late[-1] * 1000}


async def vector_store(cache: Path, memories: int, rebuild: bool) -> tuple[Path, float]:
    folder = cache / f"v{SCHEMA_VERSION}-vectors-{memories}"
    marker = folder / "now"
    if rebuild or not marker.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        started = time.perf_counter()
        now = await build_vector_store(folder / "frontmind.db", memories)
        marker.write_text(repr(now))
        print(f"  (store built in {time.perf_counter() - started:.0f} s)")
    return folder, float(marker.read_text())


async def postgres_vectors(url: str, memories: int, rounds: int = 300) -> dict[str, Any]:
    """bench/postgres.py's section: `memories` memories with a vector each in a fresh
    database, then the nearest-memories query (p50/p99) and its recall@10."""
    rng = random.Random(5)
    embedder = BenchEmbedder()
    now = time.time()
    texts = [sentence(rng, 12) for _ in range(memories)]
    matrix = embedder.vectors(texts)
    ids: list[int] = []
    async with await PostgresStorage.open(url) as storage:
        await storage.use_embedder(embedder_name(SPEC, embedder), DIMENSIONS)
        for start in range(0, memories, BATCH):
            async with storage._transaction() as db:
                for text in texts[start : start + BATCH]:
                    new = AddMemory(text, 0.5, now)
                    ids.append(await storage._insert_memory(db, DEFAULT_USER, new))
            # Vectors as the worker writes them: a few hundred per transaction (an HNSW
            # insert costs a graph search each).
            row_of = {memory_id: row for row, memory_id in enumerate(ids)}
            while batch := await storage.memories_without_vectors(limit=500):
                rows = [matrix[row_of[m.id]].tolist() for m in batch]
                await storage.set_memory_vectors(list(zip(batch, rows, strict=True)))
            print(f"\r  {len(ids):,} memories", end="", flush=True)
        print()
        queries = embedder.vectors([sentence(rng, 14) for _ in range(100)]).tolist()
        cycle = itertools.cycle(queries)
        samples = []
        for i in range(rounds + 20):
            started = time.perf_counter()
            await storage.nearest_memories(DEFAULT_USER, next(cycle), k=20, now=now)
            if i >= 20:
                samples.append(time.perf_counter() - started)
        found = [
            [m.id for m, _ in await storage.nearest_memories(DEFAULT_USER, q, k=10, now=now)]
            for q in queries
        ]
        pgvector = bool(getattr(storage, "_pgvector", False))
    normalized = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    id_array = np.array(ids)
    agree = 0
    for query, got in zip(queries, found, strict=True):
        q = np.array(query, "f4")
        exact = id_array[np.argsort(-(normalized @ (q / np.linalg.norm(q))))[:10]]
        agree += len(set(exact.tolist()) & set(got))
    return {
        "memories": memories,
        "pgvector_hnsw": pgvector,
        "nearest_k20": summary(samples),
        "recall_at_10": agree / (10 * len(queries)),
    }
