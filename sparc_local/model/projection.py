"""The vocabulary projection H·Eᵀ of the graph, full or through certified candidates (issue 36).

About half of a token's encoding cost is its projection onto every row of E, yet a sentence keeps
only its K largest f(v,s). The candidate projection estimates every row with onnxruntime's integer
kernels: H quantized to 7 bits per batch (u8 values ≤ 127, so u8·s8 pairs never saturate int16 on
AVX2 CPUs without VNNI) against E's own int8 rows, max-pooled over the input in int32. Only each
sentence's `candidates` best rows are then scored exactly in float, as the full projection does.

The result is certified: with δ_i = H_i − dequant(H_i), |H_i·e_v − est_iv| ≤ ‖δ_i‖·‖e_v‖
(Cauchy–Schwarz), so no row outside the candidates can reach the top K when its estimate plus
max_i‖δ_i‖·‖e_v‖ stays below the K-th exact value τ (or below 0, where f is 0 anyway). The graph
outputs `certified` per sentence; the encoder encodes an uncertified sentence again with the full
projection, so every vector equals the full projection's up to float summation order.

With `rank` r > 0 the estimate is low-rank and not certified: (H·A)(E·B)ᵀ in the same integer
kernels at r/d of the cost, with A = B = P, the top r right singular vectors of E's kept rows
(`low_rank_basis`), or A and B fitted to the encoder's hidden states (`fitted_bases`), which the
export takes among the weights. Issue 46 accepts top-K tokens that move where answers hold (the
golden checks measure how many); every candidate is still scored exactly. A and B are fixed at
export, E·B is derived in-graph from the stored E, so after `adapt` swaps E the estimate projects
the new rows onto the old subspace.

The candidate count is a graph input; `FULL` (0) runs the full projection (an `If` branch): the
fallback above and `Encoder(full_projection=True)`. Rows that can never score (specials,
[unused], punctuation: never query terms) are out of the projection in both forms; `keep_rows`
maps its columns back to vocabulary ids. Everything derived from E (its kept rows' int8
transpose, scales and norms) is computed in-graph from the one stored E and folded when the
session loads, so `adapt`, which swaps E, keeps the bound right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

PROJECTION = "projection"  # sparc.json extra: Projection.to_dict(); absent: the full projection
CANDIDATES_INPUT = "candidates"  # the graph input: rows scored exactly per sentence
CERTIFIED = "certified"  # the graph output: no row outside the candidates can reach the top K
FULL = 0  # the candidate count that runs the full projection
LEVELS = 127  # H's quantization levels: u8 ≤ 127 times s8 ≤ 127, summed in pairs, fits int16
HALF = 63.0  # the low-rank estimate's s8 range for H·P: against u8 rows, pairs fit int16 (low_rank)
MARGIN = 1e-3  # the bound's slack for float rounding (pre-ReLU scores are O(1-10))
# a fitted estimate's bases (fitted_bases) among a model's weights, and as the graph's initializers
BASIS_H, BASIS_E = "projection.basis_h", "projection.basis_e"
BASIS_H_INIT, BASIS_E_INIT = "projection_basis_h", "projection_basis_e"


@dataclass(frozen=True)
class Projection:
    """candidates 0: the full projection only; else the int8 estimate picks that many rows,
    certified (rank 0) or of rank `rank` (not certified)."""

    candidates: int = 0
    rank: int = 0

    @property
    def full(self) -> bool:
        return self.candidates == FULL

    @property
    def exact(self) -> bool:
        """Every vector equals the full projection's: full, or certified (rank 0)."""
        return self.full or not self.rank

    def rows_at(self, k: int) -> int:
        """The candidate count a run asking for the top ``k`` uses: ``k`` above the candidates
        runs the full projection (FULL)."""
        return FULL if self.candidates < k else self.candidates

    def to_dict(self) -> dict:
        return {"candidates": self.candidates, **({"rank": self.rank} if self.rank else {})}

    @classmethod
    def from_extra(cls, extra: dict) -> Projection:
        d = extra.get(PROJECTION) or {}
        return cls(int(d.get("candidates", FULL)), int(d.get("rank", 0)))


FULL_PROJECTION = Projection()
# measured on the shipped model (benchmarks/projection.py, 627 wikiqa-train windows): 512
# candidates left 65 sentences uncertified (encoded again in full), 1,024 one, 2,048 none; 1,024
# and 2,048 encoded as fast, 512 slower (its full re-runs)
CANDIDATE_PROJECTION = Projection(candidates=1024)


def low_rank_basis(rows: np.ndarray, rank: int) -> np.ndarray:
    """P (d, rank): the top `rank` right singular vectors of E's kept rows, the subspace in which
    (H·P)(E·P)ᵀ best approximates H·Eᵀ for H spread like E."""
    _, _, vt = np.linalg.svd(rows.astype(np.float64), full_matrices=False)
    return np.ascontiguousarray(vt[:rank].T, dtype=np.float32)


def fitted_bases(hidden: np.ndarray, rows: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(A, B), each (d, rank), for the estimate (H·A)(E·B)ᵀ fitted to where the hidden states lie.

    The rank-r A·Bᵀ closest to the identity when H·Eᵀ's error is weighed by H's and E's second
    moments C = hiddenᵀ·hidden/n and G = rowsᵀ·rows/m: with U·S·Vᵀ the best rank-r approximation
    of C^½·G^½ (Eckart–Young), A = C^-½·U and B = G^-½·V·S. A transformer's hidden states
    crowd into a few directions that E's own subspace does not favour, so at the same rank this
    keeps more of each sentence's top K than low_rank_basis."""
    def roots(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        val, vec = np.linalg.eigh(x)
        val = np.maximum(val, val.max() * 1e-8)
        return (vec * np.sqrt(val)) @ vec.T, (vec / np.sqrt(val)) @ vec.T

    h, e = hidden.astype(np.float64), rows.astype(np.float64)
    c_half, c_inv = roots(h.T @ h / len(h))
    g_half, g_inv = roots(e.T @ e / len(e))
    u, sv, vt = np.linalg.svd(c_half @ g_half)
    a, b = c_inv @ u[:, :rank], g_inv @ vt[:rank].T * sv[:rank]
    return np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)


def keep_rows(vocab_size: int, skip: np.ndarray) -> np.ndarray:
    """The vocabulary ids the projection scores: all but the skipped ones, in id order."""
    return np.setdiff1d(np.arange(vocab_size), skip).astype(np.int64)


Op = Callable[..., Any]  # a node's output name, or its names (a list) when n_out > 1


@dataclass(frozen=True)
class GraphOps:
    """graph.GraphBuilder's node builders: op(kind, inputs, **attrs) into the current node list,
    const(array, prefix), and branch(fn), which builds fn's nodes into an If branch's graph."""

    op: Op
    const: Callable[..., str]
    branch: Callable[..., list[str]]  # (cond, then_fn, else_fn, output types) -> the If's outputs


def project(g: GraphOps, hm: str, E: str, e8: str | None, e_scale: str | None, keep: str,
            hidden: int, basis: tuple[str, str] | None = None) -> tuple[str, str, str | None]:
    """(scores (B, L, C), columns (B, C): each score column's index into keep, certified (B,) or
    None) for the masked hidden states hm (B, L, d) against E's rows `keep` (V' ids). No float
    copy of the kept rows is made: it would be folded into a second E in memory (45 MB).

    e8 and e_scale, E's int8 rows and scales, give the candidate form (`If` candidates == FULL,
    the full projection); without them (an fp32 E) the projection is always full. `basis`, A and
    B (d, r): the candidates come from the low-rank estimate, and every sentence counts as certified.
    """
    op, const = g.op, g.const
    flat = op("Reshape", [hm, const(np.array([-1, hidden], np.int64))])
    dims = op("Shape", [hm])
    batch, length = (op("Gather", [dims, const(np.array([i], np.int64))]) for i in (0, 1))
    rows = op("Shape", [keep])  # (1,): V'

    def full() -> list[str]:
        logits = op("Gather", [op("Gemm", [flat, E], transB=1), keep], axis=1)  # (B·L, V')
        scores = op("Reshape", [logits, op("Concat", [batch, length, rows], axis=0)])
        cols = op("Expand", [op("Unsqueeze", [op("Range", [const(np.array(0, np.int64)), op("Squeeze", [rows]),
                                                            const(np.array(1, np.int64))]),
                                              const(np.array([0], np.int64))]),
                             op("Concat", [batch, rows], axis=0)])
        return [scores, cols, op("Expand", [const(np.array([True])), batch])]

    if e8 is None:
        scores, cols, _ = full()
        return scores, cols, None

    def exact(cand: str) -> str:
        """The candidates' exact scores (B, L, C)."""
        chosen = op("Gather", [E, op("Gather", [keep, cand])])  # (B, C, d)
        return op("MatMul", [hm, op("Transpose", [chosen], perm=[0, 2, 1])])

    def candidates() -> list[str]:
        from onnx import TensorProto

        zero = const(np.array(0.0, np.float32))
        lo = op("Min", [op("ReduceMin", [flat], keepdims=0), zero])
        hi = op("Max", [op("ReduceMax", [flat], keepdims=0), zero])
        step = op("Max", [op("Div", [op("Sub", [hi, lo]), const(np.array(LEVELS, np.float32))]),
                          const(np.array(1e-12, np.float32))])
        zp = op("Cast", [op("Round", [op("Div", [op("Neg", [lo]), step])])], to=TensorProto.UINT8)
        q = op("QuantizeLinear", [flat, step, zp])  # u8 in [0, LEVELS]
        rho = op("ReduceL2", [op("Sub", [flat, op("DequantizeLinear", [q, step, zp])])], axes=[1], keepdims=0)
        rho = op("ReduceMax", [op("Reshape", [rho, op("Concat", [batch, length], axis=0)])], axes=[1])  # (B, 1)
        e8_kept = op("Transpose", [op("Gather", [e8, keep])], perm=[1, 0])  # (d, V') int8, folded at load
        ints = op("MatMulInteger", [q, e8_kept, zp])  # (B·L, V') int32
        pooled = op("ReduceMax", [op("Reshape", [ints, op("Concat", [batch, length, rows], axis=0)])],
                    axes=[1], keepdims=0)  # (B, V') int32
        est = op("Mul", [op("Cast", [pooled], to=TensorProto.FLOAT), op("Mul", [op("Gather", [e_scale, keep]), step])])
        norms = op("Gather", [op("ReduceL2", [E], axes=[1], keepdims=0), keep])  # (V',), folded at load
        bound = op("Add", [est, op("Mul", [rho, norms])])
        count = op("Min", [CANDIDATES_INPUT, rows])
        _, cand = op("TopK", [est, count], n_out=2, axis=-1, largest=1, sorted=0)  # (B, C)
        scores = exact(cand)
        best, _ = op("TopK", [op("ReduceMax", [scores], axes=[1], keepdims=0), "top_k"], n_out=2, axis=-1)
        tau = op("Max", [op("ReduceMin", [best], axes=[1], keepdims=0), zero])  # the K-th exact value, ≥ 0
        # the best bound outside the candidates: theirs set to -inf
        drop = op("Expand", [const(np.array(-np.inf, np.float32)), op("Shape", [cand])])
        outside = op("ReduceMax", [op("ScatterElements", [bound, cand, drop], axis=1)], axes=[1], keepdims=0)
        certified = op("Less", [op("Add", [outside, const(np.array(MARGIN, np.float32))]), tau])
        return [scores, cand, certified]

    def low_rank() -> list[str]:
        """The estimate E·B·(H·A)ᵀ laid out (V', B·L), so that its max over each sentence's inputs
        runs along the last axis (onnxruntime reduces a middle axis several times slower)."""
        from onnx import TensorProto

        assert basis is not None
        basis_h, basis_e = basis
        half = const(np.array(HALF, np.float32))
        tiny = const(np.array(1e-12, np.float32))
        # H·P in s8 within ±HALF and E·P's rows in u8 around 128: a u8·s8 pair sums to at most
        # 2·255·HALF, inside int16 on AVX2 CPUs without VNNI. Gemm, not MatMul: dynamic
        # quantization (export.QUANT_DYNAMIC) leaves Gemm float.
        hp = op("Gemm", [flat, basis_h])  # (B·L, r)
        h_step = op("Max", [op("Div", [op("ReduceMax", [op("Abs", [hp])], keepdims=0), half]), tiny])
        h8 = op("Transpose", [op("QuantizeLinear", [hp, h_step, const(np.array(0, np.int8))])], perm=[1, 0])
        ep = op("Gemm", [op("Gather", [E, keep]), basis_e])  # (V', r), this and the next two folded at load
        e_step = op("Max", [op("Div", [op("ReduceMax", [op("Abs", [ep])], axes=[1]),
                                       const(np.array(127.0, np.float32))]), tiny])  # (V', 1)
        e_u8 = op("Cast", [op("Add", [op("Round", [op("Div", [ep, e_step])]), const(np.array(128.0, np.float32))])],
                  to=TensorProto.UINT8)
        ints = op("MatMulInteger", [e_u8, h8, const(np.array(128, np.uint8))])  # (V', B·L) int32
        pooled = op("ReduceMax", [op("Reshape", [ints, op("Concat", [rows, batch, length], axis=0)])],
                    axes=[2], keepdims=0)  # (V', B)
        # H's step is one per batch, so it does not change which rows of a sentence lead
        est = op("Transpose", [op("Mul", [op("Cast", [pooled], to=TensorProto.FLOAT), e_step])], perm=[1, 0])
        count = op("Min", [CANDIDATES_INPUT, rows])
        _, cand = op("TopK", [est, count], n_out=2, axis=-1, largest=1, sorted=0)
        return [exact(cand), cand, op("Expand", [const(np.array([True])), batch])]

    from onnx import TensorProto

    is_full = op("Equal", [op("Squeeze", [CANDIDATES_INPUT]), const(np.array(FULL, np.int64))])
    scores, cols, certified = g.branch(is_full, full, candidates if basis is None else low_rank,
                                       [TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL])
    return scores, cols, certified
