"""BM25 over sentences: the baseline SPARC is measured against, and the source of hard negatives.

Pure numpy/scipy: a sentence-by-term CSR matrix of BM25 term weights, so a query is a sparse
row sum. Robertson & Zaragoza (2009), with the Lucene idf log(1 + (N - df + .5)/(df + .5)).
"""

from __future__ import annotations

import re

import numpy as np
import scipy.sparse as sp

from sparc_local.model.lexical import STOPWORDS

_WORD = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.lower()) if t not in STOPWORDS]


class BM25:
    """An in-memory BM25 index over a list of texts."""

    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        vocab: dict[str, int] = {}
        rows, cols = [], []
        for i, text in enumerate(texts):
            for tok in tokenize(text):
                rows.append(i)
                cols.append(vocab.setdefault(tok, len(vocab)))
        n = len(texts)
        tf = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, len(vocab)))
        tf.sum_duplicates()
        doc_len = np.asarray(tf.sum(axis=1)).ravel()
        avg = doc_len.mean() if n else 1.0
        df = np.bincount(tf.indices, minlength=len(vocab))
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)
        norm = k1 * (1 - b + b * doc_len / max(avg, 1e-9))
        tf = tf.tocoo()
        w = tf.data * (k1 + 1) / (tf.data + norm[tf.row]) * self.idf[tf.col]
        # term-major (CSC) so a query touches only its own terms' columns
        self.matrix = sp.csc_matrix((w.astype(np.float32), (tf.row, tf.col)), shape=(n, len(vocab)))
        self.vocab = vocab
        self.n = n

    def scores(self, query: str) -> np.ndarray:
        cols = sorted({self.vocab[t] for t in tokenize(query) if t in self.vocab})
        if not cols:
            return np.zeros(self.n, np.float32)
        return np.asarray(self.matrix[:, cols].sum(axis=1)).ravel()

    def search(self, query: str, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        from sparc_local.query.scoring import top_k

        return top_k(self.scores(query), k)
