"""Train the masked-LM head that `adapt` needs, at model-build time (torch; never run by the CLI).

all-MiniLM-L6-v2 ships without its pretraining head, so one is trained here on general text:
transform dense + GELU + LayerNorm + output bias, the decoder tied to E, the encoder and E frozen
(exactly the head adapt/mlm.py runs). Text: the sentences of the training corpora only
(squad-train-head, du2017-train, wikiqa-train); never an evaluation set. BERT masking as adapt.

    python -m sparc_lab.mlm_head --encoder ENCODER --model MODEL_DIR [--steps 300] [--run DIR]

ENCODER is either an HF folder (the original PLM, SPARC §5.1's choice; its weights are then saved
next to the head as mlm_encoder.npz, since adapt must run the same encoder) or a model folder
(the fine-tuned SPARC encoder, read back from its model.onnx; nothing else to ship). E is always
MODEL_DIR's own, the matrix adapt trains. Resumable: checkpoints and logs go to --run
(default ~/.cache/sparc-local-train/mlm-head-<model>-<encoder>/), outside the work tree.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sparc_lab.data import DATA_DIR, TRAIN_SETS
from sparc_local.adapt.model_folder import load_adapt_weights
from sparc_local.adapt.train_embeddings import mask_tokens, pad_sequences
from sparc_local.model.folder import ENCODER_FILE, HEAD_FILE, HEAD_NAMES, load_encoder_weights, save_npz
from sparc_local.model.info import CONFIG_FILE, ModelInfo
from sparc_local.model.weights import ArchConfig, Weights

HELD_OUT = 50  # passages with crc32 % HELD_OUT == 0 are held out for validation
MAX_FP16_LOSS_GAIN = 0.005  # save the head in fp16 unless that costs more validation loss than this


def load_sentences(data_dir: Path) -> tuple[list[str], list[str]]:
    """(train, held-out) sentences of the training corpora, deduplicated, split by passage."""
    seen: set[str] = set()
    train, valid = [], []
    for name in TRAIN_SETS:
        with gzip.open(Path(data_dir) / name / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                text = r["text"].strip()
                if not text or text in seen:
                    continue
                seen.add(text)
                key = f"{name}/{r['passage']}".encode()
                (valid if zlib.crc32(key) % HELD_OUT == 0 else train).append(text)
    return train, valid


def encode_sentences(tokenizer, texts: list[str], cls_id: int, sep_id: int, max_length: int) -> list[np.ndarray]:
    """"[CLS] sentence [SEP]", as adapt feeds them."""
    out = []
    for e in tokenizer.encode_batch(texts, add_special_tokens=False):
        if e.ids:
            out.append(np.asarray([cls_id, *e.ids[: max_length - 2], sep_id], np.int64))
    return out


class Head(nn.Module):
    """BERT's MLM head: t = LN(GELU(H·W_dᵀ + b_d)); logits = t·Eᵀ + b, E frozen and shared."""

    def __init__(self, cfg: ArchConfig, prior: np.ndarray) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden, cfg.hidden)
        # identity start: H already lives in E's space (H·e_v is what SPARC and the MLM both score)
        with torch.no_grad():
            self.dense.weight.copy_(torch.eye(cfg.hidden))
            self.dense.bias.zero_()
        self.ln = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.bias = nn.Parameter(torch.from_numpy(prior.astype(np.float32)))  # log unigram prior

    def forward(self, h: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
        return self.ln(F.gelu(self.dense(h))) @ E.T + self.bias

    def export(self) -> Weights:
        g = lambda t: t.detach().cpu().numpy().astype(np.float32).copy()
        return {"mlm.dense.w": g(self.dense.weight), "mlm.dense.b": g(self.dense.bias), "mlm.ln.w": g(self.ln.weight),
                "mlm.ln.b": g(self.ln.bias), "mlm.bias": g(self.bias)}


def _load_encoder(path: Path, model: ModelInfo) -> tuple[ArchConfig, Weights, str]:
    """(cfg, weights with the model's E, kind): kind "model" if it is the model's own encoder."""
    path = Path(path)
    if (path / CONFIG_FILE).is_file():
        info = ModelInfo.load(path)
        cfg, w = load_encoder_weights(info)
        kind = "model" if path.resolve() == model.path.resolve() else f"folder:{info.id}"
    else:
        from sparc_local.model.weights import load_checkpoint

        cfg, w = load_checkpoint(path)
        w = {k: v for k, v in w.items() if not k.startswith("mlm.")}
        kind = f"original:{path.name}"
    mcfg, mw = load_encoder_weights(model)
    if (cfg.vocab_size, cfg.hidden) != (mcfg.vocab_size, mcfg.hidden):
        raise SystemExit(f"encoder {path} does not fit the model {model.name}")
    w["emb.word"] = mw["emb.word"]
    return cfg, w, kind


def masked_batch(seqs: list[np.ndarray], rng: np.random.Generator, cfg: ArchConfig, mask_id: int):
    """(inputs, attention mask, labels) of one padded, BERT-masked batch."""
    ids, attn, special = pad_sequences(seqs)
    inputs, labels = mask_tokens(ids, special, rng, cfg.vocab_size, mask_id=mask_id)
    return inputs, attn, labels


def step_loss(enc, head: Head, inputs: np.ndarray, attn: np.ndarray, labels: np.ndarray,
               encoder_grad: bool = False) -> tuple[torch.Tensor, int, int]:
    """(mean CE over masked tokens, correct top-1, masked count); a frozen encoder runs without grad."""
    ids_t, attn_t = torch.from_numpy(inputs), torch.from_numpy(attn)
    with torch.set_grad_enabled(encoder_grad and torch.is_grad_enabled()):
        h = enc(ids_t, torch.zeros_like(ids_t), attn_t)
    lab = torch.from_numpy(labels).reshape(-1)
    sel = lab != -100
    logits = head(h.reshape(-1, h.shape[-1])[sel], enc.word)
    y = lab[sel]
    return F.cross_entropy(logits, y), int((logits.argmax(-1) == y).sum()), int(sel.sum())


def held_out_batches(tok, model: ModelInfo, cfg: ArchConfig, texts: list[str], *, n: int, batch: int,
                     max_length: int, seed: int, mask_id: int, key: int = 7) -> tuple[list, int]:
    """(masked batches, sentences scored): a fixed sample of n held-out sentences with fixed masks,
    so every evaluation of a run (and of every head trained with the same seed) scores the same tokens."""
    vrng = np.random.default_rng([seed, key])
    vsel = vrng.choice(len(texts), size=min(n, len(texts)), replace=False)
    vseqs = encode_sentences(tok, [texts[i] for i in sorted(vsel)], model.cls_id, model.sep_id, max_length)
    return [masked_batch(vseqs[i:i + batch], vrng, cfg, mask_id) for i in range(0, len(vseqs), batch)], len(vseqs)


def evaluate(enc, head: Head, valid: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> dict:
    loss = correct = n = 0.0
    with torch.no_grad():
        for inputs, attn, labels in valid:
            l, c, m = step_loss(enc, head, inputs, attn, labels)
            loss += float(l) * m
            correct += c
            n += m
    return {"loss": loss / n, "acc": correct / n, "tokens": int(n)}


def numpy_loss(model_dir: Path, valid: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> float:
    """The held-out loss through adapt's own numpy MLM and the saved files: proof the export works."""
    from sparc_local.adapt.mlm import forward_backward, prepare

    info = ModelInfo.load(model_dir)
    cfg, w, _ = load_adapt_weights(info)
    fw = prepare(cfg, w)
    E = w["emb.word"]
    total = n = 0.0
    for inputs, attn, labels in valid:
        m = int((labels != -100).sum())
        loss, _ = forward_backward(cfg, fw, E, inputs, np.zeros_like(inputs) if info.has_segments else None,
                                   attn, labels, mode="output_only")
        total += loss * m
        n += m
    return total / n


def train_head(encoder_path: Path, model_dir: Path, run_dir: Path, *, data_dir: Path, steps: int = 300,
               batch: int = 32, max_length: int = 64, lr: float = 1e-3, seed: int = 0, eval_every: int = 50,
               n_valid: int = 1024, log: Callable[[str], None] = print) -> dict:
    """Train, checkpointing to run_dir (resumes from it), then write MODEL_DIR/mlm_head.npz."""
    from sparc_lab.model import TorchEncoder
    from sparc_local.model.info import load_tokenizer

    model = ModelInfo.load(model_dir)
    cfg, w, kind = _load_encoder(encoder_path, model)
    tok = load_tokenizer(model.tokenizer_path)
    mask_id = tok.token_to_id("[MASK]")
    train_txt, valid_txt = load_sentences(data_dir)
    t0 = time.perf_counter()
    train = encode_sentences(tok, train_txt, model.cls_id, model.sep_id, max_length)
    valid, n_scored = held_out_batches(tok, model, cfg, valid_txt, n=n_valid, batch=batch, max_length=max_length,
                                       seed=seed, mask_id=mask_id)
    log(f"{len(train)} train / {len(valid_txt)} held-out sentences ({n_scored} scored), "
        f"tokenized in {time.perf_counter() - t0:.1f}s; encoder {kind}")

    counts = np.bincount(np.concatenate(train), minlength=cfg.vocab_size).astype(np.float64)
    prior = np.log((counts + 1.0) / (counts.sum() + cfg.vocab_size))
    enc = TorchEncoder(cfg, w).eval()
    for p in enc.parameters():
        p.requires_grad_(False)
    head = Head(cfg, prior)
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * max(0.05, 1 - s / steps))
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt, logf = run_dir / "ckpt.pt", run_dir / "train.log.jsonl"
    step = 0
    if ckpt.is_file():
        state = torch.load(ckpt, weights_only=False)
        head.load_state_dict(state["head"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        rng.bit_generator.state = state["rng"]
        step = state["step"]
        log(f"resumed at step {step}")

    def save() -> None:
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                    "rng": rng.bit_generator.state, "step": step}, tmp)
        os.replace(tmp, ckpt)

    def record(kind_: str, **fields) -> None:
        with open(logf, "a") as fh:
            fh.write(json.dumps({"kind": kind_, "step": step, "time": time.time(), **fields}) + "\n")

    if step == 0:
        ev = evaluate(enc, head, valid)
        record("valid", **ev)
        log(f"step 0: held-out loss {ev['loss']:.4f} acc {ev['acc']:.4f}")
    tick, run_loss = time.perf_counter(), []
    while step < steps:
        inputs, attn, labels = masked_batch([train[i] for i in rng.integers(0, len(train), size=batch)], rng, cfg, mask_id)
        loss, _, _ = step_loss(enc, head, inputs, attn, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        step += 1
        run_loss.append(float(loss.detach()))
        if step % eval_every == 0 or step == steps:
            dt = (time.perf_counter() - tick) / len(run_loss)
            ev = evaluate(enc, head, valid)
            record("valid", **ev, train_loss=float(np.mean(run_loss)), s_per_step=dt)
            log(f"step {step}/{steps}: train loss {np.mean(run_loss):.4f}, held-out loss {ev['loss']:.4f} "
                f"acc {ev['acc']:.4f}, {dt:.2f} s/step, ETA {dt * (steps - step) / 60:.1f} min")
            save()
            tick, run_loss = time.perf_counter(), []

    final = evaluate(enc, head, valid)
    return save_head(model, head, cfg, w, kind, final, valid, dict(steps=steps, batch=batch, max_length=max_length, lr=lr,
                                                           seed=seed, data=list(TRAIN_SETS)), log)


def save_head(model: ModelInfo, head: Head, cfg: ArchConfig, w: Weights, kind: str, final: dict, valid, recipe: dict,
          log: Callable[[str], None]) -> dict:
    """Write mlm_head.npz (and mlm_encoder.npz for a separate encoder), fp16 if that costs nothing."""
    hw = head.export()
    meta = {"encoder": kind, "trained": recipe, "held_out": final}
    if kind == "model":
        meta["encoder_digest"] = model.extra.get("digest")
        enc_w = None
    else:
        meta["encoder_file"] = ENCODER_FILE
        enc_w = {k: v for k, v in w.items() if k != "emb.word"}
    results = {}
    for dtype in (np.float16, np.float32):
        kind_ = np.dtype(dtype).name
        save_npz(model.path / HEAD_FILE, {k: hw[k].astype(dtype) for k in HEAD_NAMES}, {**meta, "dtype": kind_})
        if enc_w is not None:
            save_npz(model.path / ENCODER_FILE, {k: v.astype(dtype) for k, v in enc_w.items()}, {"dtype": kind_})
        results[kind_] = numpy_loss(model.path, valid)
        log(f"saved as {kind_}: held-out loss through adapt's numpy MLM {results[kind_]:.4f}")
        if dtype is np.float16 and results["float16"] - final["loss"] <= MAX_FP16_LOSS_GAIN:
            break
    log(f"wrote {model.path / HEAD_FILE}" + (f" and {ENCODER_FILE}" if enc_w is not None else ""))
    return {"torch": final, "numpy": results}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Train the MLM head adapt needs (build time, torch).")
    p.add_argument("--encoder", required=True, type=Path, help="HF folder (original PLM) or a model folder")
    p.add_argument("--model", required=True, type=Path, help="the model folder that receives mlm_head.npz")
    p.add_argument("--data", type=Path, default=DATA_DIR, help="folder of the ReQA sets")
    p.add_argument("--run", type=Path, help="checkpoint/log folder (default ~/.cache/sparc-local-train/mlm-head-*)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--valid", type=int, default=1024, help="held-out sentences scored")
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    which = "model" if (a.encoder / CONFIG_FILE).is_file() and a.encoder.resolve() == a.model.resolve() else "orig"
    run = a.run or Path.home() / ".cache" / "sparc-local-train" / f"mlm-head-{a.model.name}-{which}"
    out = train_head(a.encoder, a.model, run, data_dir=a.data, steps=a.steps, batch=a.batch_size,
                     max_length=a.max_length, lr=a.lr, seed=a.seed, eval_every=a.eval_every, n_valid=a.valid,
                     log=lambda s: print(time.strftime("%H:%M:%S ") + s, flush=True))
    (run / "result.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
