"""The persistence port: everything Frontmind remembers goes through this interface.

One implementation serves both databases (storage/_sql.py), each adapter giving it a
driver and its dialect: SQLite (aiosqlite) is the embedded default; PostgreSQL (asyncpg)
serves replicas. tests/test_storage.py is the contract both adapters pass.

Ownership: every continuum, turn, message, segment, reminder, memory and document
belongs to one user, and every data method takes that user (`user`, always the first
argument) and reads or changes only that user's rows. A continuum is identified by
(user, continuum id): two users may both have a continuum `main`. A reminder or memory
id is unique across users, but naming another user's id behaves as if it did not exist
(`NotFound`). Full-text search returns only the caller's rows. With no users configured
everything belongs to `DEFAULT_USER` ("default"); a database from before users existed
is migrated so that all its rows are `default`'s.

Users themselves (`add_user`, `users`, `user_for_token_hash`) are stored by name with
only the SHA-256 digest of their token (lowercase hex); an adapter never sees a token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from ._records import (
    ContextSearch,
    Continuum,
    ContinuumModel,
    Document,
    Job,
    JobUsage,
    Memory,
    MemoryHit,
    Message,
    MessageHit,
    Passage,
    Reminder,
    Segment,
    SegmentDigest,
    SpaceReclaimed,
    TurnRecord,
    TurnUsage,
    TurnWrite,
    User,
    UserForgotten,
)
from ._transfer import TableRows

__all__ = ["Storage"]


class Storage(Protocol):
    # True when other processes may write to the same store (PostgreSQL replicas): a
    # continuum's cached history must then be checked against the store before a turn.
    shared: bool

    async def close(self) -> None: ...

    def continuum_lease(self, user: str, continuum_id: str) -> AbstractAsyncContextManager[None]:
        """Hold the right to run the user's continuum's next turn, across every process
        that shares the store; waiters are served in arrival order."""
        ...

    def user_lease(self, user: str) -> AbstractAsyncContextManager[None]:
        """Hold the right to delete the user: granted once no turn of theirs runs in
        another process that shares the store (each holds its continuum's lease), and
        none starts there while it is held. `delete_user` itself does not wait."""
        ...

    # -- continuums and turns ------------------------------------------------------
    async def continuum(self, user: str, continuum_id: str) -> Continuum:
        """The continuum's summary; `UnknownContinuum` if it has never had a turn."""
        ...

    async def continuums(
        self, user: str, *, limit: int = -1, after: tuple[datetime, str] | None = None
    ) -> list[Continuum]:
        """The user's continuums, most recently active first; `after` is the (last
        activity, id) of the last seen."""
        ...

    async def usage_by_continuum(
        self, user: str, ids: list[str]
    ) -> dict[str, tuple[int, TurnUsage]]:
        """Turn count and summed usage of each of the user's continuums in `ids` that has
        turns."""
        ...

    async def usage_by_model(self, user: str, ids: list[str]) -> dict[str, dict[str, TurnUsage]]:
        """For each of the user's continuums in `ids` that has turns: their summed usage
        per model (prices are per model)."""
        ...

    async def delete_continuum(self, user: str, continuum_id: str) -> None:
        """Delete the user's continuum with its turns, messages, segments and their search
        index entries; `UnknownContinuum` if the user has none by that id."""
        ...

    async def history(
        self, user: str, continuum_id: str, *, missing_ok: bool = False
    ) -> list[Message]:
        """The messages inside the continuum's history window, oldest first."""
        ...

    async def all_messages(
        self, user: str, continuum_id: str, *, limit: int = -1, after: int = -1
    ) -> list[Message]: ...

    async def commit_turn(self, user: str, write: TurnWrite) -> bool:
        """Store a turn and its messages atomically (a completed turn, or a failed or
        cancelled one keeping the tool rounds it completed); False if that turn id was
        already stored.
        `StorageUnavailable` (nothing stored) if the write's `base` is not the
        continuum's message count."""
        ...

    async def record_turn(self, user: str, record: TurnRecord) -> None:
        """Store the record of a running, failed or cancelled turn (no history).

        A turn's record is written when it starts (`running`) and replaced when it
        ends, so a process killed mid-turn still leaves one; a completed turn's record
        is never replaced. The turn that writes a `running` record holds its continuum
        (its lease; on an unshared store, the one process's actor), so any other
        running record of that continuum is a turn whose process ended: it is made
        failed, "interrupted", in the same transaction."""
        ...

    async def interrupt_stale_turns(self) -> int:
        """Make the `running` records of turns no process runs any more failed and
        "interrupted" (`INTERRUPTED_TURN`), and say how many. For the store's owner as it
        starts, before it runs turns (with SQLite: the process holding the data
        directory's lock, so every running record is stale); on a shared store, a record
        whose continuum's lease another process holds or awaits is left alone."""
        ...

    async def turns(
        self,
        user: str,
        continuum_id: str | None = None,
        *,
        limit: int = 100,
        before: tuple[datetime, str] | None = None,
    ) -> list[TurnRecord]:
        """The user's latest turn records (of one continuum, or of all of theirs), oldest
        first."""
        ...

    async def continuum_model(self, user: str, continuum_id: str) -> ContinuumModel:
        """The continuum's own model settings (all None when it has none)."""
        ...

    async def set_continuum_model(
        self, user: str, continuum_id: str, settings: ContinuumModel
    ) -> None:
        """Replace the continuum's own model settings."""
        ...

    async def recent_segments(
        self, user: str, continuum_id: str, *, limit: int = 10
    ) -> list[Segment]: ...

    async def segment(self, user: str, segment_id: int) -> Segment:
        """One segment by id; `NotFound` if there is none."""
        ...

    async def segment_messages(self, user: str, segment_id: int) -> list[Message]:
        """The segment's messages (from its first to the next segment's first), whether
        or not they are still inside the history window."""
        ...

    async def search_segments(
        self, user: str, query: str, *, continuum_id: str | None = None, limit: int = 5
    ) -> list[Segment]:
        """Summarised segments whose title or summary match, best first."""
        ...

    # -- background jobs ---------------------------------------------------------------
    # A turn that closes a segment writes its summary job in the turn's own transaction.

    async def enqueue_job(
        self, user: str, kind: str, continuum_id: str, payload: str, *, now: float | None = None
    ) -> Job: ...

    async def claim_job(
        self, *, now: float, lease_seconds: float, exclude: Sequence[tuple[str, str]] = ()
    ) -> Job | None:
        """Claim one due job of any user (pending and due, or running with a claim older
        than the lease) atomically; None if there is none. The worker serves every user;
        the job names its user. Background work yields to turns: a job of an `exclude`d
        (user, continuum) pair, or of a continuum whose lease is held or awaited (by a
        turn in any process sharing the store), is not claimed now."""
        ...

    async def finish_job(
        self,
        job: Job,
        *,
        now: float,
        digest: SegmentDigest | None = None,
        usage: JobUsage | None = None,
    ) -> bool:
        """Store the job's outcome (summary, memories, usage) and mark it done, in one
        transaction; False, writing nothing, if the claim was lost meanwhile."""
        ...

    async def fail_job(self, job: Job, *, now: float, error: str, retry_at: float | None) -> bool:
        """Keep the failure; the job is due again at `retry_at` (None: given up)."""
        ...

    async def jobs(
        self, user: str, continuum_id: str | None = None, *, limit: int = 1000, after: int = 0
    ) -> list[Job]:
        """The user's (or one continuum's) background jobs, oldest first, from the one
        after id `after`; `limit` < 0: all of them."""
        ...

    # -- context searches ----------------------------------------------------------------
    # Durable and shared: any replica's searcher runs a search, any replica shows it.

    async def request_search(
        self, user: str, continuum_id: str, query: str, *, now: float | None = None
    ) -> ContextSearch:
        """Store a pending search of the user's continuum (replacing one of the same
        query); the continuum keeps only its newest searches (MAX_SEARCHES)."""
        ...

    async def claim_search(self, *, now: float, lease_seconds: float) -> ContextSearch | None:
        """Claim one search of any user (pending, or running with a claim older than the
        lease: its searcher died), atomically; None if there is none."""
        ...

    async def finish_search(
        self,
        search: ContextSearch,
        *,
        now: float,
        passages: Sequence[Passage],
        error: str | None,
        keep_turns: int,
    ) -> bool:
        """Store the search's passages (or its error), to be shown for `keep_turns` more
        committed turns; False, writing nothing, if the claim was lost meanwhile."""
        ...

    async def searches(self, user: str, continuum_id: str) -> list[ContextSearch]:
        """The continuum's searches to show (running, or finished with turns left), oldest
        first: one indexed read, on the turn path."""
        ...

    # -- reminders -------------------------------------------------------------------
    async def add_reminder(
        self,
        user: str,
        text: str,
        *,
        due_at: datetime | None,
        origin: Literal["user", "agent"],
        now: float | None = None,
    ) -> Reminder: ...

    async def complete_reminder(
        self, user: str, reminder_id: int, *, now: float | None = None
    ) -> Reminder:
        """`NotFound` if the user has no reminder with that id (another user's counts as none)."""
        ...

    async def reminder(self, user: str, reminder_id: int) -> Reminder:
        """One of the user's reminders by id, completed or not; `NotFound` if there is none."""
        ...

    async def active_reminders(self, user: str, *, limit: int = 50) -> list[Reminder]: ...

    async def reminders_due_between(
        self, user: str, start: datetime, end: datetime
    ) -> list[Reminder]: ...

    async def reminders(
        self, user: str, *, include_completed: bool = False, limit: int = 200, after: int = 0
    ) -> list[Reminder]: ...

    async def delete_reminder(self, user: str, reminder_id: int) -> None: ...

    # -- memories ----------------------------------------------------------------------
    async def add_memory(
        self,
        user: str,
        text: str,
        *,
        importance: float = 0.5,
        expires_at: datetime | None = None,
        now: float | None = None,
    ) -> Memory: ...

    async def memories(
        self, user: str, *, limit: int = 100, before: int | None = None
    ) -> list[Memory]: ...

    async def delete_memory(self, user: str, memory_id: int) -> None:
        """Delete it and its search index entry; `NotFound` if the user has none by that id."""
        ...

    async def use_embedder(self, model: str, dimensions: int) -> bool:
        """Keep the vectors of this embedder (name and dimension, recorded with them).
        Another one than recorded: every stored vector is dropped in this transaction
        (unused from now on; the memories wait to be embedded again). Returns whether
        they were dropped. `InvalidInput` when this store cannot search vectors."""
        ...

    async def recorded_embedder(self) -> tuple[str, int] | None:
        """The embedder recorded with the vectors (`use_embedder`): its name and
        dimension, or None when none was."""
        ...

    async def embedder_current(self) -> bool:
        """Whether the stored vectors are still of the embedder `use_embedder` named
        here: False once another process sharing the store (a replica started with
        another embedder) recorded its own, when this one's vectors are refused and its
        embedder's calls are wasted. True where no other process writes the store."""
        ...

    async def memories_without_vectors(
        self, *, limit: int = 64, after: int = 0, now: float | None = None
    ) -> list[Memory]:
        """Memories of any user with no vector yet (for the background worker's
        optional embedder), oldest first, from the one after id `after` (a pass goes on
        past memories it holds back); expired ones (at `now`) left out."""
        ...

    async def count_memories_without_vectors(self, *, now: float | None = None) -> int | None:
        """How many live memories (of every user, at `now`) wait for a vector; None when
        no embedder was ever used."""
        ...

    async def set_memory_vectors(self, vectors: Sequence[tuple[Memory, Sequence[float]]]) -> None:
        """Store and index each memory's vector (float32), in one transaction; a memory
        whose text changed since it was read is left waiting for its new text's vector.
        Needs `use_embedder` first; a vector of another dimension is `InvalidInput`."""
        ...

    async def nearest_memories(
        self,
        user: str,
        vector: Sequence[float],
        *,
        k: int,
        now: float | None = None,
        among: Sequence[int] = (),
    ) -> list[tuple[Memory, float]]:
        """The user's `k` memories nearest to `vector` by cosine similarity, best first,
        expired ones left out, searched in the database; with `among`, the similarity
        of those memories too (when they have a vector). `k` 0 searches nothing: the
        similarities of `among` alone (a caller that searched already)."""
        ...

    async def mark_memories_used(
        self, user: str, memory_ids: Sequence[int], *, times: int = 1
    ) -> None:
        """Count `times` more surfacings of each (the `use` term of the ranking); an id
        named twice in one call counts once."""
        ...

    async def search_memories(
        self, user: str, query: str, *, limit: int = 5, now: float | None = None
    ) -> list[MemoryHit]: ...

    async def search_messages(
        self, user: str, query: str, *, continuum_id: str | None = None, limit: int = 5
    ) -> list[MessageHit]: ...

    # -- documents ---------------------------------------------------------------------
    async def put_document(
        self, user: str, label: str, content: str, *, now: float | None = None
    ) -> Document: ...

    async def documents(self, user: str, *, limit: int = -1, after: str = "") -> list[Document]:
        """The user's documents, in label order (they form that user's system prompt)."""
        ...

    async def delete_document(self, user: str, label: str) -> None: ...

    # -- users -------------------------------------------------------------------------
    async def add_user(self, name: str, token_hash: str, *, now: float | None = None) -> User:
        """Add a user with the SHA-256 digest of its token; `UserExists` if the name is
        taken, `InvalidInput` for a malformed name or for `default` (built in)."""
        ...

    async def users(self) -> list[User]:
        """The added users, by name (`default` is built in and not listed)."""
        ...

    async def user_for_token_hash(self, token_hash: str) -> str | None:
        """The name of the user whose token has this digest, or None."""
        ...

    async def schema_version(self) -> int:
        """The version of the schema the store is at."""
        ...

    async def backup(self, path: Path) -> int:
        """A consistent snapshot of the running store in the file `path` (SQLite's online
        backup; written aside and renamed, so a file at `path` is always whole); its size.
        `InvalidInput` for PostgreSQL (pg_dump backs it up)."""
        ...

    async def reclaim_space(self) -> SpaceReclaimed:
        """Give the free pages that deleted rows left back to the file system, when they
        are many (SQLite's incremental vacuum; PostgreSQL's server autovacuums on its
        own: nothing to do). What was given back, and what could not be."""
        ...

    # -- moving a store (the portable form: storage/_transfer.py) ------------------------
    def export_rows(self, user: str | None = None, *, batch: int = 500) -> AsyncIterator[TableRows]:
        """Every portable row (of one user, or all), parents first, as written."""
        ...

    async def import_rows(
        self, parts: Iterable[TableRows], *, skip_existing: bool = False
    ) -> dict[str, int]:
        """Insert exported rows with their ids in one transaction; `ImportCollision` for
        a row the store has (with `skip_existing`: a resumed copy, the row is brought up
        to date if it differs). How many went in or changed, by table."""
        ...

    async def table_counts(self) -> dict[str, int]: ...

    async def store_id(self) -> str:
        """What tells this store from every other: one database reached by two URLs, or
        one file by two paths, gives the same (a migration onto itself is refused)."""
        ...

    async def continuum_digests(self) -> dict[tuple[str, str], str]:
        """A SHA-256 of each continuum's row, settings, turn records, segments and
        messages, keyed (user, continuum); and of each user's token digest, documents,
        reminders and memories, keyed (user, "")."""
        ...

    async def set_user_token(self, name: str, token_hash: str) -> None:
        """Replace the user's token digest (the old token stops working at once);
        `NotFound` if there is no such user."""
        ...

    async def delete_user(self, name: str) -> UserForgotten:
        """Delete the user and every row of theirs (continuums, turns, messages, segments,
        memories with their vectors and use counts, reminders, documents, jobs, searches
        and their search-index entries) in one transaction, and say how many of each.
        `NotFound` if the user neither exists nor owns anything; `InvalidInput` for
        `default` (built in). It does not wait for a turn of theirs running in another
        process (hold `user_lease` for that); such a turn is not kept when it ends."""
        ...

    # -- the Models API's answers --------------------------------------------------------
    async def model_facts(self, name: str) -> tuple[bytes, float] | None:
        """What the Models API last said of a model (its JSON, as the caller stored it),
        and when it was fetched; None: never asked."""
        ...

    async def put_model_facts(self, name: str, facts: bytes, fetched_at: float) -> None:
        """Keep the Models API's answer for a model, replacing an older one."""
        ...
