"""The index: files, sentences and segmented posting lists in one SQLite database (WAL).

Layout (Lucene-style):

* Every ``write_files`` batch adds ONE immutable *segment*: one posting-list blob per token
  (see ``postings.py`` for the blob format) covering the batch's new sentences.
* Re-indexing or removing a file *tombstones* its old sentences (row in ``tombstones``,
  ``sentences.file_id`` set to NULL).  Their postings stay in their segment; a query drops
  them with the tombstone id list (``tombstones()``).
* ``maybe_merge`` rewrites groups of similar-sized segments (or a segment with many
  tombstones) into one, dropping tombstoned sentences' postings, sentence rows and
  tombstones.  ``compact`` (the end of a full `index` run) merges every segment below a tenth
  of the index into one, since a query pays per segment.  ``merge_all`` merges everything into
  one segment.  Sentence ids never change.  These live in ``segments.py``.
* The connection, migrations, meta and transactions are ``db.py``'s (``Index`` is a
  ``Database``).  A user action made of several mutations (`forget`) commits once.
* A path `forget` removed is recorded (meta ``FORGOTTEN``) and ``write_files`` never writes a
  file at or under it, whoever the writer is, until the user names the path again
  (``add_roots``).

The index stores and returns blobs and rows; it knows nothing of scoring (``query/searcher.py``
reads ``token_blobs`` and scores them).  A query reads only the rows of its own tokens:
``WHERE token_id IN (...)`` is a SEARCH of the unique index postings(token_id, segment_id),
then one rowid lookup per (token, segment) row.

Files that fail to read (``FileUpdate.error`` set) are recorded with status 'error', the
reason, and their size/mtime/hash (so the indexer does not retry an unchanged file; it counts it
as still unreadable); any sentences indexed from an earlier successful read are tombstoned -- the
index never answers from content it can no longer vouch for.

Keep module-level imports light: this is on the ``ask`` path.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence

import numpy as np

from sparc_local.model.lexical import as_pending
from sparc_local.model.sparse import SparseVectors
from sparc_local.paths import is_under

from . import positions
from . import postings as codec
from .db import LAST_UPDATE, Database, chunks, qmarks
from .filters import FileFilter, under, where
from .reads import SentenceReads
from .records import FILE_COLS, STORED_SENTENCE_SQL, FileRecord, FileStatus, FileUpdate, SentenceRow, StoredSentence  # noqa: F401 (the API's types)
from .schema import MIGRATIONS, SCHEMA_VERSION  # noqa: F401 (the schema's names, read by callers)
from .segments import MAX_DELETED_RATIO, MERGE_FACTOR, Segments

FORGOTTEN = "forgotten"  # meta key: JSON list of the paths `forget` removed


def _covered(path: str, roots: Iterable[str]) -> bool:
    """Whether a walk of another root reaches ``path``: it lies below that root and no name on the
    way is hidden (a walk skips those, and `--hidden` is not remembered with the root)."""
    for root in roots:
        if path != root and is_under(path, root):
            if not any(part.startswith(".") for part in path[len(root.rstrip(os.sep)) + 1:].split(os.sep)):
                return True
    return False


class Index(SentenceReads, Database):
    """A sparc-local index database: files, sentences, roots, and its ``Segments``.
    Not thread-safe: use one Index per thread."""

    def __init__(self, path: str | os.PathLike | None = None, **kwargs) -> None:
        super().__init__(path, **kwargs)
        self.segs = Segments(self)

    def _touch(self, c: sqlite3.Connection, now: float | None = None) -> None:
        c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                  (LAST_UPDATE, repr(time.time() if now is None else now)))

    # ------------------------------------------------------------------ roots

    def stored_roots(self) -> list[str]:
        """Every root row, covered or not (a filter reads paths relative to the deepest)."""
        return [r[0] for r in self._conn.execute("SELECT path FROM roots ORDER BY path")]

    def roots(self) -> list[str]:
        """The paths the user named to index, except those a walk of another root reaches."""
        stored = self.stored_roots()
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
            stored = self.stored_roots()
            every = set(stored) | set(named)
            c.executemany("INSERT OR IGNORE INTO roots(path) VALUES (?)",
                          [(p,) for p in named if not _covered(p, every)])
            c.executemany("DELETE FROM roots WHERE path = ?", [(r,) for r in stored if _covered(r, every)])

    def remove_roots_under(self, prefix: str | os.PathLike) -> int:
        """Drop the roots at or below ``prefix``; returns how many."""
        cond, args = under(str(prefix))
        with self.write_transaction() as c:
            return c.execute(f"DELETE FROM roots WHERE {cond}", args).rowcount

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
        row = self._conn.execute(f"SELECT {FILE_COLS} FROM files WHERE path = ?", (str(path),)).fetchone()
        return None if row is None else FileRecord(*row)

    def all_files(self) -> list[FileRecord]:
        return [FileRecord(*r) for r in self._conn.execute(f"SELECT {FILE_COLS} FROM files ORDER BY path")]

    def _tombstone_file(self, c: sqlite3.Connection, file_id: int) -> None:
        c.execute("INSERT OR IGNORE INTO tombstones(sentence_id) SELECT id FROM sentences WHERE file_id = ?", (file_id,))
        c.execute("UPDATE sentences SET file_id = NULL WHERE file_id = ?", (file_id,))

    def write_files(self, updates: Sequence[FileUpdate], *, merge: bool = True) -> int | None:
        """Apply a batch of file updates in ONE transaction; returns the new segment id (or None).

        Per file: tombstone its old sentences, upsert its row, insert its new sentences.  All
        new sentences' postings form one new segment.  If a path occurs twice, the last wins.
        A file with lexical postings and no vectors is stored not encoded yet (``pending_files``).
        With ``merge=True``, ``maybe_merge()`` runs afterwards (its own transaction).
        """
        latest: dict[str, FileUpdate] = {}
        for u in updates:
            latest[str(u.path)] = u
        batch = list(latest.values())
        for u in batch:
            rows = u.vectors if u.vectors is not None else u.lexical  # lexical only: stored now, encoded later
            n_vec = 0 if rows is None else len(rows)
            if u.error is None and n_vec != len(u.sentences):
                raise ValueError(f"{u.path}: {len(u.sentences)} sentences but {n_vec} vectors")
            if u.error is None and u.lexical is not None and len(u.lexical) != len(u.sentences):
                raise ValueError(f"{u.path}: {len(u.sentences)} sentences but {len(u.lexical)} lexical rows")
        if not batch:
            return None
        # built before the transaction: the write lock is not held for this CPU work
        phrase = {str(u.path): [positions.encode(u.vectors.row(i)[0], u.vectors.row_positions(i))  # type: ignore[arg-type]  # encoded rows have positions
                                for i in range(len(u.vectors))]
                  for u in batch if u.error is None and u.vectors is not None and u.vectors.positions is not None}
        now = time.time()
        segment_id = None
        with self.write_transaction() as c:
            # the one check every writer (index, watch, adapt) passes: forgotten stays forgotten
            forgotten = self.forgotten()
            batch = [u for u in batch if not (forgotten and self.is_forgotten(str(u.path), forgotten))]
            if not batch:
                return None
            scale = self.scale_in_txn(c)
            n_new = sum(len(u.sentences) for u in batch if u.error is None)
            if n_new:
                segment_id = self.segs.create(c, now)
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
                    (path, int(u.size), float(u.mtime), str(u.hash), FileStatus.OK if ok else FileStatus.ERROR, u.error, n, now),
                )
                if not n:
                    continue
                file_id = old[0] if old is not None else c.execute(
                    "SELECT id FROM files WHERE path = ?", (path,)
                ).fetchone()[0]
                vec, lexical = u.vectors, u.lexical
                pending = vec is None
                if pending:  # the lexical postings alone, in the fields of sentences not encoded yet
                    assert lexical is not None
                    lexical = SparseVectors(lexical.indptr, as_pending(lexical.token_ids), lexical.weights)
                counts = sum((np.diff(v.indptr) for v in (vec, lexical) if v is not None), np.zeros(n, np.int64))
                ids = np.arange(next_id, next_id + n, dtype=np.int64)
                paragraph: dict[str, int] = {}
                for row in u.sentences:
                    if row.context not in paragraph:
                        paragraph[row.context] = c.execute(
                            "INSERT INTO paragraphs(text) VALUES (?) RETURNING id", (row.context,)).fetchone()[0]
                c.executemany(
                    "INSERT INTO sentences(id, file_id, segment_id, text, paragraph_id, offset_in_context,"
                    " page, line, char_start, char_end, n_postings, encoded) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    [
                        (sid, file_id, segment_id, s.text, paragraph[s.context], s.offset_in_context,
                         s.page, s.line, s.char_start, s.char_end, cnt, int(not pending))
                        for sid, s, cnt in zip(ids.tolist(), u.sentences, counts.tolist())
                    ],
                )
                if path in phrase:
                    c.executemany("INSERT INTO positions(sentence_id, blob) VALUES (?, ?)", zip(ids.tolist(), phrase[path]))
                for v in (vec, lexical):
                    if v is None:
                        continue
                    a, b = int(v.indptr[0]), int(v.indptr[-1])
                    tok_parts.append(np.asarray(v.token_ids[a:b], dtype=np.int64))
                    sid_parts.append(np.repeat(ids, np.diff(v.indptr)))
                    w_parts.append(np.asarray(v.weights[a:b], dtype=np.float32))
                next_id += n
            if segment_id is not None:
                self.segs.fill(c, segment_id, n_new, tok_parts, sid_parts, w_parts, scale)
            self._touch(c, now)
        if merge:
            self.maybe_merge()
        return segment_id

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
                self._touch(c)
        return removed

    def count_under(self, prefix: str | os.PathLike) -> tuple[int, int]:
        """(files indexed, files recorded as unreadable) at or below ``prefix``."""
        cond, args = under(str(prefix))
        row = self._conn.execute(f"SELECT coalesce(sum(status = '{FileStatus.OK}'), 0), coalesce(sum(status = '{FileStatus.ERROR}'), 0)"
                                 f" FROM files WHERE {cond}", args).fetchone()
        return row[0], row[1]

    def remove_under(self, prefix: str | os.PathLike) -> int:
        """Remove ``prefix`` itself and every file below it (path-component aware:
        removing /a/b does not touch /a/bc). Returns the number of files removed."""
        cond, args = under(str(prefix))
        with self.write_transaction() as c:
            ids = [r[0] for r in c.execute(f"SELECT id FROM files WHERE {cond}", args)]
            for fid in ids:
                self._tombstone_file(c, fid)
            for chunk in chunks(ids):
                c.execute(f"DELETE FROM files WHERE id IN ({qmarks(len(chunk))})", chunk)
            if ids:
                self._touch(c)
        return len(ids)

    # ------------------------------------------------------------------ reads

    _TOKEN_BLOBS_SQL = "SELECT token_id, blob FROM postings WHERE token_id IN ({}) ORDER BY token_id"
    _BLOBS_VERSION_SQL = ("SELECT token_id, blob FROM postings WHERE token_id IN ({})"
                          " UNION ALL SELECT -1, data_version FROM pragma_data_version()")

    def token_blobs(self, tokens: Sequence[int]) -> list[tuple[int, bytes]]:
        """(token_id, blob) of every live segment's posting list of ``tokens`` (distinct ints),
        grouped by token.  Call inside a read transaction to pair them with other reads."""
        rows: list[tuple[int, bytes]] = []
        for chunk in chunks(tokens):
            rows += self._conn.execute(self._TOKEN_BLOBS_SQL.format(qmarks(len(chunk))), chunk).fetchall()
        return rows

    def token_blobs_versioned(self, tokens: Sequence[int]) -> tuple[list[tuple[int, bytes]], tuple[int, int]]:
        """``token_blobs`` of at most ``db.MAX_PARAMS`` tokens and the ``snapshot_key`` of the
        snapshot they come from, in ONE statement: no BEGIN/COMMIT round trips for a question."""
        rows = self._conn.execute(self._BLOBS_VERSION_SQL.format(qmarks(len(tokens))), tokens).fetchall()
        at = next(i for i in range(len(rows) - 1, -1, -1) if rows[i][0] == -1)  # token ids are >= 0
        return rows, self.snapshot_key(rows.pop(at)[1])

    def postings(self, token_ids: np.ndarray | Sequence[int], *, dequantize: bool = False) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Decoded posting lists of the given tokens (deduplicated) across all live segments.

        Returns ``[(token_id, sentence_ids int64 ascending, weights), ...]`` -- one tuple per
        (token, segment) that has postings; a token's tuples have disjoint ids.  Weights are the
        stored uint8 values (f = q * ``weight_scale``) unless ``dequantize`` (float32 f).
        Tombstoned sentences are still included: pass ``tombstones()`` as ``exclude``.
        """
        rows = self.token_blobs(sorted({int(t) for t in token_ids}))  # not np.unique: it imports numpy.ma
        lists = codec.decode_lists([r[1] for r in rows])
        if dequantize:
            scale = self.weight_scale
            return [(r[0], ids, codec.dequantize(q, scale)) for r, (ids, q) in zip(rows, lists)]
        return [(r[0], ids, q) for r, (ids, q) in zip(rows, lists)]

    def tombstones(self) -> np.ndarray:
        """Ids of tombstoned sentences (their postings still exist until a merge)."""
        return np.fromiter((r[0] for r in self._conn.execute("SELECT sentence_id FROM tombstones")), dtype=np.int64)

    def id_bound(self) -> int:
        """1 + the largest sentence id ever assigned: every id, live or purged, is below it."""
        return 1 + self._conn.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'sentences'), 0),"
            " coalesce((SELECT max(id) FROM sentences), 0))").fetchone()[0]

    def file_id_ranges(self, file_filter: FileFilter) -> list[tuple[int, str, float, int, int, int]]:
        """(file id, path, mtime, min, max and count of its live sentence ids) of every file
        with live sentences, among them all that ``file_filter`` keeps (``filters.where``: a
        superset, which the caller tests exactly).  ``write_files`` gives a file's sentences
        consecutive ids, so min and max usually say them all (``file_sentence_ids`` when count
        says otherwise)."""
        cond, args = where(file_filter, "f.path", "f.mtime")
        return self._conn.execute(
            "SELECT f.id, f.path, f.mtime, min(s.id), max(s.id), count(*) FROM files f"
            f" JOIN sentences s ON s.file_id = f.id WHERE {cond} GROUP BY f.id", args).fetchall()

    def pending_files(self) -> list[FileRecord]:
        """Files whose sentences are stored but not encoded yet (progressive indexing), oldest first."""
        return [FileRecord(*r) for r in self._conn.execute(
            f"SELECT {FILE_COLS} FROM files WHERE id IN"
            " (SELECT DISTINCT file_id FROM sentences WHERE encoded = 0 AND file_id IS NOT NULL) ORDER BY id")]

    def encoded_counts(self) -> tuple[int, int]:
        """(encoded, all) live sentences: `status` and the progress line show the encoder's share."""
        pending = self._conn.execute(
            "SELECT count(*) FROM sentences WHERE encoded = 0 AND file_id IS NOT NULL").fetchone()[0]
        total = self._conn.execute("SELECT count(*) FROM sentences WHERE file_id IS NOT NULL").fetchone()[0]
        return total - pending, total

    def sentences_written(self) -> int:
        """Sentences in the segments, deleted ones not merged away yet included (BM25's N)."""
        return int(self.conn.execute("SELECT coalesce(sum(n_sentences), 0) FROM segments").fetchone()[0])

    def file_sentence_ids(self, file_id: int) -> list[int]:
        return [r[0] for r in self._conn.execute("SELECT id FROM sentences WHERE file_id = ?", (file_id,))]

    def live_sentence_ids(self) -> np.ndarray:
        """Ids of every sentence that belongs to a file (not tombstoned), ascending."""
        rows = self._conn.execute("SELECT id FROM sentences WHERE file_id IS NOT NULL ORDER BY id")
        return np.fromiter((r[0] for r in rows), dtype=np.int64)

    def sentence_ids_by_file(self) -> dict[int, list[int]]:
        """{file id: its live sentence ids, ascending}, files in id order."""
        out: dict[int, list[int]] = {}
        for sid, fid in self._conn.execute(
                "SELECT id, file_id FROM sentences WHERE file_id IS NOT NULL ORDER BY file_id, id"):
            out.setdefault(fid, []).append(sid)
        return out

    def sentence_ids_by_path(self) -> list[int]:
        """Ids of the live sentences, by file path, then id (the order a file's rows were written)."""
        return [r[0] for r in self._conn.execute(
            "SELECT s.id FROM sentences s JOIN files f ON f.id = s.file_id ORDER BY f.path, s.id")]

    def stats(self) -> dict:
        """Counts, sizes, errors and meta for `status`."""
        from .health import stats

        return stats(self)

    def verify(self) -> list[str]:
        """Check internal invariants; returns a list of problems (empty = healthy). Slow-ish."""
        from .health import verify

        return verify(self)

    # ------------------------------------------------------------------ segments (segments.py)

    def segments(self) -> list[dict]:
        """Every segment with its live counts, oldest first."""
        return self.segs.describe()

    def maybe_merge(self, merge_factor: int = MERGE_FACTOR, max_deleted_ratio: float = MAX_DELETED_RATIO) -> int:
        return self.segs.maybe_merge(merge_factor, max_deleted_ratio)

    def compact(self, merge_factor: int = MERGE_FACTOR) -> bool:
        return self.segs.compact(merge_factor)

    def merge_all(self, *, reclaim: bool = True) -> None:
        self.segs.merge_all(reclaim=reclaim)

    def purge_deleted(self) -> None:
        self.segs.purge_deleted()

    def finish_scrub(self) -> bool:
        return self.segs.finish_scrub()
