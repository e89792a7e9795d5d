"""The hybrid score: SPARC's g(q, s) fused with BM25 over the sentence and over its paragraph.

fused(s) = g(q, s) / G(q) + β·bm25_sent(q, s) / M_sent(q) + γ·bm25_par(q, s) / M_par(q)

Each part is divided by the question's maximum attainable score, the sum over its keys of the
largest stored value (read from the blob headers, an upper bound), so each lies in [0, 1] and
the weights mean the same for every question. The dense+sparse hybrid paper standardizes the two
scores instead; on the training sets the three normalizations (z-score, divide by the top
score, divide by the attainable maximum) were within 0.003 MRR@10 of each other in an
exhaustive offline comparison, and only the last keeps the fused score a weighted sum of stored
postings with per-question weights, which ``maxscore.top_k_blobs`` ranks exactly in one pruned pass.

BM25's idf, log(1 + (N − df + 0.5) / (df + 0.5)), comes from the index at question time: N is
the number of sentences written to its segments and df a key's postings, both counting
sentences deleted but not yet merged away, as Lucene's docFreq does.

Arrays and numbers in, multipliers out; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sparc_local.model.lexical import FIELD_BASE, PARAGRAPH_FIELD, PENDING, SENTENCE_FIELD
from sparc_local.query.modes import BM25, HYBRID, SPARC

# chosen on training data (du2017-train, and its held-out articles a42-a43), never the evaluation
# sets: MRR@10 0.7787 / 0.7960 against SPARC's 0.7583 / 0.7925 (benchmarks/hybrid_tune.py)
WEIGHTS = {SENTENCE_FIELD: 0.5, PARAGRAPH_FIELD: 0.3}
_RESOLUTION = 1 << 24  # integer steps per unit of fused score, fewer if the sum would overflow int32
_INT_MAX = (1 << 31) - 1


def keys(tokens: Sequence[int], mode: str) -> list[int]:
    """The posting keys a question reads in ``mode``: SPARC's tokens, then each BM25 field's,
    then the same fields of sentences not encoded yet."""
    lexical = [] if mode == SPARC else list(WEIGHTS) + [PENDING[f] for f in WEIGHTS]
    fields = ([] if mode == BM25 else [0]) + lexical
    return [t + field * FIELD_BASE for field in fields for t in tokens]


def multipliers(key_ids: Sequence[int], df: Sequence[int], max_q: Sequence[int], n_sentences: int,
                qmax: int, mode: str = HYBRID) -> tuple[np.ndarray, float]:
    """Integer multipliers of each key's stored (quantized) weights, and the factor that turns
    their weighted sum into the fused score.

    ``df``: postings per key; ``max_q``: the largest stored weight per key (0: the key has no
    postings). A token's key in a field and in its pending field share one df and one maximum.
    A sentence not encoded yet has no SPARC part: in hybrid mode its BM25 parts are weighed up
    to the whole fused scale, so it competes with the encoded ones; once encoded it scores as
    if the index had been built at once. Rounding the real weights to integers keeps the sum
    exact in integers, so the pruned top k equals an exhaustive ranking of the same sum.
    """
    # plain Python over a question's ~30 keys: 21 against 34 us in numpy, whose per-call cost dominated
    base_of = {p: f for f, p in PENDING.items()}
    gkey, pending = [], []
    d: dict[tuple[int, int], float] = {}
    mq: dict[tuple[int, int], float] = {}
    for key, n, m in zip(np.asarray(key_ids, np.int64).tolist(), np.asarray(df).tolist(), np.asarray(max_q).tolist()):
        field, tok = divmod(key, FIELD_BASE)
        base = base_of.get(field, field)
        g = (base, tok)  # a pending key joins its field's key
        gkey.append(g)
        pending.append(field != base)
        d[g] = d.get(g, 0.0) + n
        mq[g] = max(mq.get(g, 0.0), m)
    w = {g: 1.0 if g[0] == 0 else idf(n, n_sentences) if n > 0 else 0.0 for g, n in d.items()}
    top: dict[int, float] = {}  # each field's attainable maximum
    for g, x in w.items():
        top[g[0]] = top.get(g[0], 0.0) + x * mq[g]
    total_w = sum(WEIGHTS.values())
    boost = (1 + total_w) / total_w if mode == HYBRID and total_w > 0 else 1.0
    real = np.array([(1.0 if g[0] == 0 else WEIGHTS.get(g[0], 0.0)) * w[g] / top[g[0]] * (boost if p else 1.0)
                     if top[g[0]] > 0 else 0.0 for g, p in zip(gkey, pending)])
    total = float(real.sum()) * qmax
    res = min(_RESOLUTION, _INT_MAX / total) if total > 0 else _RESOLUTION
    return np.rint(real * res).astype(np.int64), 1.0 / res


def idf(df: float, n_sentences: int) -> float:
    """BM25's idf of a key with ``df`` postings among ``n_sentences`` (Lucene's form, never negative)."""
    return math.log1p((n_sentences - df + 0.5) / (df + 0.5))


def coverage(weights: np.ndarray, present: np.ndarray) -> np.ndarray:
    """The share of a question's idf mass that each passage holds: ``weights`` (question tokens,
    their idf) and ``present`` (passages × tokens, bool) in, one share per passage out. A passage
    about something else may score high on a few common or expanded words; it holds little of
    the question's rare words (issue 32: "best recipe for banana bread" against manuals)."""
    total = float(np.sum(weights))
    if total <= 0:
        return np.zeros(len(present))
    return (np.asarray(present, np.float64) @ np.asarray(weights, np.float64)) / total


def split(key_ids: Sequence[int]) -> dict[int, list[int]]:
    """Positions of ``key_ids`` by field (0: SPARC's tokens)."""
    out: dict[int, list[int]] = {}
    for i, k in enumerate(key_ids):
        out.setdefault(int(k) // FIELD_BASE, []).append(i)
    return out
