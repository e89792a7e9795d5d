"""Masked-LM loss and its gradient w.r.t. the word-embedding matrix E, in numpy.

`adapt` (SPARC §5.1) trains only E with the MLM task on the user's sentences, every other weight
frozen, and must run without torch. So this module implements exactly the passes dL/dE needs:

    x0     = LN(E[ids] + P[pos] + T[types])                 (input side: E as embedding)
    H      = encoder(x0)                                    (post-LN BERT, erf GELU)
    t      = LN(GELU(H_m · W_dᵀ + b_d))                     (MLM head, masked rows m only)
    logits = t · Eᵀ + b                                     (decoder tied to E)
    L      = mean_m CE(logits_m, label_m)                   (Devlin et al. 2019)

dL/dE = (softmax − onehot)ᵀ · t / M                         (decoder side, dense in E)
      + scatter-add over ids of dL/d(E[ids])               (input side, through all layers)

Frozen weights get no gradients: every backward helper returns the activation gradient only,
which halves the backward matmuls and caches nothing a weight gradient would need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import ndtr

from sparc_local.model.weights import ArchConfig, Weights

Mode = Literal["exact", "output_only"]
MODES: tuple[str, ...] = ("exact", "output_only")
IGNORE = -100  # label of positions that are not predicted (torch/HF convention)
_NEG = -1e9  # additive attention bias for padding keys: exp underflows to exactly 0, no overflow
# exp(x) for x < -87 is a float32 subnormal, and subnormal operands can make x86 arithmetic many
# times slower (0.3% of MiniLM's layer-0 attention weights on random tokens were subnormal; peaked
# real attention has more). Softmax terms below e^-60 of the row maximum are therefore set to
# exactly 0: a relative change < 1e-26, at the cost of two cheap passes.
_EXP_FLOOR = -60.0
_GELU_TAIL = 10.0  # x·φ(x) < 1e-21 beyond this; clipping keeps exp(-x²/2) out of subnormals
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# ---------------------------------------------------------------- per-op forward / backward

def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """y = x·wᵀ + b with torch's (out, in) weight layout; x is 2-D so BLAS sees one big GEMM."""
    y = x @ w.T
    y += b
    return y


def linear_backward(dy: np.ndarray, w: np.ndarray) -> np.ndarray:
    """dL/dx of a frozen linear layer (no weight gradient)."""
    return dy @ w


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float
               ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """LayerNorm over the last axis; returns (y, (x̂, 1/σ)) — all its backward needs."""
    xc = x - x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    xc *= rstd
    y = xc * g
    y += b
    return y, (xc, rstd)


def layer_norm_backward(dy: np.ndarray, g: np.ndarray, cache: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """dx = (1/σ)·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)), dx̂ = dy·γ."""
    xhat, rstd = cache
    dxh = dy * g
    dx = dxh - dxh.mean(-1, keepdims=True)
    dx -= xhat * (dxh * xhat).mean(-1, keepdims=True)
    dx *= rstd
    return dx


# Rational minimax erf on [-4, 4] (Eigen's float32 erf, as in XLA): |error| < 5e-7 in float32,
# several times cheaper than scipy's erf; float64 (the gradient test) keeps the exact ndtr.
_ERF_P = tuple(np.float32(c) for c in (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                                      -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                                      -1.60960333262415e-02))
_ERF_Q = tuple(np.float32(c) for c in (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                                      -7.37332916720468e-03, -1.42647390514189e-02))
_CHUNK = 1 << 16  # elements per block: the ~15 elementwise passes stay in L2 cache


def _erf32(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, -4.0, 4.0)
    x2 = x * x
    p = x2 * _ERF_P[0]
    p += _ERF_P[1]
    for c in _ERF_P[2:]:
        p *= x2
        p += c
    p *= x
    q = x2 * _ERF_Q[0]
    q += _ERF_Q[1]
    for c in _ERF_Q[2:]:
        q *= x2
        q += c
    p /= q
    return p


def _gelu_block(x: np.ndarray, y: np.ndarray, dy_dx: np.ndarray | None) -> None:
    """y = x·Φ(x) and, if asked, dy/dx = Φ(x) + x·φ(x), for one block."""
    if x.dtype == np.float32:
        cdf = _erf32(x * np.float32(1 / math.sqrt(2)))
        cdf += 1
        cdf *= 0.5
    else:
        cdf = ndtr(x)
    np.multiply(x, cdf, out=y)
    if dy_dx is not None:
        xc = np.clip(x, -_GELU_TAIL, _GELU_TAIL)
        pdf = xc * xc
        pdf *= -0.5
        np.exp(pdf, out=pdf)
        pdf *= xc
        pdf *= _INV_SQRT_2PI
        np.add(pdf, cdf, out=dy_dx)


def gelu(x: np.ndarray, keep_grad: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Exact (erf) GELU x·Φ(x), as BERT uses (sparc_lab/model.py F.gelu).

    Returns (y, GELU'(x)): caching the derivative instead of x and Φ(x) halves the cache and
    makes the backward a single multiply.
    """
    y = np.empty_like(x)
    d = np.empty_like(x) if keep_grad else None
    fx, fy = x.reshape(-1), y.reshape(-1)
    fd = d.reshape(-1) if d is not None else None
    for i in range(0, fx.size, _CHUNK):
        sl = slice(i, i + _CHUNK)
        _gelu_block(fx[sl], fy[sl], fd[sl] if fd is not None else None)
    return y, d


def gelu_backward(dy: np.ndarray, dgelu: np.ndarray) -> np.ndarray:
    return dy * dgelu


def _exp_no_subnormals(s: np.ndarray) -> None:
    """In place exp of max-shifted scores (all ≤ 0), with terms below e^_EXP_FLOOR set to 0."""
    np.maximum(s, _EXP_FLOOR, out=s)
    tiny = s == _EXP_FLOOR
    np.exp(s, out=s)
    np.copyto(s, 0.0, where=tiny)


def attention(qs: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """softmax(qs·kᵀ + bias)·v per head; qs is q already scaled by 1/√d_h. Returns (ctx, P)."""
    s = qs @ k.transpose(0, 1, 3, 2)
    s += bias
    s -= s.max(-1, keepdims=True)
    _exp_no_subnormals(s)
    s /= s.sum(-1, keepdims=True)
    return s @ v, s


def attention_backward(dctx: np.ndarray, qs: np.ndarray, k: np.ndarray, v: np.ndarray, p: np.ndarray,
                       scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dq, dk, dv); softmax backward dS = P ⊙ (dP − rowsum(dP ⊙ P))."""
    dv = p.transpose(0, 1, 3, 2) @ dctx
    ds = dctx @ v.transpose(0, 1, 3, 2)
    ds -= (ds * p).sum(-1, keepdims=True)
    ds *= p
    dq = ds @ k
    dq *= scale
    dk = ds.transpose(0, 1, 3, 2) @ qs
    return dq, dk, dv


# ---------------------------------------------------------------- frozen weights

@dataclass
class FrozenWeights:
    """The frozen parameters, cast once to the compute dtype, with Q/K/V fused into one GEMM."""

    cfg: ArchConfig
    dtype: np.dtype
    pos: np.ndarray
    type_: np.ndarray | None
    emb_ln: tuple[np.ndarray, np.ndarray]
    layers: list[dict[str, np.ndarray]]
    head_w: np.ndarray
    head_b: np.ndarray
    head_ln: tuple[np.ndarray, np.ndarray]
    out_bias: np.ndarray


def prepare(cfg: ArchConfig, w: Weights, dtype: np.dtype | type = np.float32) -> FrozenWeights:
    """Cast and fuse the frozen weights; do it once per run, not per step."""
    dt = np.dtype(dtype)
    missing = [k for k in ("mlm.dense.w", "mlm.dense.b", "mlm.ln.w", "mlm.ln.b", "mlm.bias") if k not in w]
    if missing:
        raise ValueError(f"weights have no MLM head ({', '.join(missing)}): adapt needs the pretraining head")
    c = lambda k: np.ascontiguousarray(w[k], dtype=dt)
    layers = []
    for i in range(cfg.layers):
        p = f"l{i}."
        layers.append({
            "qkv.w": np.concatenate([c(p + "q.w"), c(p + "k.w"), c(p + "v.w")], axis=0),
            "qkv.b": np.concatenate([c(p + "q.b"), c(p + "k.b"), c(p + "v.b")]),
            **{n: c(p + n) for n in ("o.w", "o.b", "ln1.w", "ln1.b", "ff1.w", "ff1.b", "ff2.w", "ff2.b",
                                     "ln2.w", "ln2.b")},
        })
    type_ = c("emb.type") if cfg.type_vocab and "emb.type" in w else None
    return FrozenWeights(cfg, dt, c("emb.pos"), type_, (c("emb.ln.w"), c("emb.ln.b")), layers,
                         c("mlm.dense.w"), c("mlm.dense.b"), (c("mlm.ln.w"), c("mlm.ln.b")), c("mlm.bias"))


# ---------------------------------------------------------------- encoder

@dataclass
class _LayerCache:
    qs: np.ndarray  # (B, h, L, dh), q·1/√dh
    k: np.ndarray
    v: np.ndarray
    p: np.ndarray  # (B, h, L, L) attention probabilities
    ln1: tuple[np.ndarray, np.ndarray]
    dgelu: np.ndarray  # (N or R, I) GELU'(ff1 pre-activation)
    ln2: tuple[np.ndarray, np.ndarray]
    rows: np.ndarray | None  # the R output rows kept (top layer), None for all


def _layer_forward(fw: FrozenWeights, lw: dict[str, np.ndarray], x: np.ndarray, bias: np.ndarray,
                   b: int, l: int, keep: bool, rows: np.ndarray | None = None
                   ) -> tuple[np.ndarray, _LayerCache | None]:
    """One post-LN block, matching sparc_lab/model.py: x = LN(x + attn(x)); x = LN(x + ffn(x)).

    With `rows`, only those output rows are computed: everything after attention is row-wise, so
    the top layer needs keys/values of all tokens but the FFN only at masked positions (~10% of
    the encoder's work saved, forward and backward).
    """
    h = fw.cfg.heads
    dh = fw.cfg.hidden // h
    qkv = linear(x, lw["qkv.w"], lw["qkv.b"]).reshape(b, l, 3, h, dh).transpose(2, 0, 3, 1, 4)
    qs = np.ascontiguousarray(qkv[0])
    qs *= 1.0 / math.sqrt(dh)
    k, v = np.ascontiguousarray(qkv[1]), np.ascontiguousarray(qkv[2])
    del qkv
    ctx, p = attention(qs, k, v, bias)
    ctx = ctx.transpose(0, 2, 1, 3).reshape(b * l, h * dh)
    if rows is not None:
        ctx, x = ctx[rows], x[rows]
    a = linear(ctx, lw["o.w"], lw["o.b"])
    a += x
    x1, ln1 = layer_norm(a, lw["ln1.w"], lw["ln1.b"], fw.cfg.eps)
    u = linear(x1, lw["ff1.w"], lw["ff1.b"])
    g, dgelu = gelu(u, keep)
    del u
    f = linear(g, lw["ff2.w"], lw["ff2.b"])
    f += x1
    x2, ln2 = layer_norm(f, lw["ln2.w"], lw["ln2.b"], fw.cfg.eps)
    if dgelu is None:  # keep=False: no backward will run
        return x2, None
    return x2, _LayerCache(qs, k, v, p, ln1, dgelu, ln2, rows)


def _layer_backward(fw: FrozenWeights, lw: dict[str, np.ndarray], c: _LayerCache, dx2: np.ndarray,
                    b: int, l: int) -> np.ndarray:
    """Activation gradient of one block, in reverse order of _layer_forward."""
    h = fw.cfg.heads
    dh = fw.cfg.hidden // h
    df = layer_norm_backward(dx2, lw["ln2.w"], c.ln2)
    dx1 = linear_backward(gelu_backward(linear_backward(df, lw["ff2.w"]), c.dgelu), lw["ff1.w"])
    dx1 += df
    da = layer_norm_backward(dx1, lw["ln1.w"], c.ln1)
    dctx = linear_backward(da, lw["o.w"])
    if c.rows is not None:  # other rows' outputs were never computed: their gradient is 0
        full = np.zeros((b * l, h * dh), dtype=da.dtype)
        full[c.rows] = dctx
        dctx = full
    dctx = dctx.reshape(b, l, h, dh).transpose(0, 2, 1, 3)
    dq, dk, dv = attention_backward(dctx, c.qs, c.k, c.v, c.p, 1.0 / math.sqrt(dh))
    dqkv = np.stack([dq, dk, dv]).transpose(1, 3, 0, 2, 4).reshape(b * l, 3 * h * dh)
    dx = linear_backward(dqkv, lw["qkv.w"])
    if c.rows is not None:
        dx[c.rows] += da
    else:
        dx += da
    return dx


# ---------------------------------------------------------------- loss and gradient

def forward_backward(cfg: ArchConfig, w: Weights | FrozenWeights, E: np.ndarray, ids: np.ndarray,
                     types: np.ndarray | None, mask: np.ndarray, labels: np.ndarray,
                     mode: Mode = "exact", rows: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """MLM loss and dL/dE for one batch (B, L); computed in E's dtype.

    mode "exact": both paths of the tied E (decoder + input embedding through every layer).
    mode "output_only": decoder-side gradient only, the encoder is run forward without caches
    (the input-side term is dropped; it is the part that needs the full backward pass).
    A "truncated" mode (input-side gradient through a subset of layers) is reserved, not built.
    `rows` (sorted token ids): the gradient of those rows of E only, shape (len(rows), d); the
    decoder-side product then costs len(rows)/|V| of the full one.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    dt = E.dtype
    fw = w if isinstance(w, FrozenWeights) else prepare(cfg, w, dt)
    if fw.dtype != dt:
        raise ValueError(f"weights prepared as {fw.dtype}, E is {dt}")
    ids = np.asarray(ids)
    b, l = ids.shape
    d = cfg.hidden
    n = b * l
    flat_ids = ids.reshape(n)
    sel = np.flatnonzero(np.asarray(labels).reshape(n) != IGNORE)
    if sel.size == 0:
        return 0.0, np.zeros_like(E if rows is None else E[rows])
    exact = mode == "exact"

    # embeddings (BERT: word + position + segment; DistilBERT: no segment)
    x = E[flat_ids].reshape(b, l, d)
    x += fw.pos[:l]
    if fw.type_ is not None:
        x += fw.type_[np.zeros_like(ids) if types is None else np.asarray(types)]
    x, emb_ln = layer_norm(x.reshape(n, d), *fw.emb_ln, cfg.eps)
    bias = np.where(np.asarray(mask).reshape(b, 1, 1, l) > 0, 0.0, _NEG).astype(dt)
    caches: list[_LayerCache] = []
    for i, lw in enumerate(fw.layers):
        top = i == len(fw.layers) - 1
        x, c = _layer_forward(fw, lw, x, bias, b, l, exact, rows=sel if top else None)
        if c is not None:
            caches.append(c)
    if not fw.layers:
        x = x[sel]

    # MLM head on the masked rows only: the (M, |V|) logits are the largest tensor of the step
    z = linear(x, fw.head_w, fw.head_b)
    del x
    gz, dgz = gelu(z, exact)
    del z
    t, head_ln = layer_norm(gz, *fw.head_ln, cfg.eps)
    del gz
    logits = t @ E.T
    logits += fw.out_bias
    masked = np.arange(sel.size)
    y = np.asarray(labels).reshape(n)[sel]
    # stable log-sum-exp; logits turns into softmax in place
    logits -= logits.max(-1, keepdims=True)
    picked = logits[masked, y].copy()
    _exp_no_subnormals(logits)
    sums = logits.sum(-1)
    loss = float(np.mean(np.log(sums.astype(np.float64)) - picked))
    logits /= sums[:, None]
    logits[masked, y] -= 1.0
    logits *= 1.0 / sel.size  # dL/dlogits
    grad = (logits.T if rows is None else logits[:, rows].T) @ t  # decoder side
    if not exact:
        return loss, grad

    # input side: head → encoder → embedding LayerNorm → scatter-add into rows of E
    assert dgz is not None  # gelu(z, exact) kept its derivative
    dt_ = (E.T @ logits.T).T  # = logits·E; this operand order is ~25% faster in OpenBLAS
    del logits
    dz = linear_backward(gelu_backward(layer_norm_backward(dt_, fw.head_ln[0], head_ln), dgz), fw.head_w)
    if fw.layers:
        dx = dz  # the top layer takes the masked rows only
    else:
        dx = np.zeros((n, d), dtype=dt)
        dx[sel] = dz
    for lw in reversed(fw.layers):
        dx = _layer_backward(fw, lw, caches.pop(), dx, b, l)  # pop: each cache is freed once used
    dx = layer_norm_backward(dx, fw.emb_ln[0], emb_ln)
    if rows is None:
        _scatter_add_rows(grad, flat_ids, dx)
    else:  # input positions of other tokens feed no trained row
        at = np.searchsorted(rows, flat_ids).clip(max=len(rows) - 1)
        keep = np.flatnonzero(rows[at] == flat_ids)
        _scatter_add_rows(grad, at[keep], dx[keep])
    return loss, grad


def _scatter_add_rows(out: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> None:
    """out[idx[i]] += rows[i] with repeated indices summed (sort + reduceat; faster than add.at)."""
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    uniq, starts = np.unique(sorted_idx, return_index=True)
    out[uniq] += np.add.reduceat(rows[order], starts, axis=0)
