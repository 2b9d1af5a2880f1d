"""The PostgreSQL schema, as ordered migrations applied at open (its own list: the SQL
dialects differ, the tables and what they mean do not)."""

from __future__ import annotations

__all__ = ["PG_MIGRATIONS", "PG_SCHEMA_VERSION"]

# Full-text search: a stored tsvector per row (the 'simple' configuration: lower-cased
# words, no stemming, like SQLite's unicode61 tokenizer) behind a GIN index.
_V1 = """
CREATE TABLE continuums (
    id TEXT PRIMARY KEY,
    created_at DOUBLE PRECISION NOT NULL,
    history_start BIGINT NOT NULL DEFAULT 0,
    message_count BIGINT NOT NULL DEFAULT 0,
    last_turn_at DOUBLE PRECISION,
    last_message_id TEXT
);
CREATE TABLE turns (
    ord BIGSERIAL UNIQUE,
    id TEXT PRIMARY KEY,
    continuum_id TEXT NOT NULL REFERENCES continuums(id),
    status TEXT NOT NULL CHECK (status IN ('completed', 'failed', 'cancelled')),
    started_at DOUBLE PRECISION NOT NULL,
    record BYTEA NOT NULL
);
CREATE INDEX turns_by_continuum ON turns(continuum_id, started_at);
CREATE INDEX turns_by_start ON turns(started_at);
CREATE TABLE messages (
    id BIGSERIAL PRIMARY KEY,
    continuum_id TEXT NOT NULL REFERENCES continuums(id),
    seq BIGINT NOT NULL,
    turn_id TEXT NOT NULL REFERENCES turns(id),
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content BYTEA NOT NULL,
    text TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
    UNIQUE (continuum_id, seq)
);
CREATE INDEX messages_fts ON messages USING GIN (tsv);
CREATE TABLE segments (
    id BIGSERIAL PRIMARY KEY,
    continuum_id TEXT NOT NULL REFERENCES continuums(id),
    started_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION NOT NULL,
    turn_count BIGINT NOT NULL,
    title TEXT NOT NULL,
    first_seq BIGINT NOT NULL
);
CREATE INDEX segments_by_continuum ON segments(continuum_id, ended_at);
CREATE TABLE reminders (
    id BIGSERIAL PRIMARY KEY,
    text TEXT NOT NULL,
    due_at DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    completed_at DOUBLE PRECISION,
    origin TEXT NOT NULL CHECK (origin IN ('user', 'agent'))
);
CREATE INDEX reminders_active ON reminders(due_at) WHERE completed_at IS NULL;
CREATE TABLE memories (
    id BIGSERIAL PRIMARY KEY,
    text TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION,
    importance DOUBLE PRECISION NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
);
CREATE INDEX memories_fts ON memories USING GIN (tsv);
CREATE TABLE documents (
    label TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
"""

# Per-word document counts of both indexes, kept by the writes themselves, so that a
# search can leave out the words nearly every row contains (as SQLite does with fts5vocab).
_V2 = """
CREATE TABLE term_stats (
    kind TEXT NOT NULL CHECK (kind IN ('message', 'memory')),
    term TEXT NOT NULL,
    docs BIGINT NOT NULL,
    PRIMARY KEY (kind, term)
);
INSERT INTO term_stats (kind, term, docs)
    SELECT 'message', word, ndoc FROM ts_stat('SELECT tsv FROM messages');
INSERT INTO term_stats (kind, term, docs)
    SELECT 'memory', word, ndoc FROM ts_stat('SELECT tsv FROM memories');
"""

# Each continuum's own model settings (JSON); a table of their own, so they can be chosen
# before the continuum's first turn.
_V3 = """
CREATE TABLE continuum_settings (
    continuum_id TEXT PRIMARY KEY,
    settings BYTEA NOT NULL
);
"""

# Users (as SQLite's v5): every continuum, turn, message, segment, reminder, memory and
# document has an owner, and what existed before belongs to `default`. A continuum is
# identified by (owner, id), so its key and every reference to it are re-made. A user's
# token is stored only as its SHA-256 digest.
_V4 = """
CREATE TABLE users (
    name TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_at DOUBLE PRECISION NOT NULL
);
ALTER TABLE continuums ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
ALTER TABLE turns ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
ALTER TABLE messages ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
ALTER TABLE segments ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
ALTER TABLE reminders ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
ALTER TABLE memories ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
ALTER TABLE documents ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
ALTER TABLE turns DROP CONSTRAINT turns_continuum_id_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_continuum_id_fkey;
ALTER TABLE segments DROP CONSTRAINT segments_continuum_id_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_continuum_id_seq_key;
ALTER TABLE continuums DROP CONSTRAINT continuums_pkey;
ALTER TABLE continuums ADD PRIMARY KEY (owner, id);
ALTER TABLE turns ADD FOREIGN KEY (owner, continuum_id) REFERENCES continuums(owner, id);
ALTER TABLE messages ADD FOREIGN KEY (owner, continuum_id) REFERENCES continuums(owner, id);
ALTER TABLE messages ADD UNIQUE (owner, continuum_id, seq);
ALTER TABLE segments ADD FOREIGN KEY (owner, continuum_id) REFERENCES continuums(owner, id);
ALTER TABLE documents DROP CONSTRAINT documents_pkey;
ALTER TABLE documents ADD PRIMARY KEY (owner, label);
DROP INDEX turns_by_continuum;
CREATE INDEX turns_by_continuum ON turns(owner, continuum_id, started_at);
DROP INDEX segments_by_continuum;
CREATE INDEX segments_by_continuum ON segments(owner, continuum_id, ended_at);
DROP INDEX reminders_active;
CREATE INDEX reminders_active ON reminders(owner, due_at) WHERE completed_at IS NULL;
CREATE INDEX memories_by_owner ON memories(owner, id);
ALTER TABLE continuum_settings ADD COLUMN owner TEXT NOT NULL DEFAULT 'default';
ALTER TABLE continuum_settings DROP CONSTRAINT continuum_settings_pkey;
ALTER TABLE continuum_settings ADD PRIMARY KEY (owner, continuum_id);
"""

# Durable background jobs, each of its user (`owner`), claimed with FOR UPDATE SKIP
# LOCKED so replicas share them; segment summaries searchable by their own tsvector;
# for memories: their source segment, how often each was surfaced, an optional embedding.
_V5 = """
CREATE TABLE jobs (
    id BIGSERIAL PRIMARY KEY,
    owner TEXT NOT NULL,
    kind TEXT NOT NULL,
    continuum_id TEXT NOT NULL,
    payload BYTEA NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at DOUBLE PRECISION NOT NULL,
    claimed_at DOUBLE PRECISION,
    last_error TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    record BYTEA
);
CREATE INDEX jobs_due ON jobs(state, next_at);
CREATE INDEX jobs_by_continuum ON jobs(owner, continuum_id, id);
ALTER TABLE segments ADD COLUMN summary TEXT NOT NULL DEFAULT '';
ALTER TABLE segments ADD COLUMN tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', title || ' ' || summary)) STORED;
CREATE INDEX segments_fts ON segments USING GIN (tsv);
ALTER TABLE memories ADD COLUMN source_segment BIGINT;
ALTER TABLE memories ADD COLUMN uses BIGINT NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN embedding BYTEA;
"""

# Context searches, durable (as SQLite's v7), claimed with FOR UPDATE SKIP LOCKED; and
# each job's continuum lease key (the advisory lock a turn of that continuum holds), so
# that a worker can leave alone the continuums with a turn running on any replica.
# GIN pending lists kept short: a GIN index with `fastupdate` queues new entries in a
# pending list (up to 4 MB) until a vacuum, and every search scans all of it, so a
# memory search over a freshly written store cost several milliseconds. Memories are
# written rarely: their index is updated at once. Messages are written every turn: their
# list is flushed every 64 kB (the least allowed) instead.
_V6 = """
CREATE TABLE searches (
    id BIGSERIAL PRIMARY KEY,
    owner TEXT NOT NULL,
    continuum_id TEXT NOT NULL,
    query TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done')),
    requested_at DOUBLE PRECISION NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    claimed_at DOUBLE PRECISION,
    finished_at DOUBLE PRECISION,
    turns_left INTEGER,
    passages BYTEA,
    error TEXT
);
CREATE INDEX searches_by_continuum ON searches(owner, continuum_id, id);
CREATE INDEX searches_open ON searches(id) WHERE state != 'done';
ALTER TABLE jobs ADD COLUMN lease_key BIGINT;
ALTER INDEX memories_fts SET (fastupdate = off);
ALTER INDEX messages_fts SET (gin_pending_list_limit = 64);
ALTER INDEX segments_fts SET (gin_pending_list_limit = 64);
SELECT gin_clean_pending_list('memories_fts'::regclass);
SELECT gin_clean_pending_list('messages_fts'::regclass);
SELECT gin_clean_pending_list('segments_fts'::regclass);
"""

# v7: what the Models API said of each model met, with when it was fetched.
_V7 = """
CREATE TABLE model_facts (
    name TEXT PRIMARY KEY,
    facts BYTEA NOT NULL,
    fetched_at DOUBLE PRECISION NOT NULL
);
"""

# Vector recall: the embedder whose vectors the store keeps (one row), and each memory's
# vector as `real[]`, normalized, so that the exact search is a dot product in SQL.
_V8 = """
CREATE TABLE vector_model (model TEXT NOT NULL, dimensions INTEGER NOT NULL);
ALTER TABLE memories ADD COLUMN vector real[];
"""

# v9: the memories still waiting for a vector, indexed by themselves (the worker lists
# them, `frontmind stats` counts them; both scanned every memory).
_V9 = """
CREATE INDEX memories_waiting_for_vector ON memories(id) WHERE embedding IS NULL;
"""

# v10: a user's jobs across their continuums in id order (`GET /v1/jobs` pages them).
_V10 = """
CREATE INDEX jobs_by_owner ON jobs(owner, id);
"""

# v11: when each forgotten user was forgotten (by their name's SHA-256, not the name):
# a turn of theirs that another replica began before and commits after is refused, not
# written back (`delete_user`).
_V11 = """
CREATE TABLE forgotten_users (name_sha256 TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL);
"""

# v12: a turn's record reads `running` while the turn runs (as SQLite's v13), the
# running ones indexed by themselves.
_V12 = """
ALTER TABLE turns DROP CONSTRAINT turns_status_check;
ALTER TABLE turns ADD CONSTRAINT turns_status_check
    CHECK (status IN ('running', 'completed', 'failed', 'cancelled'));
CREATE INDEX turns_running ON turns(owner, continuum_id) WHERE status = 'running';
"""

PG_MIGRATIONS: tuple[tuple[int, str], ...] = (
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
)
PG_SCHEMA_VERSION = PG_MIGRATIONS[-1][0]
