"""Read-only reports on an index: ``stats`` (for `status`) and ``verify`` (its invariants)."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

import numpy as np

from sparc_local.model.info import INDEX_MODEL_KEY

from . import postings as codec
from .db import LAST_UPDATE, chunks, qmarks
from .records import FileStatus

if TYPE_CHECKING:
    from .db import Database



def stats(index: Database) -> dict:
    """Counts, sizes, errors and meta for `status`."""
    c = index.conn
    with index.read_transaction():
        # files indexed; those that could not be read are counted apart, in ``errors``
        n_files = c.execute(f"SELECT count(*) FROM files WHERE status = '{FileStatus.OK}'").fetchone()[0]
        n_sent = c.execute("SELECT count(*) FROM sentences").fetchone()[0]
        # stored with their BM25 postings, not encoded yet (progressive indexing)
        n_pending = c.execute("SELECT count(*) FROM sentences WHERE encoded = 0 AND file_id IS NOT NULL").fetchone()[0]
        n_dead, dead_post = c.execute(
            "SELECT count(*), coalesce(sum(s.n_postings), 0) FROM tombstones t CROSS"
            " JOIN sentences s ON s.id = t.sentence_id"
        ).fetchone()
        n_seg, n_post, n_bytes = c.execute(
            "SELECT count(*), coalesce(sum(n_postings), 0), coalesce(sum(n_bytes), 0) FROM segments"
        ).fetchone()
        errors = [
            dict(path=p, reason=e)
            for p, e in c.execute(f"SELECT path, error FROM files WHERE status = '{FileStatus.ERROR}' ORDER BY path")
        ]
        meta = index.meta()
    size = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):
            size += os.stat(str(index.path) + suffix).st_size
    last = meta.get(LAST_UPDATE)
    return dict(
        files=n_files,
        sentences=n_sent - n_dead,
        encoded=n_sent - n_dead - n_pending,
        tombstones=n_dead,
        postings=n_post - dead_post,
        posting_bytes=n_bytes,
        segments=n_seg,
        db_bytes=size,
        last_update=float(last) if last is not None else None,
        errors=errors,
        model=meta.get(INDEX_MODEL_KEY),
        meta=meta,
        schema_version=index.schema_version(),
    )


def verify(index: Database) -> list[str]:
    """Check internal invariants; returns a list of problems (empty = healthy). Slow-ish."""
    c = index.conn
    problems = []
    with index.read_transaction():
        dead = {r[0] for r in c.execute("SELECT sentence_id FROM tombstones")}
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
            elif codec.bound(blob) != q.max():  # the hybrid scales each field by these maxima
                problems.append(f"posting list token={tok} segment={seg}: header's largest weight "
                                f"{codec.bound(blob)}, the list's {int(q.max())}")
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
                held = list(d)
                rows: dict[int, int] = {}
                for chunk in chunks(held):
                    rows.update(
                        c.execute(
                            f"SELECT id, segment_id FROM sentences WHERE id IN ({qmarks(len(chunk))})", chunk
                        ).fetchall()
                    )
                stray = [i for i in held if rows.get(i) != seg]
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
