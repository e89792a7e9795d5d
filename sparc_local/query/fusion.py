"""The hybrid score: SPARC's g(q, s) fused with BM25 over the sentence and over its paragraph.

fused(s) = g(q, s) / G(q) + β·bm25_sent(q, s) / M_sent(q) + γ·bm25_par(q, s) / M_par(q)

Each part is divided by the question's maximum attainable score, the sum over its keys of the
largest stored value (read from the blob headers, an upper bound), so each lies in [0, 1] and
the weights mean the same for every question. The dense+sparse hybrid paper standardizes the two
scores instead; on the training sets the three normalizations (z-score, divide by the top
score, divide by the attainable maximum) were within 0.003 MRR@10 of each other, and only the
last keeps the fused score a weighted sum of stored postings with per-question weights, which
``maxscore.top_k_blobs`` ranks exactly in one pruned pass (``benchmarks/hybrid_tune.py``).

BM25's idf, log(1 + (N − df + 0.5) / (df + 0.5)), comes from the index at question time: N is
the number of sentences written to its segments and df a key's postings, both counting
sentences deleted but not yet merged away, as Lucene's docFreq does.

Pure numpy: arrays and numbers in, multipliers out; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sparc_local.model.lexical import FIELD_BASE, PARAGRAPH_FIELD, SENTENCE_FIELD

HYBRID, SPARC, BM25 = "hybrid", "sparc", "bm25"
MODES = (HYBRID, SPARC, BM25)
# chosen on the training sets (du2017-train, and its held-out articles), never the evaluation
# sets: MRR@10 0.7793 / 0.7960 against SPARC's 0.7585 / 0.7900 (benchmarks/hybrid_tune.py)
WEIGHTS = {SENTENCE_FIELD: 0.5, PARAGRAPH_FIELD: 0.3}
_RESOLUTION = 1 << 24  # integer steps per unit of fused score, fewer if the sum would overflow int32
_INT_MAX = (1 << 31) - 1


def keys(tokens: Sequence[int], mode: str) -> list[int]:
    """The posting keys a question reads in ``mode``."""
    parts = ([] if mode == BM25 else [0]) + ([] if mode == SPARC else list(WEIGHTS))
    return [t + field * FIELD_BASE for field in parts for t in tokens]


def multipliers(key_ids: Sequence[int], df: np.ndarray, max_q: np.ndarray, n_sentences: int,
                qmax: int) -> tuple[np.ndarray, float]:
    """Integer multipliers of each key's stored (quantized) weights, and the factor that turns
    their weighted sum into the fused score.

    ``df``: postings per key; ``max_q``: the largest stored weight per key (0: the key has no
    postings). Rounding the real weights to integers keeps the sum exact in integers, so the
    pruned top k equals an exhaustive ranking of the same sum.
    """
    key_ids = np.asarray(key_ids, np.int64)
    field = key_ids // FIELD_BASE
    real = np.zeros(len(key_ids))
    for f in np.unique(field).tolist():
        on = field == f
        if f == 0:
            w = np.ones(int(on.sum()))
        else:
            d = df[on].astype(np.float64)
            w = np.log1p((n_sentences - d + 0.5) / (d + 0.5)) * (d > 0)
        top = float((w * max_q[on]).sum())
        if top > 0:
            real[on] = (1.0 if f == 0 else WEIGHTS[f]) * w / top
    total = float(real.sum()) * qmax
    res = min(_RESOLUTION, _INT_MAX / total) if total > 0 else _RESOLUTION
    return np.rint(real * res).astype(np.int64), 1.0 / res


def split(key_ids: Sequence[int]) -> dict[int, list[int]]:
    """Positions of ``key_ids`` by field (0: SPARC's tokens)."""
    out: dict[int, list[int]] = {}
    for i, k in enumerate(key_ids):
        out.setdefault(int(k) // FIELD_BASE, []).append(i)
    return out
