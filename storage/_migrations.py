"""The schema, as ordered migrations applied at open.

The version lives in `schema_version`. Migrations run with foreign keys off (so a table
can be rebuilt under a new key) and are checked with `PRAGMA foreign_key_check` before
they commit. A database whose version is newer than the
newest migration here was written by newer code and is refused, never touched.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

_V1 = """
CREATE TABLE continuums (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    history_start INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    last_turn_at REAL,
    last_message_id TEXT
);
CREATE TABLE turns (
    id TEXT PRIMARY KEY,
    continuum_id TEXT NOT NULL REFERENCES continuums(id),
    status TEXT NOT NULL CHECK (status IN ('completed', 'failed', 'cancelled')),
    started_at REAL NOT NULL,
    record BLOB NOT NULL
);
CREATE INDEX turns_by_continuum ON turns(continuum_id, started_at);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    continuum_id TEXT NOT NULL REFERENCES continuums(id),
    seq INTEGER NOT NULL,
    turn_id TEXT NOT NULL REFERENCES turns(id),
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content BLOB NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (continuum_id, seq)
);
CREATE TABLE segments (
    id INTEGER PRIMARY KEY,
    continuum_id TEXT NOT NULL REFERENCES continuums(id),
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    turn_count INTEGER NOT NULL,
    title TEXT NOT NULL,
    first_seq INTEGER NOT NULL
);
CREATE INDEX segments_by_continuum ON segments(continuum_id, ended_at);
CREATE TABLE reminders (
    id INTEGER PRIMARY KEY,
    text TEXT NOT NULL,
    due_at REAL,
    created_at REAL NOT NULL,
    completed_at REAL,
    origin TEXT NOT NULL CHECK (origin IN ('user', 'agent'))
);
CREATE INDEX reminders_active ON reminders(due_at) WHERE completed_at IS NULL;
CREATE TABLE memories (
    id INTEGER PRIMARY KEY,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL,
    importance REAL NOT NULL
);
CREATE VIRTUAL TABLE memories_fts USING fts5(text, content='memories', content_rowid='id');
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TABLE documents (
    label TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""

# v2: full-text search over message text, for context search. Existing messages are
# indexed by the rebuild, so an upgraded database finds its old conversations too.
_V2 = """
CREATE VIRTUAL TABLE messages_fts USING fts5(text, content='messages', content_rowid='id');
CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
"""

# v3: term statistics of both full-text indexes, so that searches can leave out terms
# that nearly every row contains (they cost the most and rank the least).
_V3 = """
CREATE VIRTUAL TABLE memories_vocab USING fts5vocab(memories_fts, 'row');
CREATE VIRTUAL TABLE messages_vocab USING fts5vocab(messages_fts, 'row');
"""

# v4: each continuum's own model settings (model, thinking, max tokens, effort), as
# JSON. Its own table, so settings can be chosen before the continuum's first turn.
_V4 = """
CREATE TABLE continuum_settings (
    continuum_id TEXT PRIMARY KEY,
    settings BLOB NOT NULL
);
"""

# v5: users. Every continuum, turn, message, segment, reminder, memory and document has
# an owner; what existed before belongs to the user `default`. A continuum is identified
# by (owner, id), so tables keyed or referenced by the continuum id alone are rebuilt
# (rows, rowids and so the full-text indexes are kept). `migrate` runs this with foreign
# keys off and checks them before committing, as SQLite's ALTER TABLE guide prescribes.
# A user's token is stored only as its SHA-256 digest.
_V5 = """
CREATE TABLE users (
    name TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL
);
CREATE TABLE continuums_v5 (
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    created_at REAL NOT NULL,
    history_start INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    last_turn_at REAL,
    last_message_id TEXT,
    PRIMARY KEY (owner, id)
);
INSERT INTO continuums_v5
    SELECT 'default', id, created_at, history_start, message_count, last_turn_at, last_message_id
    FROM continuums;
CREATE TABLE turns_v5 (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    continuum_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('completed', 'failed', 'cancelled')),
    started_at REAL NOT NULL,
    record BLOB NOT NULL,
    FOREIGN KEY (owner, continuum_id) REFERENCES continuums(owner, id)
);
INSERT INTO turns_v5 (rowid, id, owner, continuum_id, status, started_at, record)
    SELECT rowid, id, 'default', continuum_id, status, started_at, record FROM turns;
CREATE TABLE messages_v5 (
    id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    continuum_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    turn_id TEXT NOT NULL REFERENCES turns(id),
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content BLOB NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (owner, continuum_id, seq),
    FOREIGN KEY (owner, continuum_id) REFERENCES continuums(owner, id)
);
INSERT INTO messages_v5
    SELECT id, 'default', continuum_id, seq, turn_id, role, content, text, created_at
    FROM messages;
CREATE TABLE segments_v5 (
    id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    continuum_id TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    turn_count INTEGER NOT NULL,
    title TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    FOREIGN KEY (owner, continuum_id) REFERENCES continuums(owner, id)
);
INSERT INTO segments_v5
    SELECT id, 'default', continuum_id, started_at, ended_at, turn_count, title, first_seq
    FROM segments;
CREATE TABLE documents_v5 (
    owner TEXT NOT NULL,
    label TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (owner, label)
);
INSERT INTO documents_v5 SELECT 'default', label, content, updated_at FROM documents;
DROP TABLE segments;
DROP TABLE messages;
DROP TABLE turns;
DROP TABLE continuums;
DROP TABLE documents;
ALTER TABLE continuums_v5 RENAME TO continuums;
ALTER TABLE turns_v5 RENAME TO turns;
ALTER TABLE messages_v5 RENAME TO messages;
ALTER TABLE segments_v5 RENAME TO segments;
ALTER TABLE documents_v5 RENAME TO documents;
CREATE INDEX turns_by_continuum ON turns(owner, continuum_id, started_at);
CREATE INDEX segments_by_continuum ON segments(owner, continuum_id, ended_at);
CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
ALTER TABLE reminders ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
DROP INDEX reminders_active;
CREATE INDEX reminders_active ON reminders(owner, due_at) WHERE completed_at IS NULL;
ALTER TABLE memories ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
CREATE INDEX memories_by_owner ON memories(owner, id);
CREATE TABLE continuum_settings_v5 (
    owner TEXT NOT NULL,
    continuum_id TEXT NOT NULL,
    settings BLOB NOT NULL,
    PRIMARY KEY (owner, continuum_id)
);
INSERT INTO continuum_settings_v5
    SELECT 'default', continuum_id, settings FROM continuum_settings;
DROP TABLE continuum_settings;
ALTER TABLE continuum_settings_v5 RENAME TO continuum_settings;
"""


# v6: durable background jobs, each of its user (`owner`): segment summaries and memory
# extraction; the segments'
# summaries with a full-text index of their own (title and summary, written with the
# summary: rowid = segment id), and for memories: the segment each was extracted from,
# how often it was surfaced, an optional embedding, and an FTS update trigger (a
# de-duplicated memory is updated in place).
_V6 = """
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    kind TEXT NOT NULL,
    continuum_id TEXT NOT NULL,
    payload BLOB NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL,
    claimed_at REAL,
    last_error TEXT,
    created_at REAL NOT NULL,
    finished_at REAL,
    record BLOB
);
CREATE INDEX jobs_due ON jobs(state, next_at);
CREATE INDEX jobs_by_continuum ON jobs(owner, continuum_id, id);
ALTER TABLE segments ADD COLUMN summary TEXT NOT NULL DEFAULT '';
CREATE VIRTUAL TABLE segments_fts USING fts5(text);
ALTER TABLE memories ADD COLUMN source_segment INTEGER;
ALTER TABLE memories ADD COLUMN uses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN embedding BLOB;
CREATE TRIGGER memories_au AFTER UPDATE OF text ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
"""

# v7: context searches, durable: each one a row, pending until a searcher claims it
# (a claim older than its lease is claimable again), then holding its passages (JSON)
# or its error, shown for `turns_left` more turns of its continuum.
_V7 = """
CREATE TABLE searches (
    id INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    continuum_id TEXT NOT NULL,
    query TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done')),
    requested_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    claimed_at REAL,
    finished_at REAL,
    turns_left INTEGER,
    passages BLOB,
    error TEXT
);
CREATE INDEX searches_by_continuum ON searches(owner, continuum_id, id);
CREATE INDEX searches_open ON searches(id) WHERE state != 'done';
"""

# v8: what the Models API said of each model met (GET /v1/models/{id}), kept with the
# time it was fetched, so it is asked again only after a refresh age.
_V8 = """
CREATE TABLE model_facts (
    name TEXT PRIMARY KEY,
    facts BLOB NOT NULL,
    fetched_at REAL NOT NULL
);
"""

# Vector recall: the embedder whose vectors the store keeps (one row: its name and
# dimension). The index itself, sqlite-vec's `memory_vec` (rowid = the memory's id,
# partitioned by owner), is created when an embedder is first used, as its dimension is
# part of its definition and the extension may be missing where no embedder is set.
_V9 = """
CREATE TABLE vector_model (model TEXT NOT NULL, dimensions INTEGER NOT NULL);
"""

# v10: the memories still waiting for a vector, indexed by themselves: the background
# worker lists them and `frontmind stats` counts them, which scanned every memory (about
# 400 ms at 500,000 memories; under a millisecond with this index).
_V10 = """
CREATE INDEX memories_waiting_for_vector ON memories(id) WHERE embedding IS NULL;
"""

# v11: a user's jobs across their continuums in id order (`GET /v1/jobs` pages them):
# the index by continuum made every page sort all of the user's jobs.
_V11 = """
CREATE INDEX jobs_by_owner ON jobs(owner, id);
"""

# v12: the ids of reminders and memories are never taken again (AUTOINCREMENT). SQLite
# gave the next insert the highest id plus one, so the newest row's id, once deleted,
# went to the next one: a retried `DELETE /v1/reminders/12`, or a model's tool call
# naming a memory it was shown, reached another, newer row. (PostgreSQL's sequences
# never go back.) Both tables are rebuilt with their rows and ids (so the full-text
# index of memories stays valid); the counter starts at the highest id stored, the
# most an older store can know of.
_V12 = """
CREATE TABLE reminders_v12 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    due_at REAL,
    created_at REAL NOT NULL,
    completed_at REAL,
    origin TEXT NOT NULL CHECK (origin IN ('user', 'agent')),
    owner TEXT NOT NULL DEFAULT 'default'
);
INSERT INTO reminders_v12 (id, text, due_at, created_at, completed_at, origin, owner)
    SELECT id, text, due_at, created_at, completed_at, origin, owner FROM reminders;
DROP TABLE reminders;
ALTER TABLE reminders_v12 RENAME TO reminders;
CREATE INDEX reminders_active ON reminders(owner, due_at) WHERE completed_at IS NULL;
CREATE TABLE memories_v12 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL,
    importance REAL NOT NULL,
    owner TEXT NOT NULL DEFAULT 'default',
    source_segment INTEGER,
    uses INTEGER NOT NULL DEFAULT 0,
    embedding BLOB
);
INSERT INTO memories_v12
    (id, text, created_at, expires_at, importance, owner, source_segment, uses, embedding)
    SELECT id, text, created_at, expires_at, importance, owner, source_segment, uses, embedding
    FROM memories;
DROP TABLE memories;
ALTER TABLE memories_v12 RENAME TO memories;
CREATE INDEX memories_by_owner ON memories(owner, id);
CREATE INDEX memories_waiting_for_vector ON memories(id) WHERE embedding IS NULL;
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF text ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
"""

# v13: a turn's record reads `running` while the turn runs (it read `failed`,
# "interrupted", from its start until it ended), and the running ones are indexed by
# themselves: each turn's start and each open look for those a dead process left. The
# table is rebuilt for its CHECK, with its rows and their rowids (their order).
_V13 = """
CREATE TABLE turns_v13 (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    continuum_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
    started_at REAL NOT NULL,
    record BLOB NOT NULL,
    FOREIGN KEY (owner, continuum_id) REFERENCES continuums(owner, id)
);
INSERT INTO turns_v13 (rowid, id, owner, continuum_id, status, started_at, record)
    SELECT rowid, id, owner, continuum_id, status, started_at, record FROM turns;
DROP TABLE turns;
ALTER TABLE turns_v13 RENAME TO turns;
CREATE INDEX turns_by_continuum ON turns(owner, continuum_id, started_at);
CREATE INDEX turns_running ON turns(owner, continuum_id) WHERE status = 'running';
"""

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, _V1),
    (2, _V2),
    (3, _V3),
    (4, _V4),
    (5, _V5),
    (6, _V6),
    (7, _V7),
    (8, _V8),
    (9, _V9),
    (10, _V10),
    (11, _V11),
    (12, _V12),
    (13, _V13),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]
