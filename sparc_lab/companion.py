"""Train the MLM companion that `adapt` will run (issue 16), at model-build time (torch; never run by the CLI).

SPARC §5.1 trains E by masked-LM with every other weight frozen. E is shared and frozen during
retrieval fine-tuning, so the model that trains E need not be the retrieval encoder: a companion
(transformer layers + MLM head, decoder tied to E) that predicts masked words well moves E towards
the user's domain more reliably than the shipped head on a frozen sentence-embedding encoder
(held-out MLM loss 6.60). Init: the model's own encoder (read back from model.onnx) and its
mlm_head.npz; E stays the model's own and frozen. BERT masking (15%, 80/10/10) as adapt.

Text: sentences of the training corpora only (sparc_lab/data.py TRAIN_SETS, never an evaluation
set) plus public-domain English text from Debian packages when installed (bible-kjv: the King
James Bible, 1611; dict-devil: Bierce's The Devil's Dictionary, 1911). A fixed 2% of sentences is
held out (mlm_head.py's passage split for the corpora; crc32 of the sentence for the rest).

    python -m sparc_lab.companion [--run DIR] [--steps N] [--batch 32] [--max-length 64]
                                             [--lr 2e-4] [--threads 1]

Resumable: model + optimizer + schedule + step + RNG states are checkpointed atomically every
--save-every steps to DIR/ckpt.pt (default ~/.cache/sparc-local-train/companion, outside the
work tree); DIR/log.jsonl gets step, s/step and train loss every --log-every steps and the
held-out loss/top-1 accuracy every --eval-every steps.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sparc_lab.data import DATA_DIR
from sparc_lab.mlm_head import (
    HELD_OUT,
    Head,
    encode_sentences,
    evaluate,
    held_out_batches,
    load_sentences,
    masked_batch,
    save_head,
    step_loss,
)
from sparc_lab.model import TorchEncoder
from sparc_local.adapt.model_folder import load_adapt_weights
from sparc_local.ingest.sentences import split_sentences
from sparc_local.model.folder import ENCODER_FILE, HEAD_FILE
from sparc_local.model.info import ModelInfo, load_tokenizer, shipped_model_dir
from sparc_local.model.weights import ArchConfig, Weights

DEFAULT_RUN = Path.home() / ".cache" / "sparc-local-train" / "companion"
CKPT_FILE = "ckpt.pt"
LOG_FILE = "log.jsonl"
CORPORA = "corpora"  # held-out set of the training corpora: the set the shipped head's 6.60 was measured on
TEXTS = "texts"  # held-out set of the public-domain texts
# public-domain English in Debian packages: (source name, how to read it)
KJV_COMMAND = ("bible", "-l100000", "gen1:1-rev22:21")  # bible-kjv; one verse a line, no wrapping
DEVIL_FILE = Path("/usr/share/dictd/devil.dict.dz")  # dict-devil; dictzip is gzip-compatible
DEVIL_START = "PREFACE"  # the book starts here, after the dictd header and the edition's notice
_VERSE = re.compile(r"^\s+\d+\s+(.+)$")
MIN_WORDS = 4  # shorter lines are headings, dictionary headwords, signatures


def kjv_sentences() -> list[str]:
    """The King James Bible's verses (public domain), if bible-kjv is installed."""
    if shutil.which(KJV_COMMAND[0]) is None:
        return []
    out = subprocess.run(KJV_COMMAND, capture_output=True, text=True, check=True).stdout
    return [m[1].strip() for line in out.splitlines() if (m := _VERSE.match(line))]


def devil_sentences() -> list[str]:
    """The sentences of The Devil's Dictionary (public domain), if dict-devil is installed."""
    if not DEVIL_FILE.is_file():
        return []
    with gzip.open(DEVIL_FILE, "rt", encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    text = text[text.find(DEVIL_START):].replace("_", "")  # skip the dictd header; _x_ marks italics
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        out += [para[a:b] for a, b in split_sentences(para)]
    return out


def public_domain_texts() -> dict[str, list[str]]:
    """{source: sentences} of the public-domain texts installed; an absent package gives nothing."""
    found = {"bible-kjv": kjv_sentences(), "dict-devil": devil_sentences()}
    return {k: [s for s in v if len(s.split()) >= MIN_WORDS] for k, v in found.items() if v}


def split_held_out(texts: list[str]) -> tuple[list[str], list[str]]:
    """(train, held-out): a fixed 1/HELD_OUT of the distinct sentences by crc32, whatever the order."""
    train, valid = [], []
    for t in dict.fromkeys(texts):
        (valid if zlib.crc32(t.encode()) % HELD_OUT == 0 else train).append(t)
    return train, valid


class Companion(nn.Module):
    """Transformer layers + MLM head over a frozen, shared E."""

    def __init__(self, cfg: ArchConfig, w: Weights) -> None:
        super().__init__()
        self.enc = TorchEncoder(cfg, w)
        self.enc.sparsity.requires_grad_(False)  # SPARC's retrieval parameter: no part of the MLM
        self.head = Head(cfg, w["mlm.bias"])
        with torch.no_grad():
            for name, p in (("mlm.dense.w", self.head.dense.weight), ("mlm.dense.b", self.head.dense.bias),
                            ("mlm.ln.w", self.head.ln.weight), ("mlm.ln.b", self.head.ln.bias)):
                p.copy_(torch.from_numpy(np.asarray(w[name], np.float32)))

    def trainable(self) -> dict[str, nn.Parameter]:
        return {k: p for k, p in self.named_parameters() if p.requires_grad}


def _trained_state(model: Companion) -> dict[str, torch.Tensor]:
    """The state worth checkpointing: E is frozen and reloaded from the model folder."""
    keep = model.trainable()
    return {k: v for k, v in model.state_dict().items() if k in keep}


@dataclass
class _Setup:
    info: ModelInfo
    cfg: ArchConfig
    w: Weights
    identity: dict
    mask_id: int
    pools: list[list[np.ndarray]]  # tokenized training sentences: the corpora, then the texts
    valid: dict[str, list]  # held-out set name -> masked batches


def _setup(model_dir: Path, data_dir: Path, texts: dict[str, list[str]], *, batch: int, max_length: int,
           seed: int, n_valid: int, log: Callable[[str], None]) -> _Setup:
    """The model's weights (E, initial encoder and head), the tokenized sentences and held-out batches."""
    info = ModelInfo.load(model_dir)
    cfg, w, head_meta = load_adapt_weights(info)
    tok = load_tokenizer(info.tokenizer_path)
    mask_id = tok.token_to_id("[MASK]")
    t0 = time.perf_counter()
    corp_train, corp_valid = load_sentences(data_dir)
    text_train, text_valid = split_held_out([s for v in texts.values() for s in v])
    enc = lambda xs: encode_sentences(tok, xs, info.cls_id, info.sep_id, max_length)
    pools = [p for p in (enc(corp_train), enc(text_train)) if p]
    valid = {CORPORA: held_out_batches(tok, info, cfg, corp_valid, n=n_valid, batch=batch, max_length=max_length,
                                       seed=seed, mask_id=mask_id)[0]}
    if text_valid:
        valid[TEXTS] = held_out_batches(tok, info, cfg, text_valid, n=n_valid // 2, batch=batch,
                                        max_length=max_length, seed=seed, mask_id=mask_id, key=8)[0]
    log(f"{len(corp_train)} corpus + {len(text_train)} text sentences to train on "
        f"({', '.join(f'{k} {len(v)}' for k, v in texts.items()) or 'no texts'}); held out "
        f"{len(corp_valid)} + {len(text_valid)}; tokenized in {time.perf_counter() - t0:.1f}s")
    identity = {"model": info.name, "digest": info.extra.get("digest"), "head": head_meta.get("trained"),
                "batch": batch, "max_length": max_length, "seed": seed}
    return _Setup(info, cfg, w, identity, mask_id, pools, valid)


def _load_checkpoint(ckpt: Path, identity: dict) -> dict:
    state = torch.load(ckpt, weights_only=False)
    if state["identity"] != identity:
        raise SystemExit(f"{ckpt} was trained with {state['identity']}, not {identity}: use another --run")
    return state


def train_companion(model_dir: Path, run_dir: Path, *, data_dir: Path, texts: dict[str, list[str]],
                    steps: int = 20000, batch: int = 32, max_length: int = 64, lr: float = 2e-4,
                    warmup: int = 300, text_share: float = 0.25, seed: int = 0, log_every: int = 10,
                    save_every: int = 100, eval_every: int = 200, n_valid: int = 1024,
                    log: Callable[[str], None] = print) -> dict[str, dict]:
    """Train to `steps`, resuming from run_dir's checkpoint; returns the last held-out figures."""
    su = _setup(model_dir, data_dir, texts, batch=batch, max_length=max_length, seed=seed, n_valid=n_valid, log=log)
    cfg, mask_id, pools, valid, identity = su.cfg, su.mask_id, su.pools, su.valid, su.identity
    shares = [1.0] if len(pools) == 1 else [1.0 - text_share, text_share]
    model = Companion(cfg, su.w)
    params = model.trainable()
    decay = [p for k, p in params.items() if p.ndim >= 2 and k != "head.bias"]
    no_decay = [p for k, p in params.items() if not (p.ndim >= 2 and k != "head.bias")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.1, 1 - s / steps))
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt, logf = run_dir / CKPT_FILE, run_dir / LOG_FILE
    step = 0
    if ckpt.is_file():
        state = _load_checkpoint(ckpt, identity)
        model.load_state_dict(state["model"], strict=False)
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        step = state["step"]
        log(f"resumed at step {step}")

    def save() -> None:
        tmp = ckpt.with_name(ckpt.name + ".tmp")
        torch.save({"model": _trained_state(model), "opt": opt.state_dict(), "sched": sched.state_dict(),
                    "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(), "step": step,
                    "identity": identity}, tmp)
        os.replace(tmp, ckpt)

    def record(kind: str, **fields) -> None:
        with open(logf, "a") as fh:
            fh.write(json.dumps({"kind": kind, "step": step, "time": time.time(), **fields}) + "\n")

    def held_out() -> dict[str, dict]:
        model.eval()
        out = {name: evaluate(model.enc, model.head, batches) for name, batches in valid.items()}
        model.train()
        record("valid", **out)
        log(f"step {step}: held-out " + ", ".join(f"{k} loss {v['loss']:.4f} acc {v['acc']:.4f}"
                                                  for k, v in out.items()))
        return out

    last = held_out() if step == 0 else {}
    model.train()
    tick, losses = time.perf_counter(), []
    while step < steps:
        which = rng.choice(len(pools), size=batch, p=shares)
        seqs = [pools[j][i] for j in range(len(pools)) for i in rng.integers(0, len(pools[j]), int((which == j).sum()))]
        inputs, attn, labels = masked_batch(seqs, rng, cfg, mask_id)
        loss, _, _ = step_loss(model.enc, model.head, inputs, attn, labels, encoder_grad=True)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
        sched.step()
        step += 1
        losses.append(float(loss.detach()))
        if step % log_every == 0 or step == steps:
            dt = (time.perf_counter() - tick) / len(losses)
            record("train", loss=float(np.mean(losses)), s_per_step=dt, lr=sched.get_last_lr()[0])
            log(f"step {step}/{steps}: train loss {np.mean(losses):.4f}, {dt:.2f} s/step")
            tick, losses = time.perf_counter(), []
        if step % eval_every == 0 or step == steps:
            last = held_out()
        if step % save_every == 0 or step == steps:
            save()
    return last or held_out()


def export_companion(model_dir: Path, run_dir: Path, out_dir: Path, *, data_dir: Path, batch: int = 32,
                     max_length: int = 64, seed: int = 0, n_valid: int = 1024,
                     log: Callable[[str], None] = print) -> dict:
    """A copy of model_dir whose MLM is the companion's last checkpoint: mlm_encoder.npz (the layers,
    without E) + mlm_head.npz, which adapt's load_adapt_weights runs instead of the model's encoder.
    Returns the held-out corpus loss through torch and through adapt's numpy MLM (they must agree)."""
    su = _setup(model_dir, data_dir, {}, batch=batch, max_length=max_length, seed=seed, n_valid=n_valid, log=log)
    state = _load_checkpoint(run_dir / CKPT_FILE, su.identity)
    model = Companion(su.cfg, su.w)
    model.load_state_dict(state["model"], strict=False)
    model.eval()
    final = evaluate(model.enc, model.head, su.valid[CORPORA])
    if out_dir.exists():
        raise SystemExit(f"{out_dir} exists: export into a new folder")
    shutil.copytree(su.info.path, out_dir, ignore=shutil.ignore_patterns(HEAD_FILE, ENCODER_FILE))
    return save_head(ModelInfo.load(out_dir), model.head, su.cfg, model.enc.export_weights(),
                 f"companion:{run_dir.name}@{state['step']}", final, su.valid[CORPORA],
                 dict(steps=state["step"], batch=batch, max_length=max_length, seed=seed), log)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Train the MLM companion (layers + head, E frozen) adapt will run.")
    p.add_argument("--run", type=Path, default=DEFAULT_RUN, help="checkpoint/log folder")
    p.add_argument("--model", type=Path, help="model folder giving E, the initial encoder and head (default: shipped)")
    p.add_argument("--data", type=Path, default=DATA_DIR, help="folder of the ReQA sets")
    p.add_argument("--no-texts", action="store_true", help="train on the training corpora only")
    p.add_argument("--text-share", type=float, default=0.25, help="share of a batch drawn from the texts")
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--save-every", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--valid", type=int, default=1024, help="held-out corpus sentences scored (half as many texts)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--export", type=Path, metavar="DIR",
                   help="instead of training, write a copy of the model with the last checkpoint as its MLM")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    log = lambda s: print(time.strftime("%H:%M:%S ") + s, flush=True)
    if a.export:
        out = export_companion(a.model or shipped_model_dir(), a.run, a.export, data_dir=a.data, batch=a.batch,
                               max_length=a.max_length, seed=a.seed, n_valid=a.valid, log=log)
        print(json.dumps(out))
        return
    texts = {} if a.no_texts else public_domain_texts()
    out = train_companion(a.model or shipped_model_dir(), a.run, data_dir=a.data, texts=texts, steps=a.steps,
                          batch=a.batch, max_length=a.max_length, lr=a.lr, warmup=a.warmup, text_share=a.text_share,
                          seed=a.seed, log_every=a.log_every, save_every=a.save_every, eval_every=a.eval_every,
                          n_valid=a.valid, log=log)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
