"""The index's schema as numbered migrations, applied in order by ``db.Database`` on open.

A migration is SQL (run as one script) or a function of the open write transaction, for a
change SQL cannot express (re-encoding posting blobs).  Each runs in one transaction with its
``user_version`` bump, so a kill leaves the database at one version or the next.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import numpy as np

from . import postings as codec
from .bitmap import bitmap_header
from .records import FileStatus

_REWRITE_ROWS = 2048  # posting rows re-encoded per step of migrations 3 and 6 (bounded memory)
# Earlier layouts, each without its list's largest weight: V1 and the bitmap (the same bytes
# after the tag as today's FORMAT_V1 and FORMAT_BITMAP after their max byte), and FORMAT_U16's.
_V1_V5, _BITMAP_V5, _U16_V3 = 1, 2, 3


def _legacy_as_current(blob: bytes) -> bytes:
    """A blob of an earlier layout in today's: the same bytes with the largest weight added."""
    tag = blob[0]
    if tag == _U16_V3:
        _, nwin, _, n = codec.U16_HEAD.unpack_from(blob)
        start = codec.U16_HEAD.size + (2 * nwin if nwin > 1 else 0)
        q = np.frombuffer(blob, np.uint8, 3 * n, start)[2::3]
        return (bytes([codec.FORMAT_U16]) + blob[1:codec.U16_HEAD.size] + bytes([int(q.max()) if n else 0])
                + blob[codec.U16_HEAD.size:])
    if tag in (_V1_V5, _BITMAP_V5):
        # today's layout with a placeholder max, so today's header readers find the weights
        cur = bytes([codec.FORMAT_V1 if tag == _V1_V5 else codec.FORMAT_BITMAP, 0]) + blob[1:]
        if tag == _V1_V5:
            n, pos = codec.read_varint(cur, codec.HEAD)
        else:
            n, _, _, pos = bitmap_header(cur)
        q = np.frombuffer(cur, np.uint8, n, pos)
        return cur[:1] + bytes([int(q.max()) if n else 0]) + cur[2:]
    return blob


def rewrite_blobs(c: sqlite3.Connection) -> int:
    """Re-encode every posting blob the writer would not write today (earlier layouts, bitmaps
    of short or sparse lists, V1 lists ``FORMAT_U16`` holds) as ``postings.encode`` does, so
    that the reader knows only the writer's formats.  Returns the number of blobs rewritten.

    Why once, here: every question decodes its blobs, and a reader for every format ever
    written would stay forever; the rewrite costs one pass over the blobs that are not
    ``FORMAT_U16``, the bulk of any index (their first byte is read in SQL).
    """
    changed, last = 0, -1
    while rows := c.execute("SELECT id, blob FROM postings WHERE id > ? AND substr(blob, 1, 1) <> ?"
                            " ORDER BY id LIMIT ?", (last, bytes([codec.FORMAT_U16]), _REWRITE_ROWS)).fetchall():
        last = rows[-1][0]
        updates = []
        for rid, blob in rows:
            cur = _legacy_as_current(blob)
            new = codec.encode(*codec.decode(cur))
            if new != blob:
                updates.append((new, rid))
        c.executemany("UPDATE postings SET blob = ? WHERE id = ?", updates)
        changed += len(updates)
    if changed:
        c.execute("UPDATE segments SET n_bytes = (SELECT coalesce(sum(length(blob)), 0) FROM postings p"
                  " WHERE p.segment_id = segments.id)")
    return changed


def add_encoded(c: sqlite3.Connection) -> None:
    """Whether a sentence is encoded yet (1 for every sentence an older version wrote)."""
    if "encoded" not in {r[1] for r in c.execute("PRAGMA table_info(sentences)")}:
        c.execute("ALTER TABLE sentences ADD COLUMN encoded INTEGER NOT NULL DEFAULT 1")
    c.execute("CREATE INDEX IF NOT EXISTS sentences_pending ON sentences(file_id) WHERE encoded = 0")


MIGRATIONS: list[tuple[int, str | Callable[[sqlite3.Connection], object]]] = [  # a step's result is not read
    (
        1,
        # the statuses are FileStatus's, formatted in: the text is the one this migration always ran
        f"""
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
    status      TEXT NOT NULL CHECK (status IN ('{FileStatus.OK}', '{FileStatus.ERROR}')),
    error       TEXT,
    n_sentences INTEGER NOT NULL DEFAULT 0,
    indexed_at  REAL NOT NULL
);
CREATE INDEX files_status ON files(status) WHERE status <> '{FileStatus.OK}';

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
    (3, rewrite_blobs),  # one reader: every blob in a format the writer writes today (as of each release)
    (4, add_encoded),  # progressive indexing: sentences stored with their lexical postings, encoded later
    (
        5,
        # the answer phrase: per encoded sentence, where its K tokens had their max
        # (index/positions.py). A sentence encoded before this migration has no row and shows
        # no phrase until it is encoded again. The trigger deletes a row with its sentence,
        # whoever deletes it (a merge's purge of tombstoned sentences), in the same transaction.
        """
CREATE TABLE IF NOT EXISTS positions (
    sentence_id INTEGER PRIMARY KEY,
    blob        BLOB NOT NULL
);
CREATE TRIGGER IF NOT EXISTS positions_die_with_sentence AFTER DELETE ON sentences BEGIN
    DELETE FROM positions WHERE sentence_id = OLD.id;
END;
""",
    ),
    (6, rewrite_blobs),  # every format holds its largest weight: the hybrid's field maxima are exact
    (
        7,
        # paragraphs are bounded (ingest/extract.py MAX_PARAGRAPH_CHARS, 2,000 when this ran): a file
        # stored with a longer one (a log without blank lines) is read again by the next `index`,
        # cut into bounded paragraphs, before anything encodes it (its size and hash no longer match)
        """
UPDATE files SET size = -1, hash = '' WHERE id IN (
    SELECT DISTINCT s.file_id FROM sentences s JOIN paragraphs p ON p.id = s.paragraph_id
    WHERE s.file_id IS NOT NULL AND length(p.text) > 2000);
""",
    ),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]
