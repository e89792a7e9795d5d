"""A tiny reranker whose scores the tests choose: the tiny encoder's random weights (tests/tiny.py)
with a head that reads one direction of [CLS]'s output, and a numpy forward of the same network as
the reference the exported graph is checked against."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.special import erf

from sparc_local.model.weights import ArchConfig, Weights, save_canonical
from sparc_local.rerank.export import HEAD_B, HEAD_W, export_reranker
from sparc_local.rerank.model import RerankInfo
from tests.tiny import random_weights, tiny_vocab, write_tokenizer


def tiny_reranker_weights(seed: int = 0) -> tuple[ArchConfig, Weights]:
    cfg, w = random_weights("bert", vocab=len(tiny_vocab()), hidden=32, layers=2, heads=4, intermediate=64,
                            max_positions=64, seed=seed, mlm_head=False)
    rng = np.random.default_rng(seed + 1)
    w[HEAD_W] = rng.standard_normal((1, cfg.hidden)).astype(np.float32)
    w[HEAD_B] = np.array([0.25], np.float32)
    return cfg, w


def write_checkpoint(path: Path, cfg: ArchConfig, w: Weights) -> Path:
    save_canonical(path, cfg, w)
    return path


def make_tiny_reranker(folder: Path, seed: int = 0, quant: str = "fp32", n: int = 5, alpha: float = 0.0,
                       likely: float = 0.0, weights: tuple[ArchConfig, Weights] | None = None) -> RerankInfo:
    cfg, w = weights or tiny_reranker_weights(seed)
    folder.mkdir(parents=True, exist_ok=True)
    tok = write_tokenizer(folder.parent / f"{folder.name}-tokenizer.json")
    return export_reranker(cfg, w, tok, folder, name="tiny-rerank", source="random (tests)", n=n, max_length=48,
                           alpha=alpha, likely=likely, quant=quant)


def reference_logits(cfg: ArchConfig, w: Weights, ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """BERT's forward in float64 numpy, written from the paper's equations, then the head on [CLS]."""
    def ln(x, key):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + cfg.eps) * w[f"{key}.w"] + w[f"{key}.b"]

    def lin(x, key):
        return x @ w[f"{key}.w"].T.astype(np.float64) + w[f"{key}.b"]

    B, L = ids.shape
    d = cfg.hidden // cfg.heads
    x = ln(w["emb.word"][ids] + w["emb.pos"][np.arange(L)] + w["emb.type"][types], "emb.ln").astype(np.float64)
    bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9)
    for i in range(cfg.layers):
        q, k, v = (lin(x, f"l{i}.{n}").reshape(B, L, cfg.heads, d).transpose(0, 2, 1, 3) for n in "qkv")
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, L, cfg.hidden)
        x = ln(x + lin(ctx, f"l{i}.o"), f"l{i}.ln1")
        h = lin(x, f"l{i}.ff1")
        x = ln(x + lin(0.5 * h * (1 + erf(h / np.sqrt(2))), f"l{i}.ff2"), f"l{i}.ln2")
    return x[:, 0] @ w[HEAD_W][0].astype(np.float64) + float(w[HEAD_B][0])


def steered_weights(word: str, seed: int = 0) -> tuple[ArchConfig, Weights]:
    """A reranker that scores a passage by how much of it is ``word``: every token attends to all
    tokens alike (Q = K = 0) and adds their mean (V = O = identity, no feed-forward), so [CLS]'s
    output leans toward the average input embedding, and the head reads ``word``'s direction."""
    cfg, w = tiny_reranker_weights(seed)
    eye = np.eye(cfg.hidden, dtype=np.float32)
    zero = np.zeros(cfg.hidden, np.float32)
    w["emb.pos"][:] = 0
    w["emb.type"][:] = 0
    w["emb.ln.w"][:], w["emb.ln.b"][:] = 1, 0
    for i in range(cfg.layers):
        w[f"l{i}.q.w"][:], w[f"l{i}.k.w"][:] = 0, 0
        w[f"l{i}.q.b"][:], w[f"l{i}.k.b"][:] = 0, 0
        w[f"l{i}.v.w"], w[f"l{i}.o.w"] = eye.copy(), eye.copy()
        w[f"l{i}.v.b"], w[f"l{i}.o.b"] = zero.copy(), zero.copy()
        w[f"l{i}.ff2.w"][:], w[f"l{i}.ff2.b"][:] = 0, 0
        w[f"l{i}.ln1.w"][:], w[f"l{i}.ln1.b"][:] = 1, 0
        w[f"l{i}.ln2.w"][:], w[f"l{i}.ln2.b"][:] = 1, 0
    e = w["emb.word"][tiny_vocab().index(word)]
    w[HEAD_W] = (4 * (e - e.mean()) / np.linalg.norm(e - e.mean()))[None, :].astype(np.float32)
    w[HEAD_B] = np.zeros(1, np.float32)
    return cfg, w
