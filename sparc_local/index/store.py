"""The index: one SQLite database (WAL) holding files, sentences and segmented posting lists.

Layout (Lucene-style):

* Every ``write_files`` batch adds ONE immutable *segment*: one posting-list blob per token
  (see ``postings.py`` for the blob format) covering the batch's new sentences.
* Re-indexing or removing a file *tombstones* its old sentences (row in ``tombstones``,
  ``sentences.file_id`` set to NULL).  Their postings stay in their segment; queries drop
  them with the tombstone id list (``search.score(..., exclude=index.tombstones())``).
* ``maybe_merge`` rewrites groups of similar-sized segments (or a segment with many
  tombstones) into one, dropping tombstoned sentences' postings, sentence rows and
  tombstones.  ``compact`` (the end of a full `index` run) merges every segment below a tenth
  of the index into one, since a query pays per segment.  ``merge_all`` merges everything into
  one segment.  Sentence ids never change.  These live in ``segments.py`` (a mixin of ``Index``).
* Every mutation is one ``BEGIN IMMEDIATE ... COMMIT`` transaction, so a crash leaves each
  batch either fully applied or not at all.  Write transactions nest (SAVEPOINTs), so a user
  action made of several mutations (`forget`) commits once.  WAL + busy_timeout let readers
  run while a writer works.
* A path `forget` removed is recorded (meta ``FORGOTTEN``) and ``write_files`` never writes a
  file at or under it, whoever the writer is, until the user names the path again
  (``add_roots``).

A query reads only the rows of its own tokens: ``WHERE token_id IN (...)`` is a SEARCH of the
unique index postings(token_id, segment_id), then one rowid lookup per (token, segment) row.

Files that fail to read (``FileUpdate.error`` set) are recorded with status 'error', the
reason, and their size/mtime/hash (so the indexer does not retry an unchanged file); any
sentences indexed from an earlier successful read are tombstoned -- the index never answers
from content it can no longer vouch for.

Keep module-level imports light: this is on the ``ask`` path.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import postings as codec
from sparc_local.query import scoring as _search
from sparc_local.errors import DataDirUnusable, IndexCorrupt, SchemaTooNew, SparcError
from sparc_local.query.pathfilter import PathFilter, is_under
from .segments import _CHUNK, MERGE_FACTOR, Segments, _chunks, _level, _qmarks
from sparc_local.model.sparse import SparseVectors

BUSY_TIMEOUT_MS = 5000
_CORRUPT_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)  # primary codes: "malformed", "not a database"
FORGOTTEN = "forgotten"  # meta key: JSON list of the paths `forget` removed
MMAP_BYTES = 2 << 30  # address space only; pages come from the OS page cache (SQLite caps it near 2 GB)

MIGRATIONS: list[tuple[int, str]] = [
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


@dataclass(frozen=True, slots=True)
class SentenceRow:
    """One sentence to index. ``context`` is its paragraph; the sentence is
    ``context[offset_in_context : offset_in_context + len(text)]`` (for highlighting).
    page/line are 1-based locations for display; char_start/char_end are offsets in the
    extracted document text."""

    text: str
    context: str
    offset_in_context: int
    page: int | None = None
    line: int | None = None
    char_start: int | None = None
    char_end: int | None = None


@dataclass(slots=True)
class FileUpdate:
    """New state of one file. ``vectors`` has one row per sentence (None when there are no
    sentences). ``error`` set = the file could not be read: recorded, old sentences dropped."""

    path: str
    size: int
    mtime: float
    hash: str
    sentences: list[SentenceRow] = field(default_factory=list)
    vectors: SparseVectors | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class FileRecord:
    id: int
    path: str
    size: int
    mtime: float
    hash: str
    status: str  # 'ok' | 'error'
    error: str | None
    n_sentences: int
    indexed_at: float


_FILE_COLS = "id, path, size, mtime, hash, status, error, n_sentences, indexed_at"


def _covered(path: str, roots: Iterable[str]) -> bool:
    """Whether a walk of another root reaches ``path``: it lies below that root and no name on the
    way is hidden (a walk skips those, and `--hidden` is not remembered with the root)."""
    for root in roots:
        if path != root and is_under(path, root):
            if not any(part.startswith(".") for part in path[len(root.rstrip(os.sep)) + 1:].split(os.sep)):
                return True
    return False


def _under_sql(prefix: str) -> tuple[str, list[str]]:
    """A WHERE clause (and its arguments) matching ``path`` at or below ``prefix``, as ``is_under``
    does, that SEARCHes a unique index on path instead of scanning."""
    seps = {"/", os.sep}
    base = prefix.rstrip("".join(seps)) or prefix
    conds, args = ["path = ?"], [base]
    for sep in seps:
        lo = base + sep if not base.endswith(sep) else base
        # every string starting with lo sorts in [lo, lo[:-1] + chr(ord(sep) + 1))
        conds.append("(path >= ? AND path < ?)")
        args += [lo, lo[:-1] + chr(ord(lo[-1]) + 1)]
    return " OR ".join(conds), args


def _secure_file(path: Path) -> None:
    """Create ``path`` 0600 if missing; tighten it to 0600 if it is wider."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o077:
            with contextlib.suppress(PermissionError):  # not ours to fix
                os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


class Index(Segments):
    """A sparc-local index database. Not thread-safe: use one Index per thread."""

    def __init__(self, path: str | os.PathLike | None = None, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS):
        if path is None:
            from sparc_local.paths import db_path

            path = db_path()
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._depth = 0  # open write_transaction levels: 0 = none, 1 = BEGIN IMMEDIATE, more = SAVEPOINTs
        self._scale: float | None = None
        self._state: tuple | None = None  # search's cached (key, tombstones, id bound, filter masks), see _read_state
        self._work: np.ndarray | None = None  # search's accumulator, see search.work_buffer
        try:
            self._connect(busy_timeout_ms)
        except BaseException as err:
            self.close()
            user = self._user_error(err)
            if user is None:
                raise
            raise user from err

    def _connect(self, busy_timeout_ms: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _secure_file(self.path)
        self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout_ms / 1000)
        c = self._conn
        c.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # only for a brand-new database (it would take effect on no other, yet still write the
        # header): lets merge_all() give freed pages back with PRAGMA incremental_vacuum
        if c.execute("PRAGMA user_version").fetchone()[0] == 0:
            c.execute("PRAGMA auto_vacuum = INCREMENTAL")
        if c.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            c.execute("PRAGMA journal_mode = WAL")
        c.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: atomic and consistent; fsync at checkpoints
        # a checkpointed WAL is truncated back to this size instead of staying at its high-water mark
        c.execute("PRAGMA journal_size_limit = 8388608")
        c.execute("PRAGMA foreign_keys = ON")
        # read big posting blobs straight from the page cache (measured: 8x faster fetch)
        c.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        for suffix in ("-wal", "-shm"):
            side = Path(str(self.path) + suffix)
            with contextlib.suppress(OSError):
                if side.stat().st_mode & 0o077:
                    os.chmod(side, 0o600)
        self._migrate()

    def _user_error(self, err: BaseException) -> SparcError | None:
        """The user-facing form of an error opening or reading the database, None if it is not one."""
        if isinstance(err, sqlite3.DatabaseError) and err.sqlite_errorcode & 0xFF in _CORRUPT_CODES:
            return IndexCorrupt(f"the index {self.path} is damaged ({err})",
                                "Move it away, then run `sparc-local index FOLDER` to build it again "
                                "(your files are not touched).")
        if isinstance(err, (PermissionError, IsADirectoryError)) or (
                isinstance(err, sqlite3.OperationalError) and err.sqlite_errorcode & 0xFF == sqlite3.SQLITE_CANTOPEN):
            reason = err.strerror if isinstance(err, OSError) else str(err)
            return DataDirUnusable(f"cannot open the index {self.path} ({reason})",
                                   "Make it a file you can read and write (chmod 600), or move it away.")
        return None

    # ------------------------------------------------------------------ plumbing

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()
        # damage is often found only when a query reaches the broken page
        if isinstance(exc, sqlite3.DatabaseError) and (user := self._user_error(exc)) is not None:
            raise user from exc

    @property
    def conn(self) -> sqlite3.Connection:
        return self._conn

    def schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self) -> None:
        c = self._conn
        for version, script in MIGRATIONS:
            if self.schema_version() >= version:
                continue
            try:
                # executescript runs the whole script; the BEGIN inside makes it one
                # transaction together with the user_version bump.
                c.executescript(f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version = {version};\nCOMMIT;")
            except sqlite3.Error:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                if self.schema_version() >= version:  # another process migrated first
                    continue
                raise
        if self.schema_version() > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the index {self.path} was written by a newer sparc-local (schema version "
                f"{self.schema_version()}; this one reads up to {SCHEMA_VERSION})",
                "Upgrade sparc-local, or move the index away and run `sparc-local index FOLDER` to build it again.")

    @contextlib.contextmanager
    def write_transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: BEGIN IMMEDIATE ... COMMIT, ROLLBACK on any exception.

        Nested inside another write_transaction it is a SAVEPOINT instead: released into the
        outer transaction, or rolled back to (alone) on an exception, as sqlite-utils'
        ``Database.atomic()`` does.  So a user action built from several store calls commits
        once.  IMMEDIATE takes the write lock up front: a deferred transaction that reads and
        then writes fails at once (SQLITE_BUSY_SNAPSHOT) when another writer committed meanwhile.
        """
        c = self._conn
        depth = self._depth
        name = f"write_{depth}"
        c.execute("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT {name}")
        self._depth = depth + 1
        try:
            yield c
        except BaseException:
            if c.in_transaction:  # some errors (e.g. SQLITE_FULL) already rolled everything back
                if depth == 0:
                    c.execute("ROLLBACK")
                else:
                    c.execute(f"ROLLBACK TO {name}")
                    c.execute(f"RELEASE {name}")
            raise
        finally:
            self._depth = depth
        try:
            c.execute("COMMIT" if depth == 0 else f"RELEASE {name}")
        except BaseException:
            if depth == 0 and c.in_transaction:
                c.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several reads (e.g. postings + tombstones)."""
        c = self._conn
        if c.in_transaction:
            yield c
            return
        c.execute("BEGIN")
        try:
            yield c
        finally:
            c.execute("COMMIT")

    # ------------------------------------------------------------------ meta

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def set_meta(self, key: str, value: str | None) -> None:
        if key == "weight_scale":
            raise ValueError("use set_weight_scale()")
        self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def meta(self) -> dict[str, str | None]:
        return dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    @property
    def weight_scale(self) -> float:
        """Quantization step: stored weight q means f = q * weight_scale."""
        if self._scale is None:
            v = self.get_meta("weight_scale")
            if v is None:
                return codec.scale_for_ceiling()  # what the first write will store
            self._scale = float(v)
        return self._scale

    def set_weight_scale(self, scale: float) -> None:
        """Fix the quantization step (e.g. ``postings.scale_for_ceiling(16.0)``).

        Only allowed while the index has no postings, or to the value it already has.
        """
        scale = float(scale)
        if not scale > 0:
            raise ValueError("weight scale must be > 0")
        with self.write_transaction() as c:
            cur = c.execute("SELECT value FROM meta WHERE key = 'weight_scale'").fetchone()
            if cur is not None and float(cur[0]) == scale:
                return
            if c.execute("SELECT 1 FROM postings LIMIT 1").fetchone() is not None:
                raise ValueError("cannot change the weight scale of a non-empty index; rebuild it")
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('weight_scale', ?)", (repr(scale),))
        self._scale = scale

    def _scale_in_txn(self, c: sqlite3.Connection) -> float:
        row = c.execute("SELECT value FROM meta WHERE key = 'weight_scale'").fetchone()
        if row is None:
            scale = codec.scale_for_ceiling()
            c.execute("INSERT INTO meta(key, value) VALUES ('weight_scale', ?)", (repr(scale),))
        else:
            scale = float(row[0])
        self._scale = scale
        return scale

    # ------------------------------------------------------------------ roots

    def _stored_roots(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT path FROM roots ORDER BY path")]

    def roots(self) -> list[str]:
        """The paths the user named to index, except those a walk of another root reaches."""
        stored = self._stored_roots()
        return [r for r in stored if not _covered(r, stored)]

    def add_roots(self, paths: Iterable[str | os.PathLike]) -> None:
        """Remember paths the user named, and lift `forget` from exactly these paths.

        Roots are what the user named, and a path another root's walk reaches is not one: a file
        indexed on its own under a root (e.g. brought back after `forget`) would otherwise stay
        a root after it is deleted, and a plain `index` would stop on it.  Roots a new root
        covers are dropped for the same reason.
        """
        named = list(dict.fromkeys(str(p) for p in paths))
        with self.write_transaction() as c:
            forgotten = self.forgotten()
            if set(named) & set(forgotten):
                self._set_forgotten([f for f in forgotten if f not in named])
            stored = self._stored_roots()
            every = set(stored) | set(named)
            c.executemany("INSERT OR IGNORE INTO roots(path) VALUES (?)",
                          [(p,) for p in named if not _covered(p, every)])
            c.executemany("DELETE FROM roots WHERE path = ?", [(r,) for r in stored if _covered(r, every)])

    def remove_roots(self, paths: Iterable[str | os.PathLike]) -> None:
        with self.write_transaction() as c:
            c.executemany("DELETE FROM roots WHERE path = ?", [(str(p),) for p in paths])

    def remove_roots_under(self, prefix: str | os.PathLike) -> int:
        """Drop the roots at or below ``prefix``; returns how many."""
        where, args = _under_sql(str(prefix))
        with self.write_transaction() as c:
            return c.execute(f"DELETE FROM roots WHERE {where}", args).rowcount

    # ------------------------------------------------------------------ forgotten paths

    def forgotten(self) -> list[str]:
        """The paths `forget` removed: no file at or under one is written until it is named again."""
        return json.loads(self.get_meta(FORGOTTEN) or "[]")

    def _set_forgotten(self, paths: Iterable[str]) -> None:
        self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                           (FORGOTTEN, json.dumps(sorted(set(paths)))))

    def add_forgotten(self, prefix: str | os.PathLike) -> None:
        with self.write_transaction():
            self._set_forgotten([*self.forgotten(), str(prefix)])

    def is_forgotten(self, path: str, forgotten: Sequence[str] | None = None) -> bool:
        """Whether ``path`` is at or below a forgotten path (pass ``forgotten()`` to test many)."""
        return any(is_under(path, f) for f in (self.forgotten() if forgotten is None else forgotten))

    # ------------------------------------------------------------------ files

    def file(self, path: str | os.PathLike) -> FileRecord | None:
        row = self._conn.execute(f"SELECT {_FILE_COLS} FROM files WHERE path = ?", (str(path),)).fetchone()
        return None if row is None else FileRecord(*row)

    def all_files(self) -> list[FileRecord]:
        return [FileRecord(*r) for r in self._conn.execute(f"SELECT {_FILE_COLS} FROM files ORDER BY path")]

    def _tombstone_file(self, c: sqlite3.Connection, file_id: int) -> None:
        c.execute("INSERT OR IGNORE INTO tombstones(sentence_id) SELECT id FROM sentences WHERE file_id = ?", (file_id,))
        c.execute("UPDATE sentences SET file_id = NULL WHERE file_id = ?", (file_id,))

    def write_files(self, updates: Sequence[FileUpdate], *, merge: bool = True) -> int | None:
        """Apply a batch of file updates in ONE transaction; returns the new segment id (or None).

        Per file: tombstone its old sentences, upsert its row, insert its new sentences.  All
        new sentences' postings form one new segment.  If a path occurs twice, the last wins.
        With ``merge=True``, ``maybe_merge()`` runs afterwards (its own transaction).
        """
        latest: dict[str, FileUpdate] = {}
        for u in updates:
            latest[str(u.path)] = u
        batch = list(latest.values())
        for u in batch:
            n_vec = 0 if u.vectors is None else len(u.vectors)
            if u.error is None and n_vec != len(u.sentences):
                raise ValueError(f"{u.path}: {len(u.sentences)} sentences but {n_vec} vectors")
        if not batch:
            return None
        now = time.time()
        segment_id = None
        with self.write_transaction() as c:
            # the one check every writer (index, watch, adapt) passes: forgotten stays forgotten
            forgotten = self.forgotten()
            batch = [u for u in batch if not (forgotten and self.is_forgotten(str(u.path), forgotten))]
            if not batch:
                return None
            scale = self._scale_in_txn(c)
            n_new = sum(len(u.sentences) for u in batch if u.error is None)
            if n_new:
                segment_id = c.execute(
                    "INSERT INTO segments(n_sentences, n_postings, n_bytes, level, created_at) VALUES (0, 0, 0, 0, ?)",
                    (now,),
                ).lastrowid
                seq = c.execute("SELECT seq FROM sqlite_sequence WHERE name = 'sentences'").fetchone()
                mx = c.execute("SELECT max(id) FROM sentences").fetchone()[0]
                next_id = max(seq[0] if seq else 0, mx or 0) + 1
            else:
                next_id = 0
            tok_parts, sid_parts, w_parts = [], [], []
            for u in batch:
                path = str(u.path)
                old = c.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
                if old is not None:
                    self._tombstone_file(c, old[0])
                ok = u.error is None
                n = len(u.sentences) if ok else 0
                c.execute(
                    "INSERT INTO files(path, size, mtime, hash, status, error, n_sentences, indexed_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime = excluded.mtime,"
                    " hash = excluded.hash, status = excluded.status, error = excluded.error,"
                    " n_sentences = excluded.n_sentences, indexed_at = excluded.indexed_at",
                    (path, int(u.size), float(u.mtime), str(u.hash), "ok" if ok else "error", u.error, n, now),
                )
                if not n:
                    continue
                file_id = old[0] if old is not None else c.execute(
                    "SELECT id FROM files WHERE path = ?", (path,)
                ).fetchone()[0]
                vec = u.vectors
                assert vec is not None
                counts = np.diff(vec.indptr)
                ids = np.arange(next_id, next_id + n, dtype=np.int64)
                paragraph: dict[str, int] = {}
                for row in u.sentences:
                    if row.context not in paragraph:
                        paragraph[row.context] = c.execute(
                            "INSERT INTO paragraphs(text) VALUES (?) RETURNING id", (row.context,)).fetchone()[0]
                c.executemany(
                    "INSERT INTO sentences(id, file_id, segment_id, text, paragraph_id, offset_in_context,"
                    " page, line, char_start, char_end, n_postings) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [
                        (sid, file_id, segment_id, s.text, paragraph[s.context], s.offset_in_context,
                         s.page, s.line, s.char_start, s.char_end, cnt)
                        for sid, s, cnt in zip(ids.tolist(), u.sentences, counts.tolist())
                    ],
                )
                a, b = int(vec.indptr[0]), int(vec.indptr[-1])
                tok_parts.append(np.asarray(vec.token_ids[a:b], dtype=np.int64))
                sid_parts.append(np.repeat(ids, counts))
                w_parts.append(np.asarray(vec.weights[a:b], dtype=np.float32))
                next_id += n
            if segment_id is not None:
                n_post, n_bytes = self._write_postings(c, segment_id, tok_parts, sid_parts, w_parts, scale)
                # postings that quantized to 0 were dropped: keep sentence counts exact
                c.execute(
                    "UPDATE segments SET n_sentences = ?, n_postings = ?, n_bytes = ?, level = ? WHERE id = ?",
                    (n_new, n_post, n_bytes, _level(n_post, MERGE_FACTOR), segment_id),
                )
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('last_update', ?)", (repr(now),))
        if merge:
            self.maybe_merge()
        return segment_id

    def _write_postings(self, c, segment_id, tok_parts, sid_parts, w_parts, scale) -> tuple[int, int]:
        if not tok_parts:
            return 0, 0
        toks = np.concatenate(tok_parts)
        sids = np.concatenate(sid_parts)
        w = np.concatenate(w_parts)
        if len(w) and not np.all(np.isfinite(w)):
            raise ValueError("non-finite sparse weight")
        q = codec.quantize(w, scale)
        keep = q > 0
        if not keep.all():
            toks, sids, q = toks[keep], sids[keep], q[keep]
            # recount per-sentence postings
            dropped_ids, dropped_n = np.unique(np.concatenate(sid_parts)[~keep], return_counts=True)
            c.executemany(
                "UPDATE sentences SET n_postings = n_postings - ? WHERE id = ?",
                zip(dropped_n.tolist(), dropped_ids.tolist()),
            )
        order = np.argsort(toks, kind="stable")  # sids already ascending in input order
        toks, sids, q = toks[order], sids[order], q[order]
        if len(toks) > 1:
            dup = (toks[1:] == toks[:-1]) & (sids[1:] == sids[:-1])
            if dup.any():
                raise ValueError("a sentence vector lists the same token twice")
        groups = codec.encode_groups(toks, sids, q)
        c.executemany(
            "INSERT INTO postings(token_id, segment_id, blob) VALUES (?, ?, ?)",
            ((t, segment_id, blob) for t, blob in groups),
        )
        return len(toks), sum(len(b) for _, b in groups)

    def touch_file(self, path: str | os.PathLike, size: int, mtime: float) -> None:
        """Record a new stat for a file whose content hash did not change, so it is not re-read."""
        with self.write_transaction() as c:
            c.execute("UPDATE files SET size = ?, mtime = ? WHERE path = ?", (size, mtime, str(path)))

    def remove_files(self, paths: Iterable[str | os.PathLike]) -> int:
        """Forget files (tombstone their sentences, delete their rows). Returns how many existed."""
        removed = 0
        with self.write_transaction() as c:
            for p in paths:
                row = c.execute("SELECT id FROM files WHERE path = ?", (str(p),)).fetchone()
                if row is None:
                    continue
                self._tombstone_file(c, row[0])
                c.execute("DELETE FROM files WHERE id = ?", (row[0],))
                removed += 1
            if removed:
                c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('last_update', ?)", (repr(time.time()),))
        return removed

    def count_under(self, prefix: str | os.PathLike) -> tuple[int, int]:
        """(files indexed, files recorded as unreadable) at or below ``prefix``."""
        where, args = _under_sql(str(prefix))
        row = self._conn.execute(f"SELECT coalesce(sum(status = 'ok'), 0), coalesce(sum(status = 'error'), 0)"
                                 f" FROM files WHERE {where}", args).fetchone()
        return row[0], row[1]

    def remove_under(self, prefix: str | os.PathLike) -> int:
        """Remove ``prefix`` itself and every file below it (path-component aware:
        removing /a/b does not touch /a/bc). Returns the number of files removed."""
        where, args = _under_sql(str(prefix))
        with self.write_transaction() as c:
            ids = [r[0] for r in c.execute(f"SELECT id FROM files WHERE {where}", args)]
            for fid in ids:
                self._tombstone_file(c, fid)
            for chunk in _chunks(ids):
                c.execute(f"DELETE FROM files WHERE id IN ({_qmarks(len(chunk))})", chunk)
            if ids:
                c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('last_update', ?)", (repr(time.time()),))
        return len(ids)

    # ------------------------------------------------------------------ query side

    _POSTINGS_SQL = "SELECT token_id, segment_id, blob FROM postings WHERE token_id IN ({})"

    def postings(self, token_ids: np.ndarray | Sequence[int], *, dequantize: bool = False) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Posting lists of the given tokens (deduplicated) across all live segments.

        Returns ``[(token_id, sentence_ids int64 ascending, weights), ...]`` -- one tuple per
        (token, segment) that has postings; a token's tuples have disjoint ids.  Weights are the
        stored uint8 values (f = q * ``weight_scale``) unless ``dequantize`` (float32 f).
        Tombstoned sentences are still included: pass ``tombstones()`` as ``exclude``.
        """
        toks = sorted({int(t) for t in token_ids})  # not np.unique: it imports numpy.ma on the ask path
        rows: list[tuple[int, int, bytes]] = []
        for chunk in _chunks(toks):
            rows += self._conn.execute(self._POSTINGS_SQL.format(_qmarks(len(chunk))), chunk).fetchall()
        lists = codec.decode_lists([r[2] for r in rows])
        if dequantize:
            scale = self.weight_scale
            return [(r[0], ids, codec.dequantize(q, scale)) for r, (ids, q) in zip(rows, lists)]
        return [(r[0], ids, q) for r, (ids, q) in zip(rows, lists)]

    def tombstones(self) -> np.ndarray:
        """Ids of tombstoned sentences (their postings still exist until a merge)."""
        return np.fromiter((r[0] for r in self._conn.execute("SELECT sentence_id FROM tombstones")), dtype=np.int64)

    def _read_state(self, c: sqlite3.Connection) -> tuple[np.ndarray, int]:
        """(tombstoned ids sorted, 1 + the largest sentence id ever assigned) for the open read
        transaction's snapshot, cached until the database changes (with the masks of
        ``_filter_mask``, which hold for the same snapshot).

        ``PRAGMA data_version`` changes when another connection commits and ``total_changes``
        when this one writes, so the key is exact for the snapshot (both read inside the txn).
        """
        key = (c.execute("PRAGMA data_version").fetchone()[0], c.total_changes)
        if self._state is None or self._state[0] != key:
            dead = np.sort(self.tombstones())
            size = 1 + (c.execute(
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'sentences'), 0),"
                " coalesce((SELECT max(id) FROM sentences), 0))").fetchone()[0])
            self._state = (key, dead, size, {})
        return self._state[1], self._state[2]

    def _filter_mask(self, c: sqlite3.Connection, file_filter: PathFilter) -> np.ndarray | None:
        """A bool per sentence id (below ``_read_state``'s bound): True for the live sentences of
        the files ``file_filter`` keeps (by path, relative to the roots, and modification time);
        None when it keeps none.  Cached with the snapshot's tombstones (the roots and mtimes
        are of the same snapshot).

        Why ranges: ``write_files`` gives a file's sentences consecutive ids, so one grouped row
        per kept file (read from the sentences_file index) marks them; a file whose ids are not
        consecutive has them listed.  SQLite drops most other files first (``PathFilter.where``).
        """
        masks = self._state[3]
        if file_filter in masks:
            return masks[file_filter]
        size = self._state[2]
        cond, args = file_filter.where("f.path", "f.mtime")
        rows = c.execute("SELECT f.id, f.path, f.mtime, min(s.id), max(s.id), count(*) FROM files f"
                         f" JOIN sentences s ON s.file_id = f.id WHERE {cond} GROUP BY f.id", args).fetchall()
        keep = file_filter.keeps([r[1] for r in rows], roots=self._stored_roots(), mtimes=[r[2] for r in rows])
        ranges = [(r[0], *r[3:]) for r, k in zip(rows, keep) if k]
        if not ranges:
            masks[file_filter] = None
            return None
        fid, lo, hi, n = np.array(ranges, np.int64).T
        whole = hi - lo + 1 == n  # the ids in [lo, hi] are all the file's
        edge = np.zeros(size + 1, np.int8)  # +1 at a range's first id, -1 after its last
        edge[lo[whole]] += 1
        edge[hi[whole] + 1] -= 1
        mask = np.cumsum(edge[:size], dtype=np.int8).astype(bool)  # ranges are disjoint: 0 or 1
        for f in fid[~whole].tolist():
            mask[[r[0] for r in c.execute("SELECT id FROM sentences WHERE file_id = ?", (f,))]] = True
        masks[file_filter] = mask
        return mask

    def search(self, token_ids: np.ndarray | Sequence[int], n: int | None = 10,
               stats: dict | None = None, *, file_filter: PathFilter | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top ``n`` live sentences for a question's token ids -> (sentence_ids, scores f-units).

        Exact (identical to summing every posting), see ``search.top_k_blobs``.  ``stats``, if
        given, receives counters for benchmarks.  ``file_filter``: only sentences of the files
        it keeps are ranked (a mask inside scoring, so pruning stays exact)."""
        # not np.unique: it imports numpy.ma on the ask path
        toks = sorted(set(token_ids.tolist() if isinstance(token_ids, np.ndarray) else map(int, token_ids)))
        rows: list[tuple[int, bytes]] = []
        state = self._state
        if 0 < len(toks) <= _CHUNK and state is not None and (file_filter is None or file_filter in state[3]):
            # one statement is one snapshot: the blobs and data_version together, with no
            # BEGIN/COMMIT round trips; the cached tombstones hold if the version has not moved
            rows = self._conn.execute(self._BLOBS_VERSION_SQL.format(_qmarks(len(toks))), toks).fetchall()
            at = next(i for i in range(len(rows) - 1, -1, -1) if rows[i][0] == -1)  # token ids are >= 0
            if state[0] != (rows.pop(at)[1], self._conn.total_changes):
                rows = []
        if not rows:
            with self.read_transaction() as c:
                for chunk in _chunks(toks):
                    rows += c.execute(self._TOKEN_BLOBS_SQL.format(_qmarks(len(chunk))), chunk).fetchall()
                self._read_state(c)
                if file_filter is not None:
                    self._filter_mask(c, file_filter)
        _, dead, size, masks = self._state
        allow = None if file_filter is None else masks[file_filter]
        if file_filter is not None and allow is None:  # the filter keeps no file
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        scale = self.weight_scale
        by_token: dict[int, list[bytes]] = {}
        for tok, blob in rows:
            by_token.setdefault(tok, []).append(blob)
        # kept between questions: no page faults on a fresh accumulator (zero again on return)
        self._work = _search.work_buffer(size, len(by_token), self._work)
        return _search.top_k_blobs(list(by_token.values()), n, dead, size, scale=scale, stats=stats,
                                   work=self._work, allow=allow)

    _TOKEN_BLOBS_SQL = "SELECT token_id, blob FROM postings WHERE token_id IN ({}) ORDER BY token_id"
    _BLOBS_VERSION_SQL = ("SELECT token_id, blob FROM postings WHERE token_id IN ({})"
                          " UNION ALL SELECT -1, data_version FROM pragma_data_version()")

    def explain(self, token_ids: np.ndarray | Sequence[int], ids: Sequence[int]) -> list[dict[int, float]]:
        """{token_id: f(v, s)} for each sentence id, for the question's tokens."""
        return _search.explain(self.postings(token_ids), np.asarray(ids, dtype=np.int64), scale=self.weight_scale)

    def sentences(self, ids: Sequence[int] | np.ndarray) -> list[dict]:
        """Rows for the given sentence ids, in the same order; ids that no longer exist are
        skipped.  Keys: id, text, context, offset_in_context, path (None if tombstoned),
        page, line, char_start, char_end, file_id."""
        ids = [int(i) for i in ids]
        rows: dict[int, dict] = {}
        for chunk in _chunks(ids):
            for r in self._conn.execute(
                "SELECT s.id, s.text, p.text, s.offset_in_context, f.path, s.page, s.line,"
                " s.char_start, s.char_end, s.file_id FROM sentences s LEFT JOIN files f ON f.id = s.file_id"
                " JOIN paragraphs p ON p.id = s.paragraph_id"
                f" WHERE s.id IN ({_qmarks(len(chunk))})",
                chunk,
            ):
                rows[r[0]] = dict(
                    id=r[0], text=r[1], context=r[2], offset_in_context=r[3], path=r[4],
                    page=r[5], line=r[6], char_start=r[7], char_end=r[8], file_id=r[9],
                )
        return [rows[i] for i in ids if i in rows]

    def stats(self) -> dict:
        c = self._conn
        with self.read_transaction():
            # files indexed; those that could not be read are counted apart, in ``errors``
            n_files = c.execute("SELECT count(*) FROM files WHERE status = 'ok'").fetchone()[0]
            n_sent = c.execute("SELECT count(*) FROM sentences").fetchone()[0]
            n_dead, dead_post = c.execute(
                "SELECT count(*), coalesce(sum(s.n_postings), 0) FROM tombstones t CROSS"
                " JOIN sentences s ON s.id = t.sentence_id"
            ).fetchone()
            n_seg, n_post, n_bytes = c.execute(
                "SELECT count(*), coalesce(sum(n_postings), 0), coalesce(sum(n_bytes), 0) FROM segments"
            ).fetchone()
            errors = [
                dict(path=p, reason=e)
                for p, e in c.execute("SELECT path, error FROM files WHERE status = 'error' ORDER BY path")
            ]
            meta = self.meta()
        size = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                size += os.stat(str(self.path) + suffix).st_size
        last = meta.get("last_update")
        return dict(
            files=n_files,
            sentences=n_sent - n_dead,
            tombstones=n_dead,
            postings=n_post - dead_post,
            posting_bytes=n_bytes,
            segments=n_seg,
            db_bytes=size,
            last_update=float(last) if last is not None else None,
            errors=errors,
            model=meta.get("model"),
            meta=meta,
            schema_version=self.schema_version(),
        )

    def verify(self) -> list[str]:
        """Check internal invariants; returns a list of problems (empty = healthy). Slow-ish."""
        c = self._conn
        problems = []
        with self.read_transaction():
            dead = set(self.tombstones().tolist())
            for fid, path, n in c.execute("SELECT id, path, n_sentences FROM files"):
                live = c.execute("SELECT count(*) FROM sentences WHERE file_id = ?", (fid,)).fetchone()[0]
                if live != n:
                    problems.append(f"{path}: n_sentences={n} but {live} live sentence rows")
            n_bad = c.execute(
                "SELECT count(*) FROM sentences s WHERE (s.file_id IS NULL) !="
                " (s.id IN (SELECT sentence_id FROM tombstones))"
            ).fetchone()[0]
            if n_bad:
                problems.append(f"{n_bad} sentences whose file_id/tombstone state disagree")
            seg_sent = dict(c.execute("SELECT segment_id, count(*) FROM sentences GROUP BY segment_id").fetchall())
            seg_posts: dict[int, dict[int, int]] = {}
            for tok, seg, blob in c.execute("SELECT token_id, segment_id, blob FROM postings"):
                ids, q = codec.decode(blob)
                if len(ids) == 0 or np.any(np.diff(ids) <= 0) or np.any(q == 0):
                    problems.append(f"bad posting list token={tok} segment={seg}")
                d = seg_posts.setdefault(seg, {})
                for i in ids.tolist():
                    d[i] = d.get(i, 0) + 1
            for seg, n_sent, n_post in c.execute("SELECT id, n_sentences, n_postings FROM segments"):
                if seg_sent.get(seg, 0) != n_sent:
                    problems.append(f"segment {seg}: n_sentences={n_sent}, rows={seg_sent.get(seg, 0)}")
                d = seg_posts.get(seg, {})
                if sum(d.values()) != n_post:
                    problems.append(f"segment {seg}: n_postings={n_post}, stored={sum(d.values())}")
                if d:
                    ids = list(d)
                    rows = {}
                    for chunk in _chunks(ids):
                        rows.update(
                            c.execute(
                                f"SELECT id, segment_id FROM sentences WHERE id IN ({_qmarks(len(chunk))})", chunk
                            ).fetchall()
                        )
                    stray = [i for i in ids if rows.get(i) != seg]
                    if stray:
                        problems.append(f"segment {seg}: postings for {len(stray)} sentences not in it")
            counted: dict[int, int] = {}
            for d in seg_posts.values():
                counted.update(d)
            n_wrong = sum(
                1 for sid, n in c.execute("SELECT id, n_postings FROM sentences") if counted.get(sid, 0) != n
            )
            if n_wrong:
                problems.append(f"{n_wrong} sentences whose n_postings disagrees with the postings")
            n_orphan = c.execute(
                "SELECT count(*) FROM tombstones WHERE sentence_id NOT IN (SELECT id FROM sentences)"
            ).fetchone()[0]
            if n_orphan:
                problems.append(f"{n_orphan} tombstones without sentence rows")
            if dead and not c.execute("SELECT count(*) FROM segments").fetchone()[0]:
                problems.append("tombstones but no segments")
        return problems
