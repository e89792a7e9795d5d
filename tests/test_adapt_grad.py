"""The numpy MLM gradient of `adapt` against torch autograd, masking statistics, and resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from sparc_lab.model import TorchEncoder
from sparc_local.adapt import TokenBatch, adapt_embeddings, forward_backward, mask_tokens
from tests.tiny import random_weights

LAYOUTS = ["bert", "distilbert"]
PAD, MASK_ID = 0, 4


def _tiny(layout: str):
    return random_weights(layout, vocab=120, hidden=32, layers=2, heads=4, intermediate=64, max_positions=64,
                          seed=3, mlm_head=True)


def _batch(seed: int = 0, b: int = 3, l: int = 11, vocab: int = 120):
    """Random ids with ragged lengths (right padding), segment ids, and ~30% masked labels."""
    rng = np.random.default_rng(seed)
    lengths = np.array([l, l - 4, 5])[:b]
    mask = (np.arange(l)[None, :] < lengths[:, None]).astype(np.int64)
    ids = np.where(mask > 0, rng.integers(5, vocab, size=(b, l)), PAD)
    types = np.where(np.arange(l)[None, :] >= lengths[:, None] // 2, 1, 0) * mask
    labels = np.where((rng.random((b, l)) < 0.3) & (mask > 0), rng.integers(0, vocab, size=(b, l)), -100)
    labels[0, 1] = 7  # at least one label, and a repeated id across rows
    return ids, types, mask, labels


def _torch_ref(cfg, w, ids, types, mask, labels, input_side: bool):
    """Loss and dL/dE from torch autograd (float64), MLM head written out here."""
    enc = TorchEncoder(cfg, w).double()
    t = lambda k: torch.from_numpy(np.asarray(w[k], dtype=np.float64))
    if input_side:
        enc.word.requires_grad_(True)
        e_dec = enc.word
    else:  # decoder side only: the input embedding is a detached copy
        e_dec = torch.nn.Parameter(enc.word.detach().clone())
    h = enc(torch.from_numpy(ids), torch.from_numpy(types), torch.from_numpy(mask))
    z = F.layer_norm(F.gelu(F.linear(h, t("mlm.dense.w"), t("mlm.dense.b"))), (cfg.hidden,),
                     t("mlm.ln.w"), t("mlm.ln.b"), cfg.eps)
    logits = z @ e_dec.T + t("mlm.bias")
    loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), torch.from_numpy(labels).reshape(-1),
                           ignore_index=-100)
    loss.backward()
    return loss.item(), e_dec.grad.numpy()


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mode", ["exact", "output_only"])
def test_grad_matches_torch_float64(layout: str, mode: str) -> None:
    cfg, w = _tiny(layout)
    ids, types, mask, labels = _batch()
    w64 = {k: v.astype(np.float64) for k, v in w.items()}
    loss, g = forward_backward(cfg, w64, w64["emb.word"].copy(), ids, types, mask, labels, mode=mode)
    ref_loss, ref_g = _torch_ref(cfg, w, ids, types, mask, labels, input_side=mode == "exact")
    assert g.dtype == np.float64
    assert abs(loss - ref_loss) <= 1e-9 * abs(ref_loss)
    assert _rel(g, ref_g) <= 1e-4
    # the input-side part alone (exact − output_only) matches too, so neither path hides the other
    if mode == "exact":
        _, g_out = forward_backward(cfg, w64, w64["emb.word"].copy(), ids, types, mask, labels, mode="output_only")
        assert _rel(g - g_out, ref_g - _torch_ref(cfg, w, ids, types, mask, labels, False)[1]) <= 1e-4


@pytest.mark.parametrize("layout", LAYOUTS)
def test_grad_float32_close_to_torch(layout: str) -> None:
    """The run-time float32 path (what adapt uses) stays within float32 rounding of the reference."""
    cfg, w = _tiny(layout)
    ids, types, mask, labels = _batch(seed=1)
    loss, g = forward_backward(cfg, w, w["emb.word"].copy(), ids, types, mask, labels)
    ref_loss, ref_g = _torch_ref(cfg, w, ids, types, mask, labels, input_side=True)
    assert g.dtype == np.float32
    assert abs(loss - ref_loss) <= 1e-5 * abs(ref_loss)
    assert _rel(g, ref_g) <= 1e-4


@pytest.mark.parametrize("mode", ["exact", "output_only"])
def test_grad_of_some_rows_is_those_rows_of_the_full_grad(mode: str) -> None:
    """adapt's row rule: the gradient of a subset of E's rows, input positions of other tokens included."""
    cfg, w = _tiny("bert")
    ids, types, mask, labels = _batch(seed=2)
    w64 = {k: v.astype(np.float64) for k, v in w.items()}
    E = w64["emb.word"].copy()
    _, full = forward_backward(cfg, w64, E, ids, types, mask, labels, mode=mode)
    rows = np.unique(np.concatenate([ids[0, :4], [1, 2, 119]]))  # some input tokens, some never in the batch
    assert np.setdiff1d(ids[mask > 0], rows).size  # other input tokens exist, so the filter is exercised
    loss, part = forward_backward(cfg, w64, E, ids, types, mask, labels, mode=mode, rows=rows)
    assert part.shape == (len(rows), cfg.hidden)
    np.testing.assert_allclose(part, full[rows], rtol=1e-12, atol=1e-15)


def test_adapt_with_rows_changes_only_those_rows() -> None:
    cfg, w = _tiny("bert")
    rows = np.arange(5, 60)
    E = adapt_embeddings(cfg, w, _batches(cfg, 3), steps=3, lr=1e-2, seed=0, mask_id=MASK_ID, rows=rows)
    moved = np.flatnonzero(np.any(E != w["emb.word"], axis=1))
    assert moved.size > 0 and set(moved) <= set(rows.tolist())
    with pytest.raises(ValueError, match="sorted"):
        adapt_embeddings(cfg, w, _batches(cfg, 1), steps=1, mask_id=MASK_ID, rows=rows[::-1])


def test_no_labels_gives_zero_gradient() -> None:
    cfg, w = _tiny("bert")
    ids, types, mask, _ = _batch()
    loss, g = forward_backward(cfg, w, w["emb.word"].copy(), ids, types, mask, np.full(ids.shape, -100))
    assert loss == 0.0 and not g.any()


def test_masking_statistics() -> None:
    rng = np.random.default_rng(0)
    b, l, vocab = 512, 64, 1000
    lengths = rng.integers(8, l + 1, size=b)
    ids = rng.integers(10, vocab, size=(b, l))
    special = np.arange(l)[None, :] >= lengths[:, None] - 1  # [SEP] and padding
    special[:, 0] = True  # [CLS]
    inputs, labels = mask_tokens(ids, special, rng, vocab, mask_id=MASK_ID)
    chosen = labels != -100
    assert not (chosen & special).any()
    assert np.array_equal(labels[chosen], ids[chosen])
    assert np.array_equal(inputs[~chosen], ids[~chosen])
    assert (chosen.sum(1) >= 1).all()
    assert abs(chosen.sum() / (~special).sum() - 0.15) < 0.01
    n = chosen.sum()
    to_mask = (inputs[chosen] == MASK_ID).mean()
    same = (inputs[chosen] == ids[chosen]).mean()
    to_random = 1 - to_mask - same
    assert abs(to_mask - 0.8) < 0.03 and abs(same - 0.1) < 0.03 and abs(to_random - 0.1) < 0.03, n
    # a one-token sentence still gets a prediction
    one = np.array([[2, 50, 3, 0]])
    _, lab = mask_tokens(one, np.array([[True, False, True, True]]), rng, vocab, mask_id=MASK_ID)
    assert lab.tolist() == [[-100, 50, -100, -100]]


def _batches(cfg, n: int):
    """A replayable batch stream: same seed, same sequence."""
    rng = np.random.default_rng(42)
    for _ in range(n):
        ids, types, mask, _ = _batch(seed=int(rng.integers(1 << 30)), vocab=cfg.vocab_size)
        special = mask == 0
        special[:, 0] = True
        yield TokenBatch(ids, types, mask, special)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_resume_is_bit_identical(layout: str, tmp_path: Path) -> None:
    cfg, w = _tiny(layout)
    kw = dict(lr=1e-2, seed=5, mask_id=MASK_ID, checkpoint_every=2)
    losses: list[float] = []
    full = adapt_embeddings(cfg, w, _batches(cfg, 7), steps=7, on_step=lambda s, x: losses.append(x), **kw)
    assert len(losses) == 7 and not np.array_equal(full, w["emb.word"])

    ckpt = tmp_path / "adapt.npz"

    class Stop(Exception):
        pass

    def stop_at_5(step: int, loss: float) -> None:
        if step == 5:
            raise Stop  # crash after step 5; the last checkpoint is step 4

    with pytest.raises(Stop):
        adapt_embeddings(cfg, w, _batches(cfg, 7), steps=7, checkpoint_path=ckpt, on_step=stop_at_5, **kw)
    assert ckpt.exists() and not ckpt.with_name(ckpt.name + ".tmp").exists()
    with np.load(ckpt) as z:
        assert int(z["step"]) == 4
    seen: list[int] = []
    resumed = adapt_embeddings(cfg, w, _batches(cfg, 7), steps=7, checkpoint_path=ckpt,
                               on_step=lambda s, x: seen.append(s), **kw)
    assert seen == [5, 6, 7]
    assert np.array_equal(resumed, full)
    with pytest.raises(ValueError, match="different run"):
        adapt_embeddings(cfg, w, _batches(cfg, 7), steps=7, checkpoint_path=ckpt, **{**kw, "seed": 6})
