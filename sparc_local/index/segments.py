"""Segments and their merge policy: writing a batch's postings, listing, tiered merges,
compaction, full merges, scrub.

A segment is the immutable set of posting blobs one ``write_files`` batch added (see
``store.py``): one blob per token, encoded by ``postings.py``.  Merging rewrites some segments
as one, without their tombstoned sentences.  Every merge is one transaction, so a kill leaves
either the old segments or the new one.  ``Segments`` works through a ``db.Database``'s public
connection and transactions.
"""

from __future__ import annotations

import sqlite3
import time

import numpy as np

from . import postings as codec
from .db import Database, chunks, is_busy, qmarks

MERGE_FACTOR = 10
MIN_MERGE_POSTINGS = 10_000  # segments below this many live postings are all "level 0"
MAX_DELETED_RATIO = 0.3  # a segment with more tombstoned sentences than this is rewritten
FULL_MERGE_SHARE = 4  # compact(): one segment once those beside the biggest hold 1/4 of the live sentences
MERGE_CHUNK_BYTES = 4 << 20  # blob bytes decoded at once while merging (~1.6M postings)
SCRUB_PENDING = "scrub_pending"  # meta key: deleted text may still lie in free pages or the WAL


def _level(live_postings: int, merge_factor: int) -> int:
    if live_postings < MIN_MERGE_POSTINGS:
        return 0
    level, size = 1, MIN_MERGE_POSTINGS * merge_factor
    while live_postings >= size:
        level += 1
        size *= merge_factor
    return level


def _write_postings(c: sqlite3.Connection, segment_id: int, tok_parts: list[np.ndarray], sid_parts: list[np.ndarray],
                    w_parts: list[np.ndarray], scale: float) -> tuple[int, int]:
    """Encode and insert a batch's postings as one blob per token -> (postings, blob bytes)."""
    if not tok_parts:
        return 0, 0
    # the parts are let go as soon as they are joined: a batch's postings are held once, not twice
    toks = np.concatenate(tok_parts)
    tok_parts.clear()
    sids = np.concatenate(sid_parts)
    sid_parts.clear()
    w = np.concatenate(w_parts)
    w_parts.clear()
    if len(w) and not np.all(np.isfinite(w)):
        raise ValueError("non-finite sparse weight")
    q = codec.quantize(w, scale)
    del w
    keep = q > 0
    if not keep.all():
        # recount per-sentence postings
        dropped_ids, dropped_n = np.unique(sids[~keep], return_counts=True)
        toks, sids, q = toks[keep], sids[keep], q[keep]
        c.executemany(
            "UPDATE sentences SET n_postings = n_postings - ? WHERE id = ?",
            zip(dropped_n.tolist(), dropped_ids.tolist()),
        )
    del keep
    order = np.argsort(toks, kind="stable")  # sids already ascending in input order
    toks = toks[order]
    sids = sids[order]
    q = q[order]
    del order
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


def _inserted_id(cur: sqlite3.Cursor) -> int:
    """The rowid of the row an INSERT just added (``lastrowid`` is None before any insert)."""
    rowid = cur.lastrowid
    assert rowid is not None
    return rowid


class Segments:
    """The segments of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, c: sqlite3.Connection, now: float) -> int:
        """A new empty segment (inside the caller's write transaction); ``fill`` it."""
        return _inserted_id(c.execute("INSERT INTO segments(n_sentences, n_postings, n_bytes, level, created_at)"
                                      " VALUES (0, 0, 0, 0, ?)", (now,)))

    def fill(self, c: sqlite3.Connection, segment_id: int, n_sentences: int, tok_parts: list[np.ndarray],
             sid_parts: list[np.ndarray], w_parts: list[np.ndarray], scale: float) -> None:
        """Write a batch's postings (per sentence: token ids, its id repeated, float weights) as
        segment ``segment_id``'s blobs, quantized with ``scale``, and record its counts."""
        n_post, n_bytes = _write_postings(c, segment_id, tok_parts, sid_parts, w_parts, scale)
        # postings that quantized to 0 were dropped: keep sentence counts exact
        c.execute(
            "UPDATE segments SET n_sentences = ?, n_postings = ?, n_bytes = ?, level = ? WHERE id = ?",
            (n_sentences, n_post, n_bytes, _level(n_post, MERGE_FACTOR), segment_id),
        )

    def describe(self) -> list[dict]:
        """Every segment with its live counts, oldest first."""
        dead = {
            r[0]: (r[1], r[2])
            for r in self.db.conn.execute(
                "SELECT s.segment_id, count(*), coalesce(sum(s.n_postings), 0)"
                " FROM tombstones t CROSS JOIN sentences s ON s.id = t.sentence_id GROUP BY s.segment_id"
            )
        }
        out = []
        for sid, n_sent, n_post, n_bytes, level, created in self.db.conn.execute(
            "SELECT id, n_sentences, n_postings, n_bytes, level, created_at FROM segments ORDER BY id"
        ):
            d_sent, d_post = dead.get(sid, (0, 0))
            out.append(
                dict(
                    id=sid, n_sentences=n_sent, n_postings=n_post, n_bytes=n_bytes, level=level,
                    created_at=created, deleted_sentences=d_sent, live_sentences=n_sent - d_sent,
                    live_postings=n_post - d_post,
                )
            )
        return out

    def _merge_plan(self, merge_factor: int, max_deleted_ratio: float) -> list[int] | None:
        segs = self.describe()
        by_level: dict[int, list[dict]] = {}
        for s in segs:
            by_level.setdefault(_level(s["live_postings"], merge_factor), []).append(s)
        for level in sorted(by_level):
            group = by_level[level]
            if len(group) >= merge_factor:
                return [s["id"] for s in group]
        for s in segs:
            if s["deleted_sentences"] and (
                s["live_sentences"] == 0 or s["deleted_sentences"] > max_deleted_ratio * s["n_sentences"]
            ):
                return [s["id"]]
        return None

    def maybe_merge(self, merge_factor: int = MERGE_FACTOR, max_deleted_ratio: float = MAX_DELETED_RATIO) -> int:
        """Tiered merging: whenever ``merge_factor`` or more segments share a size level
        (level = log_{merge_factor} of live postings, small ones all level 0), merge them into
        one; rewrite a segment whose tombstoned share exceeds ``max_deleted_ratio``.  Each merge
        is its own transaction.  Returns the number of merges done."""
        merges = 0
        while True:
            with self.db.write_transaction() as c:
                plan = self._merge_plan(merge_factor, max_deleted_ratio)
                if plan is None:
                    return merges
                self.merge(c, plan)
            merges += 1

    def compact(self, merge_factor: int = MERGE_FACTOR) -> bool:
        """The end of a full `index` run, and the watcher when idle: merge every segment into
        one if the segments beside the biggest hold at least 1/``FULL_MERGE_SHARE`` of the live
        sentences, else every segment holding less than 1/``merge_factor`` of the live postings
        into one, if there are two or more.  Returns whether it merged.

        Why: a question pays a fixed cost per segment (a blob per question token to fetch and
        decode), and tiered merging leaves up to ``merge_factor - 1`` segments on every size
        level.  Measured: one segment instead of tiered merging's three answered 15% faster at
        100k sentences (p50) and 9% at 1M.  Bounded: a full merge comes only after the index
        grew by a third since the biggest segment was written, so a sentence is rewritten a
        few times over an index's life, as in tiered merging (a full merge took 4 s at
        100k sentences and 33 s at 1M; a first `index` of them encodes for far longer).
        Otherwise only segments below 1/``merge_factor`` of the index are rewritten.
        Either way the free pages go back to the filesystem, so the file ends near its size.
        """
        with self.db.write_transaction() as c:
            segs = self.describe()
            live = [s["live_sentences"] for s in segs]
            if len(segs) >= 2 and (sum(live) - max(live)) * FULL_MERGE_SHARE >= sum(live):
                merge = [s["id"] for s in segs]
            else:
                total = sum(s["live_postings"] for s in segs)
                merge = [s["id"] for s in segs if s["live_postings"] * merge_factor < total]
            merged = len(merge) >= 2
            if merged:
                self.merge(c, merge)
        # the pages of every segment merged away, here or by the tiered merges before (measured:
        # ten batches that tiered merging had made one segment left 11 MB free in a 15.5 MB file)
        self._reclaim()
        return merged

    def _reclaim(self) -> None:
        """Return free pages to the filesystem.  executescript steps the pragma to completion
        (execute() frees only one page) but COMMITs an open transaction first, so inside a
        caller's transaction it is left to the caller (`forget` VACUUMs after its commit)."""
        if not self.db.conn.in_transaction:
            self.db.conn.executescript("PRAGMA incremental_vacuum;")

    def merge_all(self, *, reclaim: bool = True) -> None:
        """Optimize: merge every segment into one and purge all tombstones, in one transaction.
        ``reclaim``: then return the freed pages to the filesystem (incremental_vacuum)."""
        with self.db.write_transaction() as c:
            ids = [r[0] for r in c.execute("SELECT id FROM segments ORDER BY id")]
            n_dead = c.execute("SELECT count(*) FROM tombstones").fetchone()[0]
            if len(ids) > 1 or (ids and n_dead):
                self.merge(c, ids)
        if reclaim:
            self._reclaim()

    def purge_deleted(self) -> None:
        """Step 1 of scrubbing deleted text (for `forget`): delete every tombstoned row by a full
        merge, and record that the files still need step 2 (``finish_scrub``).  A transaction
        (nests in the caller's), so it commits together with the deletion it purges."""
        with self.db.write_transaction() as c:
            c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (SCRUB_PENDING,))
            self.merge_all(reclaim=False)

    def finish_scrub(self) -> bool:
        """Step 2, outside any transaction (VACUUM cannot run in one): make text deleted by step 1
        unrecoverable from the database files.  VACUUM rewrites the file without the free pages
        that may still hold it; a TRUNCATE checkpoint empties the WAL, which holds old page
        images too.  Only then is the pending mark cleared, so a kill anywhere in between leaves
        it set and the next call does the work again (VACUUM is idempotent).  Returns whether the
        files are clean; False when a reader kept the database or its WAL busy (the mark stays).
        """
        c = self.db.conn
        if c.execute("SELECT 1 FROM meta WHERE key = ?", (SCRUB_PENDING,)).fetchone() is None:
            return True
        try:
            c.execute("VACUUM")
            if c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:  # busy: a reader holds old frames
                return False
        except sqlite3.OperationalError as err:
            if is_busy(err):
                return False
            raise
        with self.db.write_transaction() as c:
            c.execute("DELETE FROM meta WHERE key = ?", (SCRUB_PENDING,))
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL now holds only that meta page
        return True

    def merge(self, c: sqlite3.Connection, seg_ids: list[int]) -> int | None:
        """Rewrite ``seg_ids`` as one segment without tombstoned sentences (inside a txn)."""
        c.execute("CREATE TEMP TABLE IF NOT EXISTS merge_segs(id INTEGER PRIMARY KEY)")
        c.execute("DELETE FROM temp.merge_segs")
        c.executemany("INSERT INTO temp.merge_segs(id) VALUES (?)", [(s,) for s in seg_ids])
        dead = np.fromiter(
            (r[0] for r in c.execute(
                "SELECT t.sentence_id FROM tombstones t JOIN sentences s ON s.id = t.sentence_id"
                " WHERE s.segment_id IN (SELECT id FROM temp.merge_segs)"
            )),
            dtype=np.int64,
        )
        n_sent = c.execute(
            "SELECT count(*) FROM sentences WHERE segment_id IN (SELECT id FROM temp.merge_segs)"
        ).fetchone()[0]
        n_live = n_sent - len(dead)
        new_id = None
        if n_live > 0:
            new_id = _inserted_id(c.execute(
                "INSERT INTO segments(n_sentences, n_postings, n_bytes, level, created_at) VALUES (?, 0, 0, 0, ?)",
                (n_live, time.time()),
            ))
            n_post, n_bytes = Segments._merge_postings(c, new_id, dead)
            c.execute(
                "UPDATE segments SET n_postings = ?, n_bytes = ?, level = ? WHERE id = ?",
                (n_post, n_bytes, _level(n_post, MERGE_FACTOR), new_id),
            )
        c.execute(
            "DELETE FROM tombstones WHERE sentence_id IN"
            " (SELECT id FROM sentences WHERE segment_id IN (SELECT id FROM temp.merge_segs))"
        )
        if len(dead):
            for chunk in chunks(dead.tolist()):
                marks = qmarks(len(chunk))
                pids = [r[0] for r in c.execute(
                    f"SELECT DISTINCT paragraph_id FROM sentences WHERE id IN ({marks})", chunk)]
                c.execute(f"DELETE FROM sentences WHERE id IN ({marks})", chunk)
                for pchunk in chunks(pids):
                    c.execute(f"DELETE FROM paragraphs WHERE id IN ({qmarks(len(pchunk))}) AND NOT EXISTS"
                              " (SELECT 1 FROM sentences s WHERE s.paragraph_id = paragraphs.id)", pchunk)
        if new_id is not None:
            c.execute(
                "UPDATE sentences SET segment_id = ? WHERE segment_id IN (SELECT id FROM temp.merge_segs)",
                (new_id,),
            )
        c.execute("DELETE FROM postings WHERE segment_id IN (SELECT id FROM temp.merge_segs)")
        c.execute("DELETE FROM segments WHERE id IN (SELECT id FROM temp.merge_segs)")
        c.execute("DELETE FROM temp.merge_segs")
        return new_id

    @staticmethod
    def _merge_postings(c: sqlite3.Connection, new_id: int, dead: np.ndarray) -> tuple[int, int]:
        """Stream the postings of temp.merge_segs in token order, in chunks of about
        MERGE_CHUNK_BYTES of blobs (bounded memory), into segment ``new_id``."""
        c.execute("CREATE TEMP TABLE IF NOT EXISTS merge_out(token_id INTEGER, blob BLOB)")
        c.execute("DELETE FROM temp.merge_out")
        n_post = n_bytes = 0
        toks: list[int] = []
        blobs: list[bytes] = []
        size = 0

        def flush() -> None:
            nonlocal n_post, n_bytes
            if not blobs:
                return
            counts, S, Q = codec.decode_many(blobs)
            T = np.repeat(np.asarray(toks, np.int64), counts)
            if len(dead):
                keep = ~np.isin(S, dead)
                T, S, Q = T[keep], S[keep], Q[keep]
            order = np.lexsort((S, T))
            groups = codec.encode_groups(T[order], S[order], Q[order])
            # new rows go to a temp table: never write postings while a cursor reads it
            c.executemany("INSERT INTO temp.merge_out(token_id, blob) VALUES (?, ?)", groups)
            n_post += len(T)
            n_bytes += sum(len(g[1]) for g in groups)
            toks.clear()
            blobs.clear()

        cur = c.execute(
            "SELECT token_id, blob FROM postings WHERE segment_id IN (SELECT id FROM temp.merge_segs)"
            " ORDER BY token_id"
        )
        while rows := cur.fetchmany(4096):
            for tok, blob in rows:
                if size >= MERGE_CHUNK_BYTES and tok != toks[-1]:
                    flush()
                    size = 0
                toks.append(tok)
                blobs.append(blob)
                size += len(blob)
        flush()
        c.execute(
            "INSERT INTO postings(token_id, segment_id, blob) SELECT token_id, ?, blob FROM temp.merge_out"
            " ORDER BY rowid",
            (new_id,),
        )
        c.execute("DELETE FROM temp.merge_out")
        return n_post, n_bytes
