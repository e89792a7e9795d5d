"""The index's schema as numbered migrations, applied in order by ``db.Database`` on open.

A migration is SQL (run as one script) or a function of the open write transaction, for a
change SQL cannot express (re-encoding posting blobs).  Each runs in one transaction with its
``user_version`` bump, so a kill leaves the database at one version or the next.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from . import postings as codec

MIGRATIONS: list[tuple[int, str | Callable[[sqlite3.Connection], None]]] = [
    (
        1,
        """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT
) WITHOUT ROWID;

CREATE TABLE roots (
    path TEXT PRIMARY KEY
) WITHOUT ROWID;

CREATE TABLE files (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    path        TEXT NOT NULL UNIQUE,
    size        INTEGER NOT NULL,
    mtime       REAL NOT NULL,
    hash        TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    error       TEXT,
    n_sentences INTEGER NOT NULL DEFAULT 0,
    indexed_at  REAL NOT NULL
);
CREATE INDEX files_status ON files(status) WHERE status <> 'ok';

CREATE TABLE segments (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    n_sentences INTEGER NOT NULL,
    n_postings  INTEGER NOT NULL,
    n_bytes     INTEGER NOT NULL,
    level       INTEGER NOT NULL,
    created_at  REAL NOT NULL
);

-- AUTOINCREMENT: a sentence id is never reused, even after merges purge rows.
CREATE TABLE sentences (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    file_id           INTEGER REFERENCES files(id) ON DELETE SET NULL,  -- NULL once tombstoned
    segment_id        INTEGER NOT NULL REFERENCES segments(id),
    text              TEXT NOT NULL,
    context           TEXT NOT NULL,
    offset_in_context INTEGER NOT NULL,
    page              INTEGER,
    line              INTEGER,
    char_start        INTEGER,
    char_end          INTEGER,
    n_postings        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sentences_file ON sentences(file_id);
CREATE INDEX sentences_segment ON sentences(segment_id);

-- A rowid table, not WITHOUT ROWID: with ~100-4000 byte blobs a WITHOUT ROWID b-tree
-- copies whole rows (blobs included) into interior pages and leaves its leaves half empty
-- (measured: 2.1x the blob bytes); a rowid table appended in order packs ~1.05x.
CREATE TABLE postings (
    id         INTEGER PRIMARY KEY,
    token_id   INTEGER NOT NULL,
    segment_id INTEGER NOT NULL REFERENCES segments(id),
    blob       BLOB NOT NULL
);
CREATE UNIQUE INDEX postings_token ON postings(token_id, segment_id);
CREATE INDEX postings_segment ON postings(segment_id, token_id);

CREATE TABLE tombstones (
    sentence_id INTEGER PRIMARY KEY REFERENCES sentences(id)
);
""",
    ),
    (
        2,
        # each paragraph is stored once, not once per sentence in it
        """
CREATE TABLE paragraphs (
    id   INTEGER PRIMARY KEY,
    text TEXT NOT NULL
);
ALTER TABLE sentences ADD COLUMN paragraph_id INTEGER REFERENCES paragraphs(id);
CREATE TEMP TABLE ctx_map AS SELECT DISTINCT file_id, context FROM sentences;
INSERT INTO paragraphs(id, text) SELECT rowid, context FROM temp.ctx_map;
UPDATE sentences SET paragraph_id = (
    SELECT m.rowid FROM temp.ctx_map m WHERE m.context = sentences.context AND m.file_id IS sentences.file_id);
DROP TABLE temp.ctx_map;
ALTER TABLE sentences DROP COLUMN context;
CREATE INDEX sentences_paragraph ON sentences(paragraph_id);
""",
    ),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]
