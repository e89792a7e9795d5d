"""The sparse-vector batch that flows from the encoder to the store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# positions: each pair's token index in its sentence (0 = the sentence's first token, as
# inputs.paragraph_inputs tokenizes it) whose H gave the pair's max; NO_POSITION when the max
# came from the context around the sentence, or the token lies past MAX_POSITION
NO_POSITION = 255
MAX_POSITION = NO_POSITION - 1
# the graph output (model/export.py) naming, for each kept token, the input position (a column of
# input_ids) whose H·e_v is its max; the encoder turns it into sentence positions
POSITIONS = "positions"


@dataclass(frozen=True)
class SparseVectors:
    """CSR-like batch: row i owns token_ids[indptr[i]:indptr[i+1]] and the same slice of weights.

    weights are f(v, s) from SPARC Eq. 4, float32, all > 0. ``positions`` (uint8, the same
    slices; None from a model without them, and for lexical rows) say where in the sentence each
    pair's max is: the answer phrase.
    """

    indptr: np.ndarray  # int64, shape (n + 1,)
    token_ids: np.ndarray  # int32
    weights: np.ndarray  # float32
    positions: np.ndarray | None = None  # uint8, NO_POSITION: none in the sentence

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = int(self.indptr[i]), int(self.indptr[i + 1])
        return self.token_ids[a:b], self.weights[a:b]

    def row_positions(self, i: int) -> np.ndarray | None:
        """Row i's positions, None without them."""
        if self.positions is None:
            return None
        return self.positions[int(self.indptr[i]):int(self.indptr[i + 1])]

    def slice(self, start: int, stop: int) -> SparseVectors:
        """Rows start..stop-1 as their own batch (views, no copy)."""
        a, b = int(self.indptr[start]), int(self.indptr[stop])
        return SparseVectors(self.indptr[start:stop + 1] - a, self.token_ids[a:b], self.weights[a:b],
                             None if self.positions is None else self.positions[a:b])

    def head(self, k: int) -> SparseVectors:
        """Each row's first k pairs: its k largest weights, as the encoder returns them sorted by
        weight (TopK), so a smaller K is a prefix of a larger one."""
        lengths = np.diff(self.indptr)
        keep = np.arange(len(self.token_ids)) - np.repeat(self.indptr[:-1], lengths) < k
        indptr = np.concatenate([[0], np.cumsum(np.minimum(lengths, k))]).astype(np.int64)
        return SparseVectors(indptr, self.token_ids[keep], self.weights[keep],
                             None if self.positions is None else self.positions[keep])

    @classmethod
    def concat(cls, parts: Sequence[SparseVectors]) -> SparseVectors:
        """The rows of every part, in order."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls.from_rows([])
        ends = np.cumsum([int(v.indptr[-1]) for v in parts[:-1]])
        indptr = np.concatenate([parts[0].indptr] + [v.indptr[1:] + e for v, e in zip(parts[1:], ends)])
        positions = (np.concatenate([v.positions for v in parts])
                     if all(v.positions is not None for v in parts) else None)
        return cls(indptr, np.concatenate([v.token_ids for v in parts]), np.concatenate([v.weights for v in parts]),
                   positions)

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[np.ndarray, ...]]) -> SparseVectors:
        """Rows of (token ids, weights) or (token ids, weights, positions); positions are kept
        when every row has them."""
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        positions = None
        if rows:
            indptr[1:] = np.cumsum([len(r[0]) for r in rows])
            ids = np.concatenate([np.asarray(r[0], dtype=np.int32) for r in rows])
            ws = np.concatenate([np.asarray(r[1], dtype=np.float32) for r in rows])
            if all(len(r) > 2 for r in rows):
                positions = np.concatenate([np.asarray(r[2], dtype=np.uint8) for r in rows])
        else:
            ids, ws = np.zeros(0, np.int32), np.zeros(0, np.float32)
        return cls(indptr, ids, ws, positions)
