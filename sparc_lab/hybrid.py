"""Training with the hybrid score: the fused BM25 parts as fixed features beside g(q, s).

``ask`` ranks by fused(s) = g/G + β·bm25_sent/M_sent + γ·bm25_par/M_par (query/fusion.py). Ranking
is unchanged by a positive factor per question, so training's softmax takes G(q)·fused =
g + G(q)·(lexical parts): the SPARC part keeps the scale of training without the hybrid, and the
lexical parts, computed with the product's own impacts (model/lexical.py) and normalization
(fusion.multipliers), only shift each candidate. SPARC then learns what BM25 misses, as the
dense+sparse hybrid paper's DPR is complemented by TF-IDF.

Two estimates stand in for an index: idf comes from the training pool (every sentence a
document, as `eval` indexes the sets), and G(q), the sum over the question's tokens of their
largest f in the index, from the batch's candidates (detached), so it is a lower bound.
"""

from __future__ import annotations

import numpy as np
import torch

from sparc_lab.data import Pool
from sparc_lab.distill import dense_rows
from sparc_local.model.lexical import FIELD_BASE, Lexical, field_keys
from sparc_local.query.fusion import HYBRID, WEIGHTS, keys, multipliers


class LexicalFeatures:
    """The lexical postings of every pool sentence, with each key's df and largest impact."""

    def __init__(self, pool: Pool, tokenizer, skip: np.ndarray) -> None:
        # a sentence's context is its passage, as `eval` writes the sets into an index
        contexts = [" ".join(p) for p in pool.paragraphs for _ in p]
        self.vectors = Lexical(tokenizer, skip).vectors(pool.texts, contexts)
        order = np.argsort(self.vectors.token_ids, kind="stable")
        tok = self.vectors.token_ids[order]
        self.keys, starts, self.df = np.unique(tok, return_index=True, return_counts=True)
        self.max = np.maximum.reduceat(self.vectors.weights[order], starts)
        self.n_sentences = len(pool.texts)

    def _stats(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(df, largest impact) of keys ``k``, 0 for a key no sentence has."""
        at = np.minimum(np.searchsorted(self.keys, k), len(self.keys) - 1)
        hit = self.keys[at] == k
        return np.where(hit, self.df[at], 0), np.where(hit, self.max[at], 0.0)

    def scores(self, qmask: torch.Tensor, union: np.ndarray, sents: list[int],
               sparc_max: torch.Tensor) -> torch.Tensor:
        """G(q)·(β·bm25_sent/M_sent + γ·bm25_par/M_par) for the questions of ``qmask``
        (questions × ``union``, 0/1) and the candidates ``sents``, shape (questions, candidates).
        ``sparc_max``: each union token's largest f over the index (or its estimate)."""
        fields = list(WEIGHTS)
        columns = np.concatenate([field_keys(union, f) for f in fields])  # ascending: fields, then tokens
        coef = np.zeros((qmask.shape[0], len(columns)), dtype=np.float64)
        top = sparc_max.detach().numpy().astype(np.float64)
        for i, row in enumerate(qmask.numpy()):
            cols = np.flatnonzero(row > 0)
            k = np.asarray(keys(union[cols].tolist(), HYBRID), np.int64)
            df, mq = self._stats(k)
            field = k // FIELD_BASE
            mq[field == 0] = top[cols]  # the SPARC keys come first, in the question's token order
            mult, factor = multipliers(k, df, mq, self.n_sentences, 1)
            for j, f in enumerate(fields):
                coef[i, j * len(union) + cols] = mult[field == f] * factor
        impacts = torch.from_numpy(dense_rows(self.vectors, sents, columns))
        lexical = torch.from_numpy(coef.astype(np.float32)) @ impacts.T
        g_max = qmask @ sparc_max.detach()
        return g_max[:, None] * lexical
