"""SQLite's first pass of vector recall: each user's vectors held in memory, quantized.

sqlite-vec (0.1.x) has no approximate index that can be partitioned by user, so its
search scans the user's whole partition (int8, about 20 ms at 50,000 vectors of 384
dimensions, 190 ms at 500,000). This cache answers the same first pass in a worker
thread, never on the event loop, in about a millisecond at 50,000:

1. every vector as its signs (one bit a dimension, 48 bytes at 384), stored a column
   per 64-bit word: the Hamming distance to the query's signs, for every vector of the
   user, is a few vectorized XOR and popcount passes;
2. the vectors nearest by that distance (hundreds: bits alone rank coarsely) are ranked
   again by their int8 form (one byte a dimension, normalized, as sqlite-vec's `memory_vec`
   holds them), and the best few dozen go to the database, which scores each by the
   exact cosine of its float32 vector (storage/_sqlite.py, `_nearest_rows`).

The database stays the truth. The cache knows what changed from the writer connection
itself: temporary triggers on `memories` (any insert, update or delete that touches a
vector or its owner) call back into Python with the memory's id, whatever statement did
it, with its owner before and after; the ids of a transaction become *dirty* for the
cached users who owned them when it commits (and are dropped when it rolls back), and a
user's next search reads its dirty ids again
before it ranks (an id stays dirty until rows read after its last commit are applied:
a search cancelled half-way, or two searches refreshing at once, leave nothing stale).
SQLite's store is one process's (`SQLiteStorage.shared` is False), so no other writer
changes the file behind it.

A user's vectors are loaded on their first search by a thread of the cache's own, on a
read-only connection, while that search (and any until the load is done) takes
sqlite-vec's pass. The cache is bounded (`budget_bytes`, least recently searched users
leave first). A load starts only if its vectors would be kept: a user whose vectors
alone exceed the budget, or who would only push out users searched since, is left to
sqlite-vec for a while (`_HOLD_OVERSIZED_S`, `_HOLD_EVICTED_S`), as is one whose load
failed (30 s, doubling to an hour): no user is loaded again and again.

numpy (2.0 or later, for `bitwise_count`) comes with the `vectors` extra; without it
there is no cache and every search takes sqlite-vec's pass.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

if not hasattr(np, "bitwise_count"):  # numpy before 2.0: no cache (storage/_sqlite.py)
    raise ImportError(f"the vector cache needs numpy 2.0 or later, not {np.__version__}")

__all__ = ["VectorCache"]

log = logging.getLogger(__name__)

LOAD_CHUNK = 4096  # rows per read while a user's vectors load
# Dirty ids past this many for one user: the entry is dropped and loaded again (one
# read of the user's vectors costs less than thousands of single lookups).
MAX_DIRTY = 5_000
# Commits queued for the worker threads (drained by every search): past this many, one
# mark that every entry is stale is queued instead of any more.
MAX_NEWS = 10_000
# The sign pass keeps ties at its bound; past this many times its count they are cut.
TIES_RANKED = 4
_EVERY_ENTRY_STALE = -1
COARSE_SHARE = 100  # at least 1 in this many of a user's vectors pass the sign bits
# How well the signs tell a user's vectors apart depends on the embedder (random
# 384-dimension vectors need a third of them kept for the ten nearest to pass, the
# bench's 1.6%): a load measures it (`_calibrated`) on a sample of the vectors, a few
# of them taken as queries: the share within which 9 of a query's 10 nearest (int8)
# lie by their signs, at the 75th percentile of the queries, half as much again for
# safety (recall@10 0.96-0.995 on random, one-signed, skewed and the bench's vectors,
# where 1,000 candidates gave 0.61-0.995). Vectors the signs cannot tell apart at all
# (a share of 1) make the pass a scan of their int8 form: still in memory, a few times
# faster than sqlite-vec's.
_CALIBRATION_SAMPLE = 16_384
_CALIBRATION_QUERIES = 24
_CALIBRATION_FOUND, _CALIBRATION_Q, _CALIBRATION_MARGIN = 9, 0.75, 1.5
_CALIBRATION_MIN = 4 * 1000  # fewer vectors: the pass's 1,000 are a quarter of them
_RANKED_CHUNK = 16_384  # candidates ranked by int8 at a time (a float32 copy each)
_WORD = 64
# How long a user is left to sqlite-vec before their load is tried again: after it
# failed (doubling with each failure), when their vectors alone outgrew the budget (the
# next try counts them first), when they were pushed out to make room for others.
_HOLD_FAILED_S, _HOLD_FAILED_MAX_S = 30.0, 3600.0
_HOLD_OVERSIZED_S = 600.0
_HOLD_EVICTED_S = 60.0
# The signs' center is measured again (the entry loaded anew) each time a user's
# vectors double, until it comes from a whole chunk: a user's first search usually
# comes before their first vectors, and a center from none, or a handful, is no center.
_CENTER_MIN = 64
_INT8_SCALE = 127.0  # a normalized vector's component in [-1, 1] as int8 in [-127, 127]


class _Entry:
    """One user's vectors: id, sign bits (a column per word) and int8 form per slot."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.words = -(-dimensions // _WORD)
        self.size = 0
        self.ids: npt.NDArray[np.int64] = np.empty(0, np.int64)
        self.bits: npt.NDArray[np.uint64] = np.empty((self.words, 0), np.uint64)
        self.codes: npt.NDArray[np.int8] = np.empty((0, dimensions), np.int8)
        # Each code's squared length: the int8 pass ranks by the distance from the
        # query, not by the dot product (see `nearest`).
        self.norms: npt.NDArray[np.float32] = np.empty(0, np.float32)
        self.slot: dict[int, int] = {}
        self.dirty: dict[int, int] = {}  # id: the generation of its last commit
        # The signs are of each vector's offset from this point (`_center`, from the
        # first vectors loaded): embedders whose vectors all lie in one orthant
        # (counts, TF-IDF, hashing: no negative component) would otherwise give every
        # vector the same signs, and the pass would keep an arbitrary thousand of them.
        self.center: npt.NDArray[np.float32] = np.zeros(dimensions, np.float32)
        self.center_from = 0  # how many vectors it was measured from
        self.share = 1 / COARSE_SHARE  # of its vectors, the least the sign pass keeps
        self.stale = False  # too many dirty ids: loaded again at its next search
        self.ready = False

    @property
    def nbytes(self) -> int:
        """What the entry holds, spare capacity included."""
        held = self.ids.nbytes + self.bits.nbytes + self.codes.nbytes + self.norms.nbytes
        return held + 64 * len(self.slot)

    @property
    def used_bytes(self) -> int:
        """What its vectors need (a load's doubling aside; `trim` gives the rest back)."""
        return self.size * self.vector_bytes

    @property
    def vector_bytes(self) -> int:
        """What one vector needs: id, sign bits, int8 form and its length, its slot in
        the id map."""
        return 8 + 8 * self.words + self.dimensions + 4 + 64

    def _grow(self, needed: int) -> None:
        capacity = len(self.ids)
        if needed <= capacity:
            return
        capacity = max(needed, capacity + capacity // 4, 256)
        ids = np.empty(capacity, np.int64)
        bits = np.zeros((self.words, capacity), np.uint64)
        codes = np.empty((capacity, self.dimensions), np.int8)
        norms = np.empty(capacity, np.float32)
        ids[: self.size] = self.ids[: self.size]
        bits[:, : self.size] = self.bits[:, : self.size]
        codes[: self.size] = self.codes[: self.size]
        norms[: self.size] = self.norms[: self.size]
        self.ids, self.bits, self.codes, self.norms = ids, bits, codes, norms

    def put(self, ids: Sequence[int], matrix: npt.NDArray[np.float32]) -> None:
        """Add or replace these memories' vectors (rows of `matrix`, float32)."""
        bits, codes = _quantized(matrix, self.words, self.center)
        wide = codes.astype(np.int32)
        norms = np.einsum("ij,ij->i", wide, wide).astype(np.float32)
        self._grow(self.size + len(ids))
        if not self.slot.keys() & set(ids) and len(set(ids)) == len(ids):
            # All new (a load's chunk, new memories): one slice each, no Python loop.
            start, end = self.size, self.size + len(ids)
            self.ids[start:end] = ids
            self.bits[:, start:end] = bits
            self.codes[start:end] = codes
            self.norms[start:end] = norms
            self.slot.update(zip(ids, range(start, end), strict=True))
            self.size = end
            return
        for row, memory_id in enumerate(ids):
            at = self.slot.get(memory_id)
            if at is None:
                at = self.slot[memory_id] = self.size
                self.size += 1
            self.ids[at] = memory_id
            self.bits[:, at] = bits[:, row]
            self.codes[at] = codes[row]
            self.norms[at] = norms[row]

    def trim(self, *, spare: bool = True) -> None:
        """Give back the capacity growth left beyond a tenth more than used (`spare`
        False: all of it, as a finished load does, whose entry is judged by its bytes)."""
        keep = self.size + self.size // 10 if spare else self.size
        if len(self.ids) > keep + (256 if spare else 0):
            self.ids = self.ids[:keep].copy()
            self.bits = np.ascontiguousarray(self.bits[:, :keep])
            self.codes = self.codes[:keep].copy()
            self.norms = self.norms[:keep].copy()

    def drop(self, memory_id: int) -> None:
        """Take a memory out: the last slot moves into its place."""
        at = self.slot.pop(memory_id, None)
        if at is None:
            return
        last = self.size - 1
        if at != last:
            moved = int(self.ids[last])
            self.ids[at] = moved
            self.bits[:, at] = self.bits[:, last]
            self.codes[at] = self.codes[last]
            self.norms[at] = self.norms[last]
            self.slot[moved] = at
        self.size = last

    def nearest(self, query: npt.NDArray[np.float32], coarse: int, keep: int) -> list[int]:
        """The ids of the `keep` best by int8 among the `coarse` best by sign bits."""
        if self.size == 0:
            return []
        norm = float(np.sqrt(np.einsum("i,i->", query, query)))
        unit = query / norm if norm > 0 else query
        chosen = self.by_signs(unit, coarse)
        # einsum, not `@`: a matrix product goes to BLAS, whose OpenBLAS threads spin
        # on every core after it returns and held the store's SQLite threads off the
        # CPU (a search's p99 was 5 ms against 1.7 with them kept to one thread).
        parts, ranks = [], []
        for start in range(0, len(chosen), _RANKED_CHUNK):  # a bounded float32 copy
            part = chosen[start : start + _RANKED_CHUNK]
            scores = _closeness(self.codes[part].astype(np.float32), self.norms[part], unit)
            if keep < len(part):
                top = np.argpartition(-scores, keep)[:keep]
                part, scores = part[top], scores[top]
            parts.append(part)
            ranks.append(scores)
        chosen, scores = np.concatenate(parts), np.concatenate(ranks)
        if keep < len(chosen):
            chosen = chosen[np.argpartition(-scores, keep)[:keep]]
        picked: list[int] = self.ids[chosen].tolist()
        return picked

    def by_signs(self, unit: npt.NDArray[np.float32], coarse: int) -> npt.NDArray[np.intp]:
        """The slots of the (about) `coarse` vectors nearest `unit` by sign bits."""
        size = self.size
        # Sign bits rank coarsely, and the more vectors the more of them lie between
        # the true nearest and the rest: a share of the user's vectors goes on, not
        # only a count (recall@10 at 500,000: 0.954 with 1,000, 0.99 with 1%).
        coarse = max(coarse, int(size * self.share))
        if coarse >= size:
            return np.arange(size)
        signs, _ = _quantized(unit[np.newaxis, :], self.words, self.center)
        distance = _hamming(self.bits[:, :size], signs[:, 0])
        # The smallest distance whose count reaches `coarse` (distances are small
        # integers: a histogram instead of a partial sort of every slot).
        counts = np.cumsum(np.bincount(distance, minlength=self.dimensions + 1))
        bound = int(np.searchsorted(counts, coarse))
        chosen = np.flatnonzero(distance <= bound)
        if len(chosen) > TIES_RANKED * coarse:  # vectors alike even so: the ties cut
            chosen = np.argpartition(distance, coarse)[:coarse]
        return chosen


def _calibrated(entry: _Entry) -> float:
    """The share of the entry's vectors the sign pass must keep for the ten nearest
    (by int8) of a query to pass: measured with a few of its vectors as queries (the
    vector itself left out), over a sample of them; see `_CALIBRATION_SAMPLE`."""
    size = entry.size
    rng = np.random.default_rng(size)  # the same sample for the same vectors
    if size <= _CALIBRATION_SAMPLE:
        taken = np.arange(size)
    else:
        taken = np.sort(rng.choice(size, _CALIBRATION_SAMPLE, replace=False))
    codes, norms = entry.codes[taken].astype(np.float32), entry.norms[taken]
    bits = entry.bits[:, taken]
    needed = []
    for query in rng.choice(len(taken), min(_CALIBRATION_QUERIES, len(taken)), replace=False):
        scores = _closeness(codes, norms, codes[query] / _INT8_SCALE)
        scores[query] = -np.inf
        nearest = np.argpartition(-scores, 10)[:10]
        distance = _hamming(bits, bits[:, query])
        distance[query] = np.iinfo(np.uint16).max
        bound = np.sort(distance[nearest])[_CALIBRATION_FOUND - 1]
        needed.append(np.count_nonzero(distance <= bound) / len(taken))
    share = _CALIBRATION_MARGIN * float(np.quantile(needed, _CALIBRATION_Q))
    return min(1.0, max(1 / COARSE_SHARE, share))


def _hamming(bits: npt.NDArray[np.uint64], signs: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint16]:
    """Each column's Hamming distance to `signs` (one word a row: a few vectorized XOR
    and popcount passes, a word at a time)."""
    distance: npt.NDArray[np.uint16] = np.bitwise_count(bits[0] ^ signs[0]).astype(np.uint16)
    for word in range(1, len(bits)):
        distance += np.bitwise_count(bits[word] ^ signs[word])
    return distance


def _closeness(
    codes: npt.NDArray[np.float32], norms: npt.NDArray[np.float32], unit: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """How near each code lies to the normalized query, higher nearer: minus its squared
    distance from the query scaled to int8 (up to a constant). The dot product alone
    reads each code's rounding as much as its direction: where every vector shares most
    of its direction with the others (an embedder's common offset, cosines all within
    a few thousandths), its top 80 held 0.70 of the ten nearest; by distance, 1.0."""
    dots: npt.NDArray[np.float32] = np.einsum("ij,j->i", codes, unit)
    return np.float32(2 * _INT8_SCALE) * dots - norms


def _center(sample: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Where the signs are measured from, per dimension: 0, except in a dimension
    whose sign is the same for nine in ten of the sample or more (it tells the vectors
    apart no better than a constant), where it is the sample's mean. Moving every
    dimension's zero (to the mean or the median) cost the bench's vectors recall@10:
    0.99 → 0.96; non-negative vectors (6,000 of 32 dimensions) went from 0.15 with no
    center to 0.95 with this one (0.86 with the median)."""
    above = (sample > 0).mean(axis=0)
    lopsided = np.abs(above - 0.5) > 0.4
    return np.where(lopsided, sample.mean(axis=0), 0.0).astype(np.float32)


def _unit(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)


def _quantized(
    matrix: npt.NDArray[np.float32], words: int, center: npt.NDArray[np.float32]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int8]]:
    """Sign bits (words × rows) of the normalized rows' offsets from `center`, and
    their int8 codes (rows × dimensions)."""
    unit = _unit(matrix)
    codes = np.clip(np.rint(unit * _INT8_SCALE), -_INT8_SCALE, _INT8_SCALE).astype(np.int8)
    padded = np.zeros((len(matrix), words * _WORD), np.bool_)
    padded[:, : matrix.shape[1]] = unit > center
    packed = np.packbits(padded, axis=1, bitorder="little").view(np.uint64)
    return np.ascontiguousarray(packed.T), codes


def _matrix(blobs: Sequence[bytes], dimensions: int) -> npt.NDArray[np.float32]:
    return np.frombuffer(b"".join(blobs), "<f4").reshape(len(blobs), dimensions)


class VectorCache:
    """Users' vectors in memory for the first pass of `nearest_memories` (see the
    module's doc). Thread-safe: the store's worker threads search and update it, its
    own thread loads it. The event loop never waits for it: what the loop tells it (a
    commit's ids, a forgotten user) goes through a queue that the worker threads drain
    under the lock, which a search holds while it ranks."""

    def __init__(self, connect: Callable[[], Any], budget_bytes: int) -> None:
        self._connect = connect  # a read-only connection for the loading thread
        self._budget = budget_bytes
        self._lock = threading.Lock()
        self._load_ended = threading.Condition(self._lock)  # a load installed or gave up
        self.served = 0  # first passes answered here (not by sqlite-vec)
        self.loads = 0  # loads of a user's vectors begun
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        # (user, dimensions): when their load may be tried again (`clock`), and how
        # many loads of theirs failed in a row.
        self._held: dict[tuple[str, int], float] = {}
        self._failures: dict[tuple[str, int], int] = {}
        self.clock: Callable[[], float] = time.monotonic
        self._queue: deque[str] = deque()
        self._loader: threading.Thread | None = None
        self._stopping = False
        # The ids the open write transaction touched, by their owners (before and after).
        self._pending: dict[str, set[int]] = {}
        # From the event loop, appended without a lock (deque.append is atomic):
        # (generation, ids by owner) of each commit, or (0, user) of each forgotten user.
        self._news: deque[tuple[int, dict[str, frozenset[int]] | str]] = deque()
        self._generations = itertools.count(1)
        self._overflowed = False

    # -- from the writer's thread (the triggers) and the event loop --

    def touched_in_transaction(self, memory_id: int, owner: str) -> int:
        """The triggers' callback (it returns a value, as SQL functions do), once with
        each owner the memory had. Kept even while no user is cached: one may be
        registered before this transaction commits, its load reading the snapshot
        before it."""
        self._pending.setdefault(owner, set()).add(memory_id)
        return 0

    def committed(self) -> None:
        """The transaction committed: its ids become dirty for the cached users who
        owned them, each with this commit's generation (at the next drain)."""
        pending, self._pending = self._pending, {}
        # Only cached users need them: an entry registered from now on loads a
        # snapshot taken after this commit. (A lookup in the entries without the lock:
        # one dict operation, atomic under the GIL.)
        cached = {owner: frozenset(ids) for owner, ids in pending.items() if owner in self._entries}
        if not cached or self._overflowed:
            return
        if len(self._news) >= MAX_NEWS:  # nobody searched for long: all loaded again
            self._overflowed = True  # no more until a search drains the mark
            self._news.append((_EVERY_ENTRY_STALE, {}))
            return
        self._news.append((next(self._generations), cached))

    def rolled_back(self) -> None:
        self._pending = {}

    def forget(self, user: str) -> None:
        """The user's memories are being deleted: their entry goes at the next drain
        (their vectors are never searched again: the exact pass reads the rows)."""
        self._news.append((0, user))

    def _drain(self) -> None:
        """Apply what the loop queued (`_lock` is held)."""
        while True:
            try:
                generation, news = self._news.popleft()
            except IndexError:  # drained (another thread may drain at the same time)
                break
            if generation == _EVERY_ENTRY_STALE:
                for entry in self._entries.values():
                    entry.stale = True
                    entry.dirty.clear()
                self._overflowed = False
                continue
            if isinstance(news, str):
                self._entries.pop(news, None)
                for key in [key for key in (*self._held, *self._failures) if key[0] == news]:
                    self._held.pop(key, None)
                    self._failures.pop(key, None)
                continue
            for owner, ids in news.items():
                owned = self._entries.get(owner)
                if owned is None or owned.stale:  # a stale entry is loaded anew whole
                    continue
                owned.dirty.update(dict.fromkeys(ids, generation))
                if len(owned.dirty) > MAX_DIRTY:
                    owned.stale = True
                    owned.dirty.clear()

    # -- from a search, in a worker thread --

    def ready(self, user: str, dimensions: int) -> bool:
        """Whether the user's vectors are loaded; if not, their load is started (this
        search takes sqlite-vec's pass)."""
        with self._lock:
            # Drained before a new entry exists: the commits queued so far are in the
            # file its load will read; those queued after are its dirty ids.
            self._drain()
            entry = self._entries.get(user)
            if entry is not None and (entry.dimensions != dimensions or entry.stale):
                del self._entries[user]
                entry = None
            if entry is not None:
                self._entries.move_to_end(user)
                return entry.ready
            key = (user, dimensions)
            if self._stopping or self._held.get(key, 0.0) > self.clock():
                return False
            self._held.pop(key, None)
            self._entries[user] = _Entry(dimensions)
            self._queue.append(user)
            if self._loader is None:
                self._loader = threading.Thread(
                    target=self._load_queued, name="frontmind-vector-cache", daemon=False
                )
                self._loader.start()
            return False

    def first_pass(
        self, user: str, query: Sequence[float] | npt.NDArray[np.float32], coarse: int, keep: int
    ) -> list[int] | dict[int, int] | None:
        """One call for a search's common case, in one trip to a worker thread: None
        where the user's vectors are not loaded (their load is started: `ready`); their
        dirty ids (with generations) where some are (the caller reads them again, hands
        the rows to `refresh`, then asks `nearest`); else the ids `nearest` gives."""
        if not self.ready(user, len(query)):
            return None
        dirty = self.dirty(user)
        if dirty:
            return dirty
        return self.nearest(user, query, coarse, keep)

    def listed(self, user: str, vector: bytes, coarse: int, keep: int) -> str | None:
        """`first_pass` as the store's readers call it, an SQL function in the search's
        own statement (storage/_sqlite.py, `_NEAREST_CACHED`): the vector as stored
        (float32), the ids as a JSON array; NULL where the pass has no ids to give (the
        user's vectors not loaded, or dirty ids to read again first)."""
        near = self.first_pass(user, np.frombuffer(vector, np.float32), coarse, keep)
        return json.dumps(near) if isinstance(near, list) else None

    def loaded(self, user: str, dimensions: int, timeout: float) -> bool:
        """Start the user's load if needed and wait (a thread, up to `timeout`) until
        their vectors are in memory; False where they will not be (over the budget,
        dropped, closing) or the time ran out."""
        self.ready(user, dimensions)
        with self._load_ended:
            self._load_ended.wait_for(lambda: self._settled(user) is not None, timeout)
            return self._settled(user) is True

    def _settled(self, user: str) -> bool | None:
        """True: loaded; False: it will not be; None: loading (`_lock` is held)."""
        entry = self._entries.get(user)
        if entry is not None and entry.ready:
            return True
        if entry is None or self._stopping:
            return False
        return None

    def dirty(self, user: str) -> dict[int, int]:
        """The user's ids written since their last search, each with the generation of
        its last commit. They stay dirty until `refresh` applies rows read after it."""
        with self._lock:
            self._drain()
            entry = self._entries.get(user)
            return {} if entry is None else dict(entry.dirty)

    def refresh(self, user: str, seen: dict[int, int], rows: Sequence[tuple[Any, ...]]) -> None:
        """Bring the user's entry up to date with `rows` (id, owner, float32 blob), read
        again for the ids of `seen` after `dirty` gave them: the user's are put, every
        other id of `seen` dropped. An id committed again since (a newer generation) or
        already refreshed by another search is left as it is: these rows may be older
        than the cache's. A search cancelled between `dirty` and here leaves its ids
        dirty for the next."""
        with self._lock:
            self._drain()
            entry = self._entries.get(user)
            if entry is None or entry.stale:  # loaded anew at its next search
                return
            current = {i for i, generation in seen.items() if entry.dirty.get(i) == generation}
            size = 4 * entry.dimensions
            kept = [
                r
                for r in rows
                if r[0] in current and r[1] == user and r[2] is not None and len(r[2]) == size
            ]
            for memory_id in current - {r[0] for r in kept}:
                entry.drop(memory_id)
            if kept:
                entry.put([r[0] for r in kept], _matrix([r[2] for r in kept], entry.dimensions))
            for memory_id in current:
                del entry.dirty[memory_id]
            if entry.center_from < LOAD_CHUNK and entry.size >= 2 * max(
                entry.center_from, _CENTER_MIN
            ):
                entry.stale = True  # loaded anew at its next search, the center measured
            self._fit()

    def nearest(
        self, user: str, query: Sequence[float] | npt.NDArray[np.float32], coarse: int, keep: int
    ) -> list[int] | None:
        """The ids of the user's first pass, or None where their entry is gone or not
        ready (the caller takes sqlite-vec's pass)."""
        with self._lock:
            entry = self._entries.get(user)
            # A stale entry (marked by a drain since `dirty`; its dirty ids were let go)
            # answers nothing: the search takes sqlite-vec's pass, the next one reloads.
            if entry is None or not entry.ready or entry.stale or len(query) != entry.dimensions:
                return None
            self.served += 1
            return entry.nearest(np.asarray(query, np.float32), coarse, keep)

    def size(self, user: str) -> int:
        with self._lock:
            self._drain()
            entry = self._entries.get(user)
            return 0 if entry is None else entry.size

    # -- the loading thread --

    def _load_queued(self) -> None:
        conn = None
        try:
            while True:
                with self._lock:
                    if self._stopping or not self._queue:
                        self._loader = None
                        return
                    user = self._queue.popleft()
                    entry = self._entries.get(user)
                if entry is None:
                    continue  # evicted or forgotten before its turn
                try:
                    if conn is None:
                        conn = self._connect()
                    self._load(conn, user, entry)
                # The store's searches go on through sqlite-vec; the user's next search
                # tries again (a read that failed, a file gone, memory short).
                except Exception:
                    log.exception("the vector cache could not load the vectors of a user")
                    with self._lock:
                        key = (user, entry.dimensions)
                        failures = self._failures[key] = self._failures.get(key, 0) + 1
                        hold = min(_HOLD_FAILED_S * 2 ** (failures - 1), _HOLD_FAILED_MAX_S)
                        self._drop(user, entry, hold)
                    if conn is not None:
                        conn.close()
                        conn = None
        finally:
            if conn is not None:
                conn.close()

    def _load(self, conn: Any, user: str, entry: _Entry) -> None:
        """Read the user's vectors in chunks (the entry exists, so every write
        committed meanwhile is in its dirty ids: nothing is missed between chunks)."""
        after, size = -1, 4 * entry.dimensions
        loaded = _Entry(entry.dimensions)
        ((count,),) = conn.execute(
            "SELECT count(*) FROM memories WHERE owner = ? AND embedding IS NOT NULL", (user,)
        ).fetchall()
        with self._lock:
            if self._entries.get(user) is not entry:
                return
            # Those searched since this user was registered stay: a load they would
            # push it out for at once (or that could never fit) is not started.
            users = list(self._entries)
            newer = users[users.index(user) + 1 :]
            needed = count * entry.vector_bytes
            if needed > self._budget:
                self._drop(user, entry, _HOLD_OVERSIZED_S)
                return
            if needed + sum(self._entries[u].nbytes for u in newer) > self._budget:
                self._drop(user, entry, _HOLD_EVICTED_S)
                return
            self.loads += 1
        while not self._stopping:
            rows = conn.execute(
                "SELECT id, embedding FROM memories WHERE owner = ? AND id > ?"
                " AND embedding IS NOT NULL ORDER BY id LIMIT ?",
                (user, after, LOAD_CHUNK),
            ).fetchall()
            if not rows:
                break
            after = rows[-1][0]
            good = [r for r in rows if len(r[1]) == size]
            if good and loaded.size == 0:
                loaded.center = _center(_unit(_matrix([r[1] for r in good], loaded.dimensions)))
                loaded.center_from = len(good)
            if good:
                loaded.put([r[0] for r in good], _matrix([r[1] for r in good], loaded.dimensions))
            if loaded.used_bytes > self._budget:  # they kept coming while it loaded
                with self._lock:
                    self._drop(user, entry, _HOLD_OVERSIZED_S)
                return
        # Exactly what the vectors need: a load the budget admitted by `used_bytes` must
        # not then be evicted by `_fit` for its spare room (and loaded again, search
        # after search).
        loaded.trim(spare=False)
        if loaded.size >= _CALIBRATION_MIN:
            loaded.share = _calibrated(loaded)
        with self._lock:
            self._load_ended.notify_all()
            if self._stopping or self._entries.get(user) is not entry:
                return
            entry.size, entry.ids, entry.bits, entry.codes, entry.norms = (
                loaded.size,
                loaded.ids,
                loaded.bits,
                loaded.codes,
                loaded.norms,
            )
            entry.slot = loaded.slot
            entry.center, entry.center_from = loaded.center, loaded.center_from
            entry.share = loaded.share
            entry.ready = True
            # Its search asked for it and its load is paid: it counts as searched now,
            # not behind the users searched while it loaded (who leave first instead).
            self._entries.move_to_end(user)
            self._failures.pop((user, entry.dimensions), None)
            self._fit()

    def _drop(self, user: str, entry: _Entry, hold: float) -> None:
        """The user leaves the cache, their load not tried again for `hold` seconds
        (`_lock` is held)."""
        if self._entries.get(user) is entry:
            del self._entries[user]
        self._held[(user, entry.dimensions)] = self.clock() + hold
        self._load_ended.notify_all()

    def _fit(self) -> None:
        """Drop the least recently searched users until the cache is within budget
        (`_lock` is held), each left to sqlite-vec for a while; longer for a user who
        alone outgrew it (their memories kept coming)."""
        total = sum(e.nbytes for e in self._entries.values())
        if total > self._budget:  # the spare room of growing entries goes first
            for entry in self._entries.values():
                entry.trim()
            total = sum(e.nbytes for e in self._entries.values())
        for user, gone in list(self._entries.items()):  # least recently searched first
            if total <= self._budget:
                break
            if not gone.ready:  # holds nothing yet; its load is judged as it starts
                continue
            total -= gone.nbytes
            oversized = gone.used_bytes > self._budget
            self._drop(user, gone, _HOLD_OVERSIZED_S if oversized else _HOLD_EVICTED_S)

    def close(self) -> None:
        """Stop the loading thread (between chunks) and wait for it."""
        with self._lock:
            self._stopping = True
            self._load_ended.notify_all()
            loader = self._loader
        if loader is not None:
            loader.join()
