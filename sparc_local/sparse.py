"""The sparse-vector batch that flows from the encoder to the store."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SparseVectors:
    """CSR-like batch: row i owns token_ids[indptr[i]:indptr[i+1]] and the same slice of weights.

    weights are f(v, s) from SPARC Eq. 4, float32, all > 0.
    """

    indptr: np.ndarray  # int64, shape (n + 1,)
    token_ids: np.ndarray  # int32
    weights: np.ndarray  # float32

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = int(self.indptr[i]), int(self.indptr[i + 1])
        return self.token_ids[a:b], self.weights[a:b]

    @classmethod
    def from_rows(cls, rows: list[tuple[np.ndarray, np.ndarray]]) -> "SparseVectors":
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        if rows:
            indptr[1:] = np.cumsum([len(r[0]) for r in rows])
            ids = np.concatenate([np.asarray(r[0], dtype=np.int32) for r in rows])
            ws = np.concatenate([np.asarray(r[1], dtype=np.float32) for r in rows])
        else:
            ids, ws = np.zeros(0, np.int32), np.zeros(0, np.float32)
        return cls(indptr, ids, ws)
