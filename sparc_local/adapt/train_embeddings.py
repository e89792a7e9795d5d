"""The `adapt` training loop: BERT masking, Adam on E only, atomic checkpoints, resume.

SPARC §5.1: after fine-tuning, train the original PLM's word-embedding matrix with MLM on the
target-domain sentences, all other parameters fixed, then swap it into the retrieval model.
The paper trains with lr 5e-5 on CPU; so does this, in numpy (no torch at run time).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sparc_local.adapt.mlm import IGNORE, FrozenWeights, Mode, forward_backward, prepare
from sparc_local.model.weights import ArchConfig, Weights

_CKPT_VERSION = 1


class TokenBatch(NamedTuple):
    """One padded batch of the user's sentences, before masking."""

    ids: np.ndarray  # (B, L) token ids
    types: np.ndarray | None  # (B, L) segment ids; None for DistilBERT or all-zero
    attention_mask: np.ndarray  # (B, L) 1 for real tokens, 0 for padding
    special_mask: np.ndarray  # (B, L) True where a token may never be masked: [CLS], [SEP], padding


def pad_sequences(seqs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Right-pad "[CLS] … [SEP]" sequences: ids, attention mask, and the positions never masked
    for MLM ([CLS], the final [SEP], padding)."""
    length = max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), length), np.int64)
    mask = np.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
    special = mask == 0
    special[:, 0] = True
    special[np.arange(len(seqs)), mask.sum(1) - 1] = True
    return ids, mask, special


def mask_tokens(ids: np.ndarray, special_mask: np.ndarray, rng: np.random.Generator, vocab_size: int,
                p: float = 0.15, *, mask_id: int) -> tuple[np.ndarray, np.ndarray]:
    """BERT masking (Devlin et al. 2019, §3.1 / A.1); returns (input ids, labels).

    Per sequence, round(p·n) of its n eligible positions (at least 1) are chosen uniformly, as in
    BERT's create_pretraining_data; of those 80% become [MASK], 10% a uniformly random token,
    10% stay unchanged. Labels hold the original id there and -100 elsewhere. Random draws
    have fixed shapes, so the rng stream depends only on the batch shape (reproducible resume).
    """
    ids = np.asarray(ids)
    eligible = ~np.asarray(special_mask, dtype=bool)
    n_ok = eligible.sum(axis=1)
    if not n_ok.any():
        raise ValueError("batch has no maskable token (all special or padding)")
    k = np.where(n_ok > 0, np.maximum(1, np.rint(p * n_ok)), 0).astype(np.int64)
    keys = rng.random(ids.shape)
    keys[~eligible] = np.inf
    rank = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")
    chosen = rank < k[:, None]
    action = rng.random(ids.shape)
    random_ids = rng.integers(0, vocab_size, size=ids.shape, dtype=ids.dtype)
    labels = np.where(chosen, ids, IGNORE).astype(np.int64)
    inputs = ids.copy()
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, labels


class Adam:
    """Adam (Kingma & Ba 2015) for one array, updated in place; same arithmetic as torch.optim.Adam.

    Dense on purpose: the tied decoder gives every row of E a gradient each step, so a row-sparse
    variant would save nothing.
    """

    def __init__(self, shape: tuple[int, ...], lr: float = 5e-5, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, dtype: np.dtype | type = np.float32) -> None:
        self.lr, self.beta1, self.beta2, self.eps = lr, betas[0], betas[1], eps
        self.m = np.zeros(shape, dtype)
        self.v = np.zeros(shape, dtype)
        self.t = 0
        self._tmp = np.empty(shape, dtype)  # scratch, so a step allocates nothing

    def step(self, param: np.ndarray, grad: np.ndarray) -> None:
        """param -= lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + eps)."""
        self.t += 1
        b1, b2, tmp = self.beta1, self.beta2, self._tmp
        self.m *= b1
        np.multiply(grad, 1 - b1, out=tmp)
        self.m += tmp
        self.v *= b2
        np.multiply(grad, grad, out=tmp)
        tmp *= 1 - b2
        self.v += tmp
        bc1 = 1 - b1 ** self.t
        bc2 = 1 - b2 ** self.t
        np.sqrt(self.v, out=tmp)
        tmp /= np.sqrt(bc2)
        tmp += self.eps
        np.divide(self.m, tmp, out=tmp)
        tmp *= self.lr / bc1
        param -= tmp


def _rng_state_bytes(rng: np.random.Generator) -> np.ndarray:
    return np.frombuffer(json.dumps(rng.bit_generator.state).encode(), dtype=np.uint8)


def save_checkpoint(path: Path, step: int, E: np.ndarray, opt: Adam, rng: np.random.Generator, meta: dict) -> None:
    """Write atomically (tmp file + fsync + os.replace): a crash leaves the old or the new one."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, version=np.int64(_CKPT_VERSION), step=np.int64(step), adam_t=np.int64(opt.t), E=E, m=opt.m,
                 v=opt.v, rng=_rng_state_bytes(rng),
                 meta=np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _load_checkpoint(path: Path, E: np.ndarray, opt: Adam, rng: np.random.Generator, meta: dict) -> int:
    """Restore E, Adam and the rng in place; returns the number of completed steps."""
    with np.load(path) as z:
        saved = json.loads(bytes(z["meta"]).decode())
        if saved != meta:
            raise ValueError(f"checkpoint {path} was written by a different run ({saved} != {meta}); "
                             "delete it to start over")
        if z["E"].shape != E.shape:
            raise ValueError(f"checkpoint {path} has E of shape {z['E'].shape}, expected {E.shape}")
        E[...] = z["E"]
        opt.m[...] = z["m"]
        opt.v[...] = z["v"]
        opt.t = int(z["adam_t"])
        rng.bit_generator.state = json.loads(bytes(z["rng"]).decode())
        return int(z["step"])


def train_step(cfg: ArchConfig, fw: FrozenWeights, E: np.ndarray, opt: Adam, batch: TokenBatch,
               rng: np.random.Generator, *, mask_id: int, mode: Mode = "exact", mask_prob: float = 0.15,
               rows: np.ndarray | None = None) -> float:
    """One MLM step on E in place (only `rows` of it, if given); returns the loss.

    A non-finite loss leaves E untouched, so the caller can stop at the last good step.
    """
    inputs, labels = mask_tokens(batch.ids, batch.special_mask, rng, cfg.vocab_size, mask_prob, mask_id=mask_id)
    loss, grad = forward_backward(cfg, fw, E, inputs, batch.types, batch.attention_mask, labels, mode=mode, rows=rows)
    if not np.isfinite(loss):
        return loss
    if rows is None:
        opt.step(E, grad)
    else:
        trained = E[rows]
        opt.step(trained, grad)
        E[rows] = trained
    return loss


def adapt_embeddings(cfg: ArchConfig, w: Weights, batches_iter: Iterable[TokenBatch], steps: int = 500,
                     lr: float = 5e-5, seed: int = 0, checkpoint_path: Path | None = None,
                     checkpoint_every: int = 25, on_step: Callable[[int, float], None] | None = None, *,
                     mask_id: int, mode: Mode = "exact", mask_prob: float = 0.15,
                     rows: np.ndarray | None = None) -> np.ndarray:
    """Train E = w["emb.word"] with MLM, everything else frozen; returns the adapted E (float32).

    `rows` (sorted token ids): only those rows of E train, the others keep their values (see
    run.trainable_rows for why); None trains every row.

    Deterministic given `seed` and the batch sequence. If `checkpoint_path` exists the run resumes
    from it; `batches_iter` must then replay the same sequence from the start: the batches of
    completed steps are skipped. Stops early if the batches run out. `on_step(step, loss)` gets
    the 1-based number of completed steps.
    """
    E = np.array(w["emb.word"], dtype=np.float32, copy=True)
    fw = prepare(cfg, w, np.float32)
    if rows is not None:
        rows = np.asarray(rows, np.int64)
        if rows.size == 0 or np.any(np.diff(rows) <= 0) or rows[0] < 0 or rows[-1] >= len(E):
            raise ValueError("rows must be distinct, sorted token ids of E")
    opt = Adam(E.shape if rows is None else (len(rows), E.shape[1]), lr=lr)
    rng = np.random.default_rng(seed)
    meta: dict[str, object] = {"seed": seed, "lr": lr, "mode": mode, "mask_prob": mask_prob, "mask_id": mask_id,
            "shape": list(E.shape)}
    if rows is not None:
        meta["rows"] = hashlib.sha256(rows.tobytes()).hexdigest()
    ckpt = Path(checkpoint_path) if checkpoint_path is not None else None
    step = _load_checkpoint(ckpt, E, opt, rng, meta) if ckpt is not None and ckpt.exists() else 0
    it: Iterator[TokenBatch] = iter(batches_iter)
    for _ in range(step):  # replay: skip batches already trained on
        if next(it, None) is None:
            return E
    last_saved = step
    while step < steps:
        batch = next(it, None)
        if batch is None:
            break
        loss = train_step(cfg, fw, E, opt, batch, rng, mask_id=mask_id, mode=mode, mask_prob=mask_prob, rows=rows)
        if not np.isfinite(loss):
            raise FloatingPointError(f"MLM loss is {loss} at step {step + 1}; E left at the last good step")
        step += 1
        if ckpt is not None and checkpoint_every > 0 and step % checkpoint_every == 0:
            save_checkpoint(ckpt, step, E, opt, rng, meta)
            last_saved = step
        if on_step is not None:
            on_step(step, loss)
    if ckpt is not None and last_saved != step:
        save_checkpoint(ckpt, step, E, opt, rng, meta)
    return E
