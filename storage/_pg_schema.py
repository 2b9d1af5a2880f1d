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

PG_MIGRATIONS: tuple[tuple[int, str], ...] = ((1, _V1), (2, _V2), (3, _V3))
PG_SCHEMA_VERSION = PG_MIGRATIONS[-1][0]
