"""Fine-tune a SPARC encoder on CPU, resumably.

    python -m sparc_lab.train --base PATH/TO/all-MiniLM-L6-v2 --data ../shared/data/reqa \
        --run ~/.cache/sparc-local-train/run1 --steps 4000

Loss: cross-entropy of g(q,s) over in-batch candidates (each question's positive, a passage
negative and a BM25 negative; SPARC §6.2), plus, with --distill-home, a teacher's scores distilled
into them (sparc_lab/distill.py). f is computed only for the batch's question tokens, never for
the whole vocabulary. Checkpoints are written atomically every --ckpt-every steps and a
rerun of the same command resumes from the last one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from sparc_lab.data import DATA_DIR, TRAIN_SETS, Pool, build_pool, sample_batch
from sparc_lab.distill import Teacher, kl_term
from sparc_lab.hybrid import LexicalFeatures
from sparc_lab.model import TorchEncoder
from sparc_local.errors import UserError
from sparc_local.model.info import load_tokenizer, shipped_model_dir
from sparc_local.model.inputs import CONTEXT_ORDERS, InputSpec, pad_batch, paragraph_inputs
from sparc_local.model.vocab import skip_token_ids
from sparc_local.model.weights import ArchConfig, load_canonical, load_checkpoint, save_canonical
from sparc_local.query.tokens import query_token_ids


def _atomic_save(obj, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


class Trainer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.run = Path(args.run).expanduser()
        self.run.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(args.seed)
        torch.set_num_threads(args.threads)
        base = Path(args.base)
        cfg, w = self._weights(base)
        self.cfg: ArchConfig = cfg
        tok = Path(args.tokenizer or base)
        self.tokenizer = load_tokenizer(tok / "tokenizer.json" if tok.is_dir() else tok)
        vocab = self.tokenizer.get_vocab()
        self.cls_id, self.sep_id = vocab["[CLS]"], vocab["[SEP]"]
        self.skip = skip_token_ids(vocab)
        # tokens the exporter can place in a sentence's top K (it zeroes special and punctuation ids)
        self.kept_vocab = np.setdiff1d(np.arange(len(vocab)), np.asarray(self.skip, dtype=np.int64))
        self.model = TorchEncoder(cfg, w)
        with torch.no_grad():
            self.model.sparsity.fill_(args.w_init)
        self.pool = self._pool()
        self.teacher = self._teacher()
        if args.distill_vectors and self.teacher is None:
            raise UserError("--distill-vectors needs a teacher", "Give --distill-home too.")
        self.lexical = LexicalFeatures(self.pool, self.tokenizer, self.skip) if args.hybrid else None
        self.spec = InputSpec(args.max_length, self.cls_id, self.sep_id, args.context_sentences, args.context_order)
        self.inputs = paragraph_inputs(self.tokenizer, self.pool.paragraphs, self.spec)
        enc_params = [p for n, p in self.model.named_parameters() if p.requires_grad and n != "sparsity"]
        groups = [(enc_params, args.lr), ([self.model.sparsity], args.w_lr)]
        self.opt = torch.optim.Adam([{"params": ps, "lr": lr} for ps, lr in groups if ps])
        self.base_lrs = [lr for ps, lr in groups if ps]
        self.step = 0
        self.rng = np.random.default_rng(args.seed)
        self.log = open(self.run / "train.log.jsonl", "a")
        self._resume()

    def _weights(self, base: Path) -> tuple[ArchConfig, dict]:
        """The weights training starts from."""
        return load_canonical(base) if base.suffix == ".npz" else load_checkpoint(base)

    def _pool(self) -> Pool:
        cache = self.run / "pool.pkl"
        if cache.exists():
            return pickle.loads(cache.read_bytes())
        tech = Path(self.args.tech).expanduser() if self.args.tech else None
        pool = build_pool(Path(self.args.data), seed=self.args.seed, tech_dir=tech, tech_share=self.args.tech_share,
                          rewrite=self.args.tech_rewrite, vocab=self.tokenizer.get_vocab(),
                          natural_first=self.args.tech_natural_first)
        cache.write_bytes(pickle.dumps(pool))
        return pool

    def _teacher(self) -> Teacher | None:
        a = self.args
        if not a.distill_home:
            return None
        model = Path(a.distill_model) if a.distill_model else shipped_model_dir()
        teacher = Teacher.load(model, Path(a.data), TRAIN_SETS, Path(a.distill_home), a.threads)
        if len(teacher.vectors) != len(self.pool.texts):
            raise UserError(f"the teacher's vectors hold {len(teacher.vectors)} sentences, the pool "
                            f"{len(self.pool.texts)}", "Give --data the folder the run's pool.pkl was built from.")
        return teacher

    def _resume(self) -> None:
        ckpt = self.run / "ckpt.pt"
        if not ckpt.exists():
            return
        state = torch.load(ckpt, weights_only=False)
        self.model.load_state_dict(state["model"], strict=False)
        self.opt.load_state_dict(state["opt"])
        self.step = state["step"]
        print(f"resumed from step {self.step}", flush=True)

    def _checkpoint(self) -> None:
        trainable = {n: p for n, p in self.model.state_dict().items() if n != "word"}
        _atomic_save({"model": trainable, "opt": self.opt.state_dict(), "step": self.step,
                      "args": vars(self.args)}, self.run / "ckpt.pt")

    def _lr_scale(self) -> float:
        a = self.args
        if self.step < a.warmup:
            return (self.step + 1) / a.warmup
        return max(0.0, (a.steps - self.step) / max(1, a.steps - a.warmup))

    def _batch_examples(self):
        """Deterministic epoch-wise shuffles, so a resumed run sees the same data order."""
        b = self.args.batch
        n = len(self.pool.train)
        per_epoch = n // b
        epoch, k = divmod(self.step, per_epoch)
        order = list(range(n))
        random.Random(self.args.seed * 1000 + epoch).shuffle(order)
        rng = random.Random(self.args.seed * 10_000_000 + self.step)
        return [self.pool.train[i] for i in order[k * b:(k + 1) * b]], rng

    def _question_tokens(self, questions: list[str]) -> tuple[torch.Tensor, np.ndarray]:
        """The union of the questions' tokens and a (questions, union) 0/1 matrix."""
        qtok = [query_token_ids(self.tokenizer, q, self.skip) for q in questions]
        union = np.unique(np.concatenate(qtok))
        qmask = torch.zeros(len(questions), len(union))
        for i, t in enumerate(qtok):
            qmask[i, np.searchsorted(union, t)] = 1.0
        return qmask, union

    def _sentence_scores(self, cand: list[int], union: np.ndarray, hard: bool = False) -> tuple[torch.Tensor, list[int]]:
        """f(v, s) for the union's tokens, for the candidates -> (f (C, U), the candidate sentences)."""
        tokens = torch.from_numpy(union.astype(np.int64))
        ids, types, mask = (torch.from_numpy(a) for a in pad_batch([self.inputs[c] for c in cand]))
        hidden = self.model(ids, types, mask)
        f = self.model.token_scores(hidden, mask, tokens)
        if self.args.topk:
            f = f * self._keep(f, hard, lambda sample: self.model.topk_threshold(
                hidden, mask, sample, self.args.topk, len(self.kept_vocab)))
        return f, list(cand)

    def _loss(self, questions: list[str], cand: list[int],
              answer_sets: list[set[int]]) -> tuple[torch.Tensor, dict[str, float]]:
        """Cross-entropy of g(q, s) = Σ_{v∈q} f(v, s) (SPARC Eq. 2) over the batch's candidates,
        plus α·T²·KL from the teacher when there is one; (loss, its parts for the log).

        With several answers among the candidates, their probabilities are summed.
        """
        qmask, union = self._question_tokens(questions)
        a = self.args
        cols = np.union1d(union, self.teacher.top_tokens(cand, a.distill_top)) if a.distill_vectors else union
        f_all, sents = self._sentence_scores(cand, cols)
        f = f_all[:, np.searchsorted(cols, union)]
        g = self._score(qmask, union, sents, f)
        g, ce = in_batch_ce(g, sents, answer_sets)
        if self.teacher is None:
            return ce, {}
        kl = kl_term(g, self._score(qmask, union, sents, self.teacher.f(sents, union)), a.distill_temp)
        parts = {"ce": round(ce.item(), 4), "kl": round(kl.item(), 4)}
        loss = ce + a.distill_weight * kl
        if a.distill_vectors:
            # the teacher's vectors themselves, at its top tokens and the questions', for the candidates
            rows = sorted({sents.index(c) for c in cand})
            mse = F.mse_loss(f_all[rows], self.teacher.f([sents[r] for r in rows], cols))
            parts["mse"] = round(mse.item(), 4)
            loss = loss + a.distill_vectors * mse
        return loss, parts

    def _score(self, qmask: torch.Tensor, union: np.ndarray, sents: list[int], f: torch.Tensor) -> torch.Tensor:
        """g(q, s) from f (candidates × union), plus with --hybrid the fused BM25 parts in g's units
        (sparc_lab/hybrid.py), G(q) estimated from these candidates."""
        g = qmask @ f.T
        if self.lexical is None:
            return g
        return g + self.lexical.scores(qmask, union, sents, f.detach().max(0).values)

    def _keep(self, f: torch.Tensor, hard: bool, threshold) -> torch.Tensor:
        """Which of f's weights survive the index's top-K cut: a sigmoid around each sentence's
        estimated K-th value while training (so a token just below the cut still gets a gradient
        to climb it), a hard step for validation."""
        a = self.args
        sample = torch.from_numpy(self.rng.choice(self.kept_vocab, a.topk_sample, replace=False))
        thr = threshold(sample)[:, None]
        if hard:
            return (f >= thr).to(f.dtype)
        return torch.sigmoid((f - thr) / a.topk_temp)

    def train(self) -> None:
        a = self.args
        t0 = time.time()
        self.model.train()
        while self.step < a.steps:
            examples, rng = self._batch_examples()
            questions, cand, answer_sets = sample_batch(self.pool, examples, rng)
            loss, parts = self._loss(questions, cand, answer_sets)
            scale = self._lr_scale()
            for group, lr in zip(self.opt.param_groups, self.base_lrs):
                group["lr"] = lr * scale
            self.opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad], 1.0)
            self.opt.step()
            self.step += 1
            rec = {"step": self.step, "loss": round(loss.item(), 4), **parts,
                   "exp_w": round(math.exp(self.model.sparsity.item()), 3),
                   "lr": self.opt.param_groups[0]["lr"], "elapsed": round(time.time() - t0, 1)}
            self.log.write(json.dumps(rec) + "\n")
            self.log.flush()
            if self.step % 10 == 0:
                done = time.time() - t0
                print(f"step {self.step}/{a.steps} loss {rec['loss']:.3f} exp(w) {rec['exp_w']:.2f} "
                      f"{done / 10:.2f}s/step", flush=True)
                t0 = time.time()
            if self.step % a.ckpt_every == 0 or self.step == a.steps:
                self._checkpoint()
            if a.valid_every and self.step % a.valid_every == 0:
                self.log.write(json.dumps({"step": self.step, "valid": self.validate()}) + "\n")
                self.log.flush()
        self.export()

    @torch.no_grad()
    def validate(self) -> dict:
        """MRR@10 on the held-out du2017 articles, ranking among their own sentences; with --hybrid
        also the hybrid score's, G(q) taken over those sentences."""
        self.model.eval()
        valid = self.pool.valid
        sents = sorted({s for ex in valid for s in ex.answers + ex.passage_negs})
        qmask, union = self._question_tokens([ex.question for ex in valid])
        fs = [self._sentence_scores(sents[i:i + 32], union, hard=True)[0] for i in range(0, len(sents), 32)]
        f = torch.cat(fs)
        self.model.train()
        res = {"mrr@10": _mrr(qmask @ f.T, sents, valid), "questions": len(valid), "sentences": len(sents)}
        if self.lexical is not None:
            res["hybrid_mrr@10"] = _mrr(self._score(qmask, union, sents, f), sents, valid)
        print(f"valid {res}", flush=True)
        return res

    def export(self, out: Path | None = None) -> Path:
        """Canonical weights plus w, which the exporter turns into a shipped ONNX model."""
        out = out or self.run / "final.npz"
        save_canonical(out, self.cfg, self.model.retrieval_weights())
        return out


def in_batch_ce(g: torch.Tensor, sents: list[int], answer_sets: list[set[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of each question's own positive (candidate i for question i) among the batch's
    candidates, the question's other answers masked out; (the masked scores, the mean loss)."""
    n = len(answer_sets)
    is_answer = torch.tensor([[s in answer_sets[i] for s in sents] for i in range(n)])
    own = torch.zeros_like(is_answer)
    own[torch.arange(n), torch.arange(n)] = True
    g = g.masked_fill(is_answer & ~own, float("-inf"))
    pos = g.masked_fill(~own, float("-inf")).logsumexp(1)
    return g, (g.logsumexp(1) - pos).mean()


def _mrr(g: torch.Tensor, sents: list[int], examples: list) -> float:
    """MRR@10 of the scores ``g`` (examples × ``sents``), by evaluation/metrics.py's tie rule."""
    from sparc_local.evaluation.metrics import first_hits_by_score, mrr, positions

    relevant = positions(sents, (ex.answers for ex in examples))
    return round(mrr(first_hits_by_score(g.detach().float().cpu().numpy(), relevant, 10)), 4)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", required=True, help="HF folder (config.json + model.safetensors) or canonical .npz")
    p.add_argument("--tokenizer", help="folder or tokenizer.json (default: --base)")
    p.add_argument("--data", default=str(DATA_DIR))
    p.add_argument("--tech", help="technical pairs (python -m sparc_lab.techdata): its train packages join")
    p.add_argument("--tech-share", type=float, default=0.5, help="share of training questions drawn from --tech")
    p.add_argument("--tech-rewrite", type=float, default=0.0,
                   help="share of --tech headings, terms and options put in question form (training/pseudoq.py)")
    p.add_argument("--tech-natural-first", action="store_true",
                   help="every FAQ and HOWTO pair of --tech joins before the mechanical ones fill the share")
    p.add_argument("--run", required=True, help="checkpoint folder, kept outside the work tree")
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--context-sentences", type=int, default=6, help="see inputs.InputSpec; export with the same")
    p.add_argument("--context-order", choices=CONTEXT_ORDERS, default="document")
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--w-lr", type=float, default=5e-3)
    p.add_argument("--w-init", type=float, default=0.0)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--topk", type=int, default=0,
                   help="train against the index's top-K cut (0: score every token, as the paper does)")
    p.add_argument("--topk-sample", type=int, default=4096, help="vocabulary sample for the K-th value estimate")
    p.add_argument("--topk-temp", type=float, default=0.1, help="sigmoid temperature around the cut")
    p.add_argument("--distill-home", help="data dir whose eval cache holds (or will hold) the teacher's vectors of "
                   "the training sets; the first run encodes them (long). Off without it")
    p.add_argument("--distill-model", help="the teacher's model folder (default: the shipped model)")
    p.add_argument("--distill-weight", type=float, default=1.0, help="α of the distillation term")
    p.add_argument("--distill-temp", type=float, default=1.0, help="softmax temperature T of the distillation term")
    p.add_argument("--distill-vectors", type=float, default=0.0,
                   help="β of a term matching the teacher's f(v,s) itself (mean squared error) at each candidate's "
                        "--distill-top teacher tokens and the questions' (0: off)")
    p.add_argument("--distill-top", type=int, default=64)
    p.add_argument("--hybrid", action="store_true",
                   help="train the score `ask` ranks by in hybrid mode: g plus the fused BM25 parts as fixed features")
    p.add_argument("--snapshot", metavar="NPZ", help="write the run's last checkpoint as canonical weights and stop")
    p.add_argument("--ckpt-every", type=int, default=50)
    p.add_argument("--valid-every", type=int, default=500)
    return p.parse_args(argv)


def run(trainer: Trainer) -> None:
    """Train to the end (resuming where the run stopped), or with --snapshot write its last checkpoint."""
    if trainer.args.snapshot:  # a running run's last checkpoint, to evaluate it while it trains on
        print(f"step {trainer.step} written to {trainer.export(Path(trainer.args.snapshot).expanduser())}")
        return
    print(f"{trainer.cfg.layers} layers; {len(trainer.pool.train)} training questions, {len(trainer.pool.valid)} "
          f"validation, {len(trainer.pool.texts)} sentences; starting at step {trainer.step}", flush=True)
    trainer.train()
    print(f"exported {trainer.run / 'final.npz'}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    run(Trainer(parse_args(argv)))


if __name__ == "__main__":
    main()
