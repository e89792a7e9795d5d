"""Questions against a Milvus store, ranked as the local engine ranks them.

The fused score is a weighted sum over three sparse fields (``query/fusion.py``).  Milvus
searches one field at a time, so each field gives its best ``C`` candidates for the question's
weights in it (the filter applied inside the engine); the union is scored exactly, in integers
as ``maxscore`` does (the stored uint8 values times the integer multipliers), and ranked by score,
then id.  A sentence none of the fields returned scores at most the sum of each field's C-th
score, so the ranking is certified exact when its n-th score beats that bound; otherwise C
grows fourfold (up to Milvus's limit).  ``benchmarks/milvus.py`` measures how often that is needed.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from sparc_local.index import postings as codec
from sparc_local.index.records import StoredSentence
from sparc_local.milvus.store import FIELDS, MilvusStore, engine, quote
from sparc_local.model.lexical import FIELD_BASE, PARAGRAPH_FIELD
from sparc_local.query import fusion
from sparc_local.query.modes import SPARC
from sparc_local.query.pathfilter import PathFilter

CANDIDATES = 100  # per field, first try (benchmarks/milvus.py: the exact fused top 10 with few retries)
MAX_CANDIDATES = 16384  # Milvus's largest search limit
_FLOAT_SLACK = 1e-5  # Milvus sums float32: a relative error bound on its scores
_SHOWN = ["path", "page", "line", "text", "context", "offset"]


def expression(file_filter: PathFilter | None) -> str:
    """A Milvus filter that keeps every sentence ``file_filter`` keeps: exact on type and time,
    a superset on --path (tested exactly on the candidates, with the roots)."""
    if file_filter is None:
        return ""
    conds = []
    if file_filter.glob and not file_filter.path_is_glob and not set(file_filter.glob) & set("%_\\\"'"):
        conds.append(f"path like {quote('%' + file_filter.glob.rstrip('/') + '%')}")
    if file_filter.suffixes:
        conds.append(f"ftype in [{','.join(quote(s) for s in file_filter.suffixes)}]")
    if file_filter.since is not None:
        conds.append(f"mtime >= {float(file_filter.since)!r}")
    if file_filter.before is not None:
        conds.append(f"mtime < {float(file_filter.before)!r}")
    return " and ".join(conds)


class MilvusSearcher:
    """An ``engine.Engine`` on a Milvus store: ``Searcher``'s ``search``, ``explain`` and
    ``coverage``, and the sentence rows ``Asker`` shows."""

    def __init__(self, store: MilvusStore, candidates: int = CANDIDATES) -> None:
        self.store = store
        self.candidates = candidates
        self.weight_scale = store.weight_scale
        self._roots: list[str] | None = None

    def _weights(self, questions: Sequence[np.ndarray | Sequence[int]],
                 mode: str) -> list[tuple[dict[str, dict[int, int]], float]]:
        """Per question: per sparse field, token id -> integer multiplier; and the factor to the
        score. The key statistics of all the questions are read at once."""
        keys = [fusion.keys(sorted({int(t) for t in np.asarray(q).tolist()}), mode) for q in questions]
        if mode != SPARC:
            union = sorted({k for ks in keys for k in ks})
            df, mq, n = self.store.key_stats(union)
            stats = dict(zip(union, zip(df, mq)))
        out = []
        for ks in keys:
            if mode == SPARC:
                mult, factor = np.ones(len(ks), np.int64), self.weight_scale
            else:
                mult, factor = fusion.multipliers(ks, [stats[k][0] for k in ks], [stats[k][1] for k in ks], n,
                                                  codec.QMAX, mode)
            fields: dict[str, dict[int, int]] = {}
            for key, m in zip(ks, mult.tolist()):
                field, tok = divmod(key, FIELD_BASE)
                if m > 0 and field in FIELDS:  # pending fields: Milvus holds encoded sentences only
                    fields.setdefault(FIELDS[field], {})[tok] = int(m)
            out.append((fields, factor))
        return out

    def search(self, token_ids: np.ndarray | Sequence[int], n: int | None = 10, stats: dict | None = None, *,
               file_filter: PathFilter | None = None, mode: str = SPARC) -> tuple[np.ndarray, np.ndarray]:
        """Top ``n`` sentences -> (ids, scores), as ``Searcher.search``."""
        return self.search_many([token_ids], n, None if stats is None else [stats],
                                file_filter=file_filter, mode=mode)[0]

    def search_many(self, questions: Sequence[np.ndarray | Sequence[int]], n: int | None = 10,
                    stats: Sequence[dict] | None = None, *, file_filter: PathFilter | None = None,
                    mode: str = SPARC) -> list[tuple[np.ndarray, np.ndarray]]:
        """``search`` of each question, with one engine call per field and round for all of them:
        on Milvus Lite a call's fixed cost is most of a search (20 questions in one call took what
        1.4 took one by one, on squad-dev)."""
        weights = self._weights(questions, mode)
        empty = np.zeros(0, np.int64), np.zeros(0, np.float32)
        out: list[tuple[np.ndarray, np.ndarray]] = [empty] * len(questions)
        c = max(self.candidates, 10 if n is None else n)
        expr = expression(file_filter)
        pending = [i for i, (w, _) in enumerate(weights) if w]
        need = [f for f in FIELDS.values() if any(f in weights[i][0] for i in pending)]
        need += ["path", "mtime"] if file_filter is not None and file_filter.glob else []
        rounds = 0
        while pending:
            rounds += 1
            cand: dict[int, dict[int, dict]] = {i: {} for i in pending}  # candidates with every field scored
            bound = dict.fromkeys(pending, 0.0)
            for name in FIELDS.values():
                asking = [i for i in pending if name in weights[i][0]]
                if not asking:
                    continue
                with engine(self.store.spec, "search"):
                    found = self.store.client.search(
                        self.store.name, [{t: float(m) for t, m in weights[i][0][name].items()} for i in asking],
                        anns_field=name, limit=c, filter=expr, output_fields=need,
                        search_params={"metric_type": "IP", "params": {}})
                for i, hits in zip(asking, found):
                    for h in hits:
                        cand[i].setdefault(int(h["id"]), h["entity"])
                    if len(hits) >= c:
                        bound[i] += float(hits[-1]["distance"])
            still = []
            for i in pending:
                ids, scores = self._exact(cand[i], weights[i][0], file_filter)
                top = _best(ids, scores, n)
                limit = bound[i] * (1 + _FLOAT_SLACK) + 1e-6
                full = n is None or len(top) >= n
                done = bound[i] == 0 or (full and len(top) > 0 and scores[top[-1]] > limit)
                if not done and c < MAX_CANDIDATES:
                    still.append(i)
                    continue
                out[i] = ids[top], scores[top].astype(np.float64) * weights[i][1]
                if stats is not None:
                    stats[i].update(candidates=c, rounds=rounds, exact=done)
            pending = still
            c = min(c * 4, MAX_CANDIDATES)
        return out

    def _exact(self, rows: dict[int, dict], weights: dict[str, dict[int, int]],
               file_filter: PathFilter | None) -> tuple[np.ndarray, np.ndarray]:
        """The integer fused score of each candidate (id -> its fields; those the filter keeps)."""
        if file_filter is not None and file_filter.glob:
            got = list(rows.values())
            if self._roots is None:
                self._roots = self.store.roots()
            keep = file_filter.keeps([r["path"] for r in got], roots=self._roots, mtimes=[r["mtime"] for r in got])
            rows = {i: r for (i, r), k in zip(rows.items(), keep) if k}
        out_ids = np.fromiter(rows, np.int64, len(rows))
        scores = np.zeros(len(rows), np.int64)
        for i, r in enumerate(rows.values()):
            total = 0
            for name, q in weights.items():
                vec = r[name]
                total += sum(int(vec[t]) * m for t, m in q.items() if t in vec)
            scores[i] = total
        return out_ids, scores

    def explain(self, token_ids: np.ndarray | Sequence[int], ids: Sequence[int],
                mode: str = SPARC) -> list[dict[int, float]]:
        """{posting key: its part of the score} for each id, as ``Searcher.explain``."""
        weights, factor = self._weights([token_ids], mode)[0]
        rows = self.store.vectors([int(i) for i in ids], list(weights))
        base = {name: field * FIELD_BASE for field, name in FIELDS.items()}
        out = []
        for i in ids:
            r = rows.get(int(i), {})
            out.append({base[name] + t: int(r[name][t]) * m * factor
                        for name, q in weights.items() if name in r for t, m in q.items() if t in r[name]})
        return out

    def coverage(self, token_ids: np.ndarray | Sequence[int], ids: Sequence[int]) -> np.ndarray:
        """The share of the question's idf each sentence's passage holds, as ``Searcher.coverage``
        (from the context field the store keeps)."""
        toks = sorted({int(t) for t in np.asarray(token_ids).tolist()})
        df, _, n = self.store.key_stats([t + PARAGRAPH_FIELD * FIELD_BASE for t in toks])
        name = FIELDS[PARAGRAPH_FIELD]
        rows = self.store.vectors([int(i) for i in ids], [name])
        present = np.array([[t in rows.get(int(i), {}).get(name, {}) for t in toks] for i in ids],
                           bool).reshape(len(ids), len(toks))
        return fusion.coverage(np.array([fusion.idf(d, n) for d in np.asarray(df).tolist()]), present)

    # ------------------------------------------------------------------ what Asker reads of an index

    def sentences(self, ids: Sequence[int] | np.ndarray) -> list[StoredSentence]:
        """Records as ``Index.sentences`` gives them (no character span: Milvus keeps none)."""
        rows = self.store.vectors([int(i) for i in np.asarray(ids).tolist()], _SHOWN)
        return [StoredSentence(i, r["text"], r["context"], r["offset"], r["path"],
                               None if r["page"] < 0 else r["page"], None if r["line"] < 0 else r["line"],
                               None, None, zlib.crc32(r["path"].encode())) for i, r in rows.items()]

    def phrase_positions(self, ids: Sequence[int]) -> dict[int, bytes]:
        """None stored in Milvus: the answer phrase marks BM25's matches only."""
        return {}

    def passage_sentences(self, ids: Sequence[int]) -> dict[int, tuple[list[str], int]]:
        """None known from Milvus, which keeps no paragraph's sentences together: the reranker reads
        each answer's context around its sentence (``rerank``'s fallback)."""
        return {}

    def heading_ends(self, ids: Sequence[int]) -> dict[int, int]:
        """None known from Milvus, which keeps no paragraph's sentences together: no heading shown."""
        return {}


def _best(ids: np.ndarray, scores: np.ndarray, n: int | None) -> np.ndarray:
    """Positions of the n best positive scores: score descending, ties by id (``maxscore``'s order)."""
    pos = np.flatnonzero(scores > 0)
    order = np.lexsort((ids[pos], -scores[pos]))
    return pos[order[:n] if n is not None else order]


