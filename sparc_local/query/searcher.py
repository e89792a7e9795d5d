"""The read path of a question: posting blobs from the index, scored by ``scoring.py``; the
local ``engine.Engine``.

A ``Searcher`` owns the query state the index must not hold: the snapshot's tombstones, id
bound and filter masks (cached until the database changes) and the accumulator kept between
questions.  ``search`` and ``explain`` read blobs the same way (``Index.token_blobs``).

Keep module-level imports light: this is on the ``ask`` path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sparc_local.index import postings as codec
from sparc_local.index.db import MAX_PARAMS
from sparc_local.index.records import StoredSentence
from sparc_local.index.store import Index
from sparc_local.model.lexical import FIELD_BASE, PARAGRAPH_FIELD, PENDING
from sparc_local.query import fusion, maxscore, scoring
from sparc_local.query.modes import SPARC
from sparc_local.query.pathfilter import PathFilter


@dataclass
class _Snapshot:
    """What holds for one database snapshot: tombstoned ids (sorted), the id bound, and the
    sentence mask of each filter asked (None: it keeps no sentence)."""

    key: tuple[int, int]
    dead: np.ndarray
    size: int
    written: int  # sentences written to the segments (BM25's N, see fusion.py)
    masks: dict[PathFilter, np.ndarray | None] = field(default_factory=dict)


def _distinct(token_ids: np.ndarray | Sequence[int]) -> list[int]:
    """Sorted distinct token ids; not np.unique: it imports numpy.ma on the ask path."""
    return sorted(set(token_ids.tolist() if isinstance(token_ids, np.ndarray) else map(int, token_ids)))


class Searcher:
    """Questions against one ``Index`` (same thread).  Keep it between questions: its caches
    spare each question the reads of tombstones and filters and a fresh accumulator."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._snap: _Snapshot | None = None
        self._work: np.ndarray | None = None  # scoring's accumulator, see maxscore.work_buffer

    def _snapshot(self) -> _Snapshot:
        """The open read transaction's snapshot state, read again only when the database changed."""
        key = self.index.snapshot_key()
        if self._snap is None or self._snap.key != key:
            self._snap = _Snapshot(key, np.sort(self.index.tombstones()), self.index.id_bound(),
                                   self.index.sentences_written())
        return self._snap

    def _mask(self, snap: _Snapshot, file_filter: PathFilter) -> np.ndarray | None:
        """A bool per sentence id (below ``snap.size``): True for the live sentences of the files
        ``file_filter`` keeps (by path, relative to the roots, and modification time); None when
        it keeps none.  Cached with the snapshot (the roots and mtimes are of the same snapshot).

        Why ranges: a file's sentences have consecutive ids, so one grouped row per kept file
        marks them; a file whose ids are not consecutive has them listed.  SQLite drops most
        other files first (``index/filters.py``).
        """
        if file_filter in snap.masks:
            return snap.masks[file_filter]
        rows = self.index.file_id_ranges(file_filter)
        keep = file_filter.keeps([r[1] for r in rows], roots=self.index.stored_roots(), mtimes=[r[2] for r in rows])
        ranges = [(r[0], *r[3:]) for r, k in zip(rows, keep) if k]
        mask = None
        if ranges:
            fid, lo, hi, n = np.array(ranges, np.int64).T
            whole = hi - lo + 1 == n  # the ids in [lo, hi] are all the file's
            edge = np.zeros(snap.size + 1, np.int8)  # +1 at a range's first id, -1 after its last
            edge[lo[whole]] += 1
            edge[hi[whole] + 1] -= 1
            mask = np.cumsum(edge[: snap.size], dtype=np.int8).astype(bool)  # ranges are disjoint: 0 or 1
            for f in fid[~whole].tolist():
                mask[self.index.file_sentence_ids(f)] = True
        snap.masks[file_filter] = mask
        return mask

    def _read(self, toks: list[int], file_filter: PathFilter | None) -> tuple[list[tuple[int, bytes]], _Snapshot]:
        """The tokens' blobs and the state of the same snapshot (with ``file_filter``'s mask)."""
        snap = self._snap
        if 0 < len(toks) <= MAX_PARAMS and snap is not None and (file_filter is None or file_filter in snap.masks):
            # the cached state holds if the blobs' snapshot is the one it was read from
            rows, key = self.index.token_blobs_versioned(toks)
            if key == snap.key:
                return rows, snap
        with self.index.read_transaction():
            rows = self.index.token_blobs(toks)
            snap = self._snapshot()
            if file_filter is not None:
                self._mask(snap, file_filter)
        return rows, snap

    def search(self, token_ids: np.ndarray | Sequence[int], n: int | None = 10,
               stats: dict | None = None, *, file_filter: PathFilter | None = None,
               mode: str = SPARC) -> tuple[np.ndarray, np.ndarray]:
        """Top ``n`` live sentences for a question's token ids -> (sentence_ids, scores): SPARC's
        g(q, s) in f units, or in ``HYBRID``/``BM25`` mode the fused score.

        Exact (identical to summing every posting), see ``maxscore.top_k_blobs``.  ``stats``, if
        given, receives counters for benchmarks.  ``file_filter``: only sentences of the files
        it keeps are ranked (a mask inside scoring, so pruning stays exact)."""
        rows, snap = self._read(fusion.keys(_distinct(token_ids), mode), file_filter)
        allow = None if file_filter is None else snap.masks[file_filter]
        if file_filter is not None and allow is None:  # the filter keeps no file
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        by_token: dict[int, list[bytes]] = {}
        for tok, blob in rows:
            by_token.setdefault(tok, []).append(blob)
        blobs, scale, mult = list(by_token.values()), self.index.weight_scale, None
        if mode != SPARC:
            mult, scale = self._multipliers(list(by_token), blobs, snap, mode)
        # kept between questions: no page faults on a fresh accumulator (zero again on return)
        self._work = maxscore.work_buffer(snap.size, len(by_token), self._work,
                                          capacity=None if mult is None else codec.QMAX * int(mult.sum()))
        return maxscore.top_k_blobs(blobs, n, snap.dead, snap.size, scale=scale, stats=stats, work=self._work,
                                    allow=allow, multipliers=mult)

    @staticmethod
    def _multipliers(keys: list[int], blobs: list[list[bytes]], snap: _Snapshot, mode: str) -> tuple[np.ndarray, float]:
        df = [sum(codec.header(b)[1] for b in bl) for bl in blobs]
        max_q = [max(map(codec.bound, bl)) for bl in blobs]
        return fusion.multipliers(keys, df, max_q, snap.written, codec.QMAX, mode)

    def coverage(self, token_ids: np.ndarray | Sequence[int], ids: Sequence[int]) -> np.ndarray:
        """For each sentence id, the share of the question's idf mass its passage holds
        (``fusion.coverage``): a token is held when the sentence has a posting of it in the
        context field (BM25 over the paragraph), encoded or pending."""
        toks = _distinct(token_ids)
        keys = [t + f * FIELD_BASE for f in (PARAGRAPH_FIELD, PENDING[PARAGRAPH_FIELD]) for t in toks]
        with self.index.read_transaction():
            rows = self.index.token_blobs(keys)
            n = self._snapshot().written
        want = np.asarray(ids, np.int64)
        df = np.zeros(len(toks), np.int64)
        present = np.zeros((len(want), len(toks)), bool)
        col = {t: i for i, t in enumerate(toks)}
        lists = codec.decode_lists([blob for _, blob in rows])
        for (key, blob), (sids, _) in zip(rows, lists):
            j = col[key % FIELD_BASE]
            df[j] += codec.header(blob)[1]
            if len(sids):  # sorted ids: a binary search per asked id
                at = np.minimum(np.searchsorted(sids, want), len(sids) - 1)
                present[:, j] |= sids[at] == want
        # a token no sentence holds weighs as the rarest: the question asks what the files lack
        return fusion.coverage(np.array([fusion.idf(d, n) for d in df.tolist()]), present)

    def explain(self, token_ids: np.ndarray | Sequence[int], ids: Sequence[int],
                mode: str = SPARC) -> list[dict[int, float]]:
        """{key: its part of the score} for each sentence id: f(v, s) per question token in SPARC
        mode, else each posting key's share of the fused score (keys: ``fusion.keys``)."""
        with self.index.read_transaction():
            rows = self.index.token_blobs(fusion.keys(_distinct(token_ids), mode))
            snap = self._snapshot()
        lists = codec.decode_lists([blob for _, blob in rows])
        plist = [(tok, sids, q) for (tok, _), (sids, q) in zip(rows, lists)]
        scale = self.index.weight_scale
        if mode != SPARC:
            by_key: dict[int, list[bytes]] = {}
            for tok, blob in rows:
                by_key.setdefault(tok, []).append(blob)
            mult, scale = self._multipliers(list(by_key), list(by_key.values()), snap, mode)
            m = dict(zip(by_key, mult.tolist()))
            plist = [(tok, sids, q.astype(np.int64) * m[tok]) for tok, sids, q in plist]
        return scoring.explain(plist, np.asarray(ids, dtype=np.int64), scale=scale)

    # ------------------------------------------------------------------ what Asker shows (``engine.Engine``)

    def sentences(self, ids: Sequence[int] | np.ndarray) -> list[StoredSentence]:
        return self.index.sentences(ids)

    def heading_ends(self, ids: Sequence[int]) -> dict[int, int]:
        return self.index.heading_ends(ids)

    def passage_sentences(self, ids: Sequence[int]) -> dict[int, tuple[list[str], int]]:
        return self.index.passage_sentences(ids)

    def phrase_positions(self, ids: Sequence[int]) -> dict[int, bytes]:
        return self.index.phrase_positions(ids)
